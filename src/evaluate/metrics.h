// Statistical building blocks of the quality report. Each is a plain function
// with its equation here, tested on closed-form cases (tests/evaluate_test.cc).
//
//   Jensen-Shannon distance (base-2 logs, in [0, 1]):
//     p, q normalised counts, m = (p + q) / 2,
//     JSD(p, q) = sqrt( (KL(p || m) + KL(q || m)) / 2 ),  KL(a || b) = sum a_i log2(a_i / b_i).
//   Pearson correlation (in [-1, 1]) on the rows where both values are present;
//     0 when either side has zero variance.
//   Theil's uncertainty coefficient (asymmetric, in [0, 1]):
//     U(X | Y) = (H(X) - H(X | Y)) / H(X): the share of X's entropy that Y explains;
//     1 when H(X) = 0 (a constant X is fully "explained").
//   Correlation ratio eta (in [0, 1]) between a categorical C and a numeric Y:
//     eta^2 = sum_c n_c (mean_c - mean)^2 / sum_i (y_i - mean)^2 ; 0 when Y is constant.
//   KSComplement (SDMetrics): 1 - D, D = sup_x |F_real(x) - F_synth(x)| the two-sample
//     Kolmogorov-Smirnov statistic on the non-missing values.
//   TVComplement (SDMetrics): 1 - (1/2) sum_v |p_real(v) - p_synth(v)| over the union of
//     non-missing categories.
//   Top-2 principal components of a data matrix (centred, not scaled here).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ds {

// `p` and `q` are non-negative counts or weights of the same bins (not
// necessarily normalised). Returns 0 when both are empty, 1 when one is.
double JensenShannonDistance(const std::vector<double>& p, const std::vector<double>& q);

// x, y: [n] with NaN = missing (pairwise deletion).
double PearsonCorrelation(const double* x, const double* y, size_t n);

// x, y: [n] category codes in [0, kx) and [0, ky) (missing is one of the codes).
double TheilsU(const int32_t* x, int kx, const int32_t* y, int ky, size_t n);

// c: [n] category codes in [0, kc); y: [n] values, NaN = missing (row skipped).
double CorrelationRatio(const int32_t* c, int kc, const double* y, size_t n);

// Two-sample Kolmogorov-Smirnov statistic D; NaN values are dropped. Returns NaN
// when either side has no values.
double KolmogorovSmirnovStatistic(std::vector<double> a, std::vector<double> b);
double KSComplement(const std::vector<double>& real, const std::vector<double>& synthetic);

// Category codes, negative = missing (dropped, as SDMetrics does). NaN when
// either side has no values.
double TVComplement(const std::vector<int32_t>& real, const std::vector<int32_t>& synthetic);

// Principal components of the rows of x: [n, d] row-major. Centres on the
// column means; the components are the top-2 eigenvectors of the covariance
// (1 / (n - 1)) X_c^T X_c, found by subspace iteration with a Rayleigh-Ritz step.
// Sign convention: the largest-magnitude entry of each component is positive.
struct Pca2 {
  size_t dim = 0;
  std::vector<double> mean;        // [d]
  std::vector<double> components;  // [2, d] row-major, unit vectors
  double eigenvalues[2] = {0, 0};  // variance along each component
  double total_variance = 0;       // trace of the covariance
  // Projects row `v` ([d]) onto the components: out[0..1].
  void Project(const double* v, double* out) const;
};
Pca2 FitPca2(const std::vector<double>& x, size_t n, size_t d);

}  // namespace ds
