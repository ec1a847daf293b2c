// A public schema (schema/public_schema.h) derived from the private records
// under (epsilon, delta)-differential privacy, for users who cannot write one
// from public knowledge (docs/privacy.md "Deriving the schema privately").
//
// Two Gaussian releases over the k columns; in each, every record adds 1 to
// exactly one cell of each column, so each release has L2 sensitivity
// sqrt(k), and each cell gets noise N(0, s^2) with s = sigma sqrt(k):
//   1. shape (skipped when the user gives every column's type): per column, a
//      histogram over PUBLIC classes: a missing spelling (IsMissing); a number
//      (ParseDecimal) by its precision 0..9 or more; the first format of
//      DatetimeFormats() that reads it; anything else by its length in code
//      points (1-8, 9-16, ..., 2049-4096, longer). The type follows from the
//      noisy counts (below).
//   2. values, per column by the type chosen (adaptive composition):
//      numeric: a histogram over a public grid of magnitudes (0 and
//        +-{1, 2, 5} x 10^e, e = -6..15) -> min / max: from the decade with
//        the largest count, widened through neighbouring decades whose noisy
//        sum exceeds two stddevs, trimmed inside the outer decades of cells
//        below one stddev (GroupedHull); plus one cell per missing spelling;
//      datetime: a histogram of years (one cell per year in 1900..2099, per
//        decade in 1000..1899 and 2100..2999, [0, 1000), [3000, 10000)) ->
//        min_year / max_year the same way over decades; plus one cell per
//        missing spelling;
//      categorical or text: the noisy count of each distinct value; a value
//        is released only when its noisy count exceeds tau (partition
//        selection: a value held by one record passes with probability at
//        most delta_threshold / k, at most k such values per record). The
//        column is categorical when the released values hold >= half of the
//        noisy row count, else text (max_length from release 1).
// "Visible" classes: noisy count > s z with z chosen so that a column's
// classes show a false one with probability <= 0.1%; when none is visible,
// the largest. Everything after the noise is post-processing.
// Guarantee: the two releases compose by RDP into (epsilon, delta / 2); the
// thresholding adds delta / 2: (epsilon, delta)-DP at the record level.
// Composition with the training run that uses the schema: basic (epsilons and
// deltas add); the schema file records what it spent ("privacy").
#pragma once

#include <map>
#include <string>
#include <vector>

#include "privacy/secure_noise.h"
#include "schema/public_schema.h"
#include "util/status.h"

namespace ds {

struct PrivateSchemaOptions {
  double epsilon = 0;  // > 0
  double delta = 0;    // in (0, 1)
  // Public type choices (field_types syntax of column_type.h, without
  // parameters except datetime:<format>); columns not named are typed from
  // release 1. When every column is named, release 1 is skipped.
  std::map<std::string, std::string> field_types;
};

struct PrivateSchemaReport {
  int releases = 0;               // Gaussian releases (1 or 2)
  double noise_multiplier = 0;    // sigma: stddev / L2 sensitivity, per release
  double cell_stddev = 0;         // s = sigma sqrt(k)
  double value_threshold = 0;     // tau (categorical / text values)
  double epsilon = 0, delta = 0;  // spent (the Gaussian part's epsilon; delta in all)
  std::vector<std::string> notes; // per column, how its type was chosen
  std::string Describe() const;
};

Result<PublicSchema> DerivePrivateSchema(const std::vector<std::string>& header,
                                         const std::vector<std::vector<std::string>>& records,
                                         const PrivateSchemaOptions& options,
                                         SecureGaussian* noise, PrivateSchemaReport* report);

// The noise multiplier for `releases` Gaussian releases composing (RDP) to
// `epsilon` at `delta` (the smallest, to a relative 1e-6).
double SchemaNoiseMultiplier(double epsilon, double delta, int releases);
// z with P(N(0, 1) > z) = p (0 < p < 1).
double GaussianUpperQuantile(double p);

}  // namespace ds
