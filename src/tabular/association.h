// Pairwise association between table columns, for grouping related columns
// into the same batch and choosing conditioning columns (tabular/plan.h).
//
// Column kinds (from the learned column rules, generate/column_rules.h):
//   numeric      integer / decimal columns: values parsed as doubles; a
//                missing value ("" or a learned missing spelling) is NaN.
//   categorical  category columns, and text columns with few distinct values
//                (<= max_levels and <= half the sampled rows): one code per
//                distinct value, a missing value is a level of its own.
//   none         free text (ids, names, sentences): no association (0).
//
// Measures, all in [0, 1] and symmetric:
//   numeric / numeric          |Pearson r| over the rows where both are present
//   categorical / categorical  Cramér's V with Bergsma's bias correction:
//       phi2 = chi2 / n,  phi2c = max(0, phi2 - (r-1)(c-1)/(n-1)),
//       rc = r - (r-1)^2/(n-1),  cc = c - (c-1)^2/(n-1),
//       V = sqrt(phi2c / min(rc - 1, cc - 1))   (0 when min(...) <= 0)
//   categorical / numeric      correlation ratio
//       eta = sqrt( sum_g n_g (mean_g - mean)^2 / sum_i (x_i - mean)^2 )
//       over the rows where the numeric value is present
// Pairs with fewer than 3 usable rows, or a constant side, score 0. The
// diagonal is 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schema/column_rules.h"

namespace ds {

enum class AssocKind { kNone, kNumeric, kCategorical };

struct ColumnProfile {
  AssocKind kind = AssocKind::kNone;
  std::vector<double> num;    // [rows] kNumeric: value, NaN = missing
  std::vector<int32_t> code;  // [rows] kCategorical: level code in [0, levels)
  int32_t levels = 0;
};

struct ProfileOptions {
  int64_t max_rows = 5000;  // rows sampled, evenly spaced over the table (0 = all)
  int max_levels = 100;     // text columns with more distinct values are kind none
};

// One profile per column of `rules` (same order as each row's fields).
std::vector<ColumnProfile> ProfileColumns(const ColumnRules& rules,
                                          const std::vector<std::vector<std::string>>& rows,
                                          const ProfileOptions& options = {});

// |Pearson r| over pairwise-complete rows (NaN = missing).
double AbsPearson(const std::vector<double>& x, const std::vector<double>& y);
// Bias-corrected Cramér's V of two code vectors.
double CramersV(const std::vector<int32_t>& a, int32_t levels_a, const std::vector<int32_t>& b,
                int32_t levels_b);
// Correlation ratio of numeric `x` (NaN = missing) given categories `g`:
// evaluate's (evaluate/metrics.h), 0 with fewer than 3 complete rows.
double CorrelationRatio(const std::vector<int32_t>& g, int32_t levels,
                        const std::vector<double>& x);

// The association of two profiles (see the file comment).
double Association(const ColumnProfile& a, const ColumnProfile& b);

// Symmetric matrix [k * k], row-major, diagonal 1.
std::vector<double> AssociationMatrix(const std::vector<ColumnProfile>& profiles);

}  // namespace ds
