// Numeric bins chosen under dp (docs/privacy.md "Bins from a DP release").
//
// A public schema's bounds are generous round numbers, so its uniform bins
// put most of a column into one or two of them (diamonds' z: 0-100 mm in 32
// bins, the data in 2-6; depth 0-200, the data in 58-66): the first token of
// the value then says almost nothing, the pair tables of the calibration
// (which act on first tokens) carry no relation, and the values inside a bin
// come from the network's noisy digits (synthetic z-x Pearson 0.22 against
// 0.97). The adaptive columns (integer / decimal, no `bins` in the schema,
// more than kExactValues values) are instead binned at the quantiles of one
// Gaussian release of their fine histograms:
//
//   h_j[c]  the count of column j's values in fine cell c (F = min(values,
//           kFineCells) uniform cells over [lo, hi]), c < F; each record adds
//           1 to one cell of each adaptive column (a missing value to none),
//           so the k histograms have L2 sensitivity sqrt(k);
//   h~_j = h_j + N(0, (sigma sqrt(k))^2) per cell.
//
// Post-processing only, from h~: the support (KeepContiguous over the 32
// coarse cells of the schema's default bins, as the calibration trims), the
// edges of its runs, and nb = clamp(n / kRowsPerBin, kMinBins, kMaxBins)
// quantile edges of the clamped fine histogram inside it (n = the record
// count, public as everywhere in the accounting); each coarse cell outside
// the support becomes a bin of its own, so a value can only land there when
// the calibration's own 1-way measurement gives that cell mass, and then
// within it (one bin for the whole outside put diamonds' y, 3.7-10.5 mm
// real, at 89-99 mm in 0.2% of the rows at epsilon 4: its Pearson with x
// 0.97 -> 0.31).
//
// The release is a share (`dp_bins_share`) of the marginals' release of
// noise multiplier sigma_m: sigma = sigma_m / sqrt(share), and the
// calibration's measurements then use sigma_m / sqrt(1 - share): the Renyi DP
// a / (2 sigma^2) + a / (2 sigma'^2) = a / (2 sigma_m^2) at every order, the
// one release the plan accounts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "privacy/secure_noise.h"
#include "schema/public_schema.h"
#include "util/status.h"

namespace ds {

inline constexpr int kFineCells = 1024;

// The schema columns whose bins a dp run chooses (see above).
std::vector<int> AdaptiveBinColumns(const PublicSchema& s);

// Whether the release is worth its share: a quantile bin's expected count
// n / FieldTokenizer::QuantileBins(n) at least kDpBinsMinSignal per-cell noise stddevs
// (sigma sqrt(k), k adaptive columns). Below it the noisy quantiles cost more
// than the uniform bins (measured, docs/privacy.md: penguins, 275 records,
// lost 5-17 points at epsilon 1-10 with them, at a ratio of 11 and below;
// diamonds at epsilon 1, ratio 34, gained 20). Public quantities only.
inline constexpr double kDpBinsMinSignal = 20;
bool DpBinsPay(int64_t n, double sigma, int k);

// The bin edges (scaled, lo .. hi + 1) of one column from its noisy fine
// histogram `h` (the cells of UniformBinEdges(lo, hi, F)), per-cell noise
// stddev `stddev`, `bins` quantile bins. Empty when no cell stands above the
// noise (the schema's uniform bins then stay).
std::vector<int64_t> DpQuantileEdges(int64_t lo, int64_t hi, std::vector<double> h, double stddev,
                                     int bins);

// The marginals' release of noise multiplier sigma_m split between the bins
// (share `share`) and the calibration's measurements (the rest).
struct ReleaseSplit {
  double bins = 0;  // sigma_m / sqrt(share)
  double rest = 0;  // sigma_m / sqrt(1 - share); sigma_m when share is 0
};
ReleaseSplit SplitRelease(double sigma_m, double share);

// Measures the adaptive columns' fine histograms of `records` (conformed to
// `s`) with noise multiplier `sigma` (> 0) and returns one entry per schema
// column: the chosen edges, or empty (uniform bins). `records` counts n.
Result<std::vector<std::vector<int64_t>>> MeasureDpBinEdges(
    const PublicSchema& s, const std::vector<std::vector<std::string>>& records, double sigma,
    SecureGaussian* noise);

}  // namespace ds
