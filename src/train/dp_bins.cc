#include "train/dp_bins.h"

#include <algorithm>
#include <cmath>

#include "schema/column_type.h"
#include "tokenize/field_tokenizer.h"
#include "train/marginals.h"

namespace ds {

std::vector<int> AdaptiveBinColumns(const PublicSchema& s) {
  std::vector<int> out;
  for (size_t i = 0; i < s.columns.size(); ++i) {
    const PublicColumn& c = s.columns[i];
    if (!IsNumericField(c.type) || c.bins != 0) continue;
    int64_t lo = 0, hi = 0;
    ScaledBounds(c, &lo, &hi);
    if (hi - lo + 1 > PublicSchema::kExactValues) out.push_back(int(i));
  }
  return out;
}

bool DpBinsPay(int64_t n, double sigma, int k) {
  if (k < 1 || !(sigma > 0)) return false;
  return double(n) / FieldTokenizer::QuantileBins(n) >= kDpBinsMinSignal * sigma * std::sqrt(double(k));
}

namespace {

// Coarse cells (the schema's default bins) trimmed as the calibration trims
// (KeepContiguous): kept[g] for g < C; fine cell c lies in coarse c * C / F.
// None kept when no coarse cell stands above its noise.
std::vector<char> KeptCoarse(const std::vector<double>& h, double stddev, int C) {
  const size_t F = h.size();
  std::vector<double> cs(size_t(C), 0.0);
  for (size_t c = 0; c < F; ++c) cs[c * size_t(C) / F] += h[c];
  const double threshold = stddev * std::sqrt(double(F) / C);
  std::vector<char> kept(static_cast<size_t>(C), 0);
  if (!(*std::max_element(cs.begin(), cs.end()) > threshold)) return kept;  // nothing shows
  KeepContiguous(&cs, 0, threshold);
  for (int g = 0; g < C; ++g) kept[size_t(g)] = cs[size_t(g)] != 0;
  return kept;
}

}  // namespace

std::vector<int64_t> DpQuantileEdges(int64_t lo, int64_t hi, std::vector<double> h, double stddev,
                                     int bins) {
  const std::vector<int64_t> cells = UniformBinEdges(lo, hi, int(h.size()));
  if (cells.size() != h.size() + 1 || h.empty() || bins < 1) return {};
  const size_t F = h.size();
  const int C = int(std::min<size_t>(F, size_t(PublicSchema::kDefaultBins)));
  const std::vector<char> kept = KeptCoarse(h, stddev, C);
  double total = 0;
  for (size_t c = 0; c < F; ++c) {
    h[c] = kept[c * size_t(C) / F] ? std::max(0.0, h[c]) : 0.0;
    total += h[c];
  }
  if (!(total > 0)) return {};
  // The range's ends, each kept run's ends, and every coarse cell outside
  // the support as a bin of its own (one bin for the whole outside let a
  // value the calibration put there land anywhere up to the schema's bound),
  // then the quantiles inside the runs.
  std::vector<int64_t> e = {lo, hi + 1};
  for (size_t c = 1; c < F; ++c) {
    const size_t g = c * size_t(C) / F, prev = (c - 1) * size_t(C) / F;
    if (g != prev && (!kept[g] || !kept[prev])) e.push_back(cells[c]);
  }
  double cum = 0;
  int k = 1;
  for (size_t c = 0; c < F && k < bins; ++c) {
    if (!(h[c] > 0)) continue;
    while (k < bins && cum + h[c] >= total * k / bins) {
      const double frac = std::clamp((total * k / bins - cum) / h[c], 0.0, 1.0);
      e.push_back(cells[c] + int64_t(std::floor(frac * double(cells[c + 1] - cells[c]))));
      ++k;
    }
    cum += h[c];
  }
  std::sort(e.begin(), e.end());
  e.erase(std::unique(e.begin(), e.end()), e.end());
  if (e.size() > size_t(FieldTokenizer::kExactBins) + 1) return {};
  return e;
}

ReleaseSplit SplitRelease(double sigma_m, double share) {
  if (!(share > 0)) return {0, sigma_m};
  return {sigma_m / std::sqrt(share), sigma_m / std::sqrt(1.0 - share)};
}

Result<std::vector<std::vector<int64_t>>> MeasureDpBinEdges(
    const PublicSchema& s, const std::vector<std::vector<std::string>>& records, double sigma,
    SecureGaussian* noise) {
  std::vector<std::vector<int64_t>> out(s.columns.size());
  const std::vector<int> cols = AdaptiveBinColumns(s);
  if (cols.empty()) return out;
  if (!(sigma > 0) || !noise) return DS_ERR(kInternal, "dp bins: a release without noise");
  const double stddev = sigma * std::sqrt(double(cols.size()));
  const int64_t n = int64_t(records.size());
  const int bins = FieldTokenizer::QuantileBins(n);
  for (int j : cols) {
    const PublicColumn& c = s.columns[size_t(j)];
    int64_t lo = 0, hi = 0;
    ScaledBounds(c, &lo, &hi);
    const std::vector<int64_t> cells =
        UniformBinEdges(lo, hi, int(std::min<int64_t>(hi - lo + 1, kFineCells)));
    std::vector<double> h(cells.size() - 1, 0.0);
    for (const auto& rec : records) {
      ScaledNumber v;
      if (size_t(j) >= rec.size() || !ParseNumber(rec[size_t(j)], &v) || v.decimals > c.decimals)
        continue;  // a missing spelling: no cell
      const int64_t x = std::clamp(Rescale(v, c.decimals), lo, hi);
      h[size_t(std::upper_bound(cells.begin(), cells.end(), x) - cells.begin() - 1)] += 1;
    }
    std::vector<double> z(h.size());
    noise->FillDouble(z.data(), z.size(), stddev);
    for (size_t i = 0; i < h.size(); ++i) h[i] += z[i];
    out[size_t(j)] = DpQuantileEdges(lo, hi, std::move(h), stddev, bins);
  }
  return out;
}

}  // namespace ds
