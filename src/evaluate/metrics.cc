#include "evaluate/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "util/rng.h"
#include "util/status.h"

namespace ds {

double JensenShannonDistance(const std::vector<double>& p, const std::vector<double>& q) {
  DS_CHECK(p.size() == q.size());
  double sp = 0, sq = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    sp += p[i];
    sq += q[i];
  }
  if (sp <= 0 && sq <= 0) return 0.0;
  if (sp <= 0 || sq <= 0) return 1.0;
  double js = 0;  // (KL(p||m) + KL(q||m)) / 2, in bits
  for (size_t i = 0; i < p.size(); ++i) {
    double a = p[i] / sp, b = q[i] / sq, m = 0.5 * (a + b);
    if (a > 0) js += 0.5 * a * std::log2(a / m);
    if (b > 0) js += 0.5 * b * std::log2(b / m);
  }
  return std::sqrt(std::clamp(js, 0.0, 1.0));
}

double PearsonCorrelation(const double* x, const double* y, size_t n) {
  double sx = 0, sy = 0;
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) continue;
    sx += x[i];
    sy += y[i];
    ++m;
  }
  if (m < 2) return 0.0;
  const double mx = sx / double(m), my = sy / double(m);
  double sxx = 0, syy = 0, sxy = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) continue;
    double dx = x[i] - mx, dy = y[i] - my;
    sxx += dx * dx;
    syy += dy * dy;
    sxy += dx * dy;
  }
  // Relative floor: a column that is constant up to rounding has no correlation.
  if (sxx <= 1e-24 * (1 + mx * mx) * double(m) || syy <= 1e-24 * (1 + my * my) * double(m))
    return 0.0;
  return std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
}

double TheilsU(const int32_t* x, int kx, const int32_t* y, int ky, size_t n) {
  if (n == 0) return 1.0;
  std::vector<double> joint(size_t(kx) * size_t(ky), 0.0);  // [kx, ky] counts
  std::vector<double> px(size_t(kx), 0.0), py(size_t(ky), 0.0);
  for (size_t i = 0; i < n; ++i) {
    DS_CHECK(x[i] >= 0 && x[i] < kx && y[i] >= 0 && y[i] < ky);
    joint[size_t(x[i]) * size_t(ky) + size_t(y[i])] += 1;
    px[size_t(x[i])] += 1;
    py[size_t(y[i])] += 1;
  }
  const double inv = 1.0 / double(n);
  double hx = 0;
  for (double c : px)
    if (c > 0) hx -= c * inv * std::log(c * inv);
  if (hx <= 1e-15) return 1.0;
  double hxy = 0;  // H(X | Y) = -sum p(x,y) log(p(x,y) / p(y))
  for (int a = 0; a < kx; ++a)
    for (int b = 0; b < ky; ++b) {
      double c = joint[size_t(a) * size_t(ky) + size_t(b)];
      if (c > 0) hxy -= c * inv * std::log(c / py[size_t(b)]);
    }
  return std::clamp((hx - hxy) / hx, 0.0, 1.0);
}

double CorrelationRatio(const int32_t* c, int kc, const double* y, size_t n) {
  std::vector<double> sum(size_t(kc), 0.0), cnt(size_t(kc), 0.0);
  double total = 0;
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(y[i])) continue;
    DS_CHECK(c[i] >= 0 && c[i] < kc);
    sum[size_t(c[i])] += y[i];
    cnt[size_t(c[i])] += 1;
    total += y[i];
    ++m;
  }
  if (m < 2) return 0.0;
  const double mean = total / double(m);
  double ss_total = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(y[i])) continue;
    double d = y[i] - mean;
    ss_total += d * d;
  }
  if (ss_total <= 1e-24 * (1 + mean * mean) * double(m)) return 0.0;
  double ss_between = 0;
  for (int k = 0; k < kc; ++k) {
    if (cnt[size_t(k)] == 0) continue;
    double d = sum[size_t(k)] / cnt[size_t(k)] - mean;
    ss_between += cnt[size_t(k)] * d * d;
  }
  return std::sqrt(std::clamp(ss_between / ss_total, 0.0, 1.0));
}

double KolmogorovSmirnovStatistic(std::vector<double> a, std::vector<double> b) {
  auto drop_nan = [](std::vector<double>& v) {
    v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
    std::sort(v.begin(), v.end());
  };
  drop_nan(a);
  drop_nan(b);
  if (a.empty() || b.empty()) return std::numeric_limits<double>::quiet_NaN();
  const double na = double(a.size()), nb = double(b.size());
  size_t i = 0, j = 0;
  double d = 0;
  while (i < a.size() || j < b.size()) {
    // The next distinct value; step both empirical CDFs past it.
    double v = (j >= b.size() || (i < a.size() && a[i] <= b[j])) ? a[i] : b[j];
    while (i < a.size() && a[i] <= v) ++i;
    while (j < b.size() && b[j] <= v) ++j;
    d = std::max(d, std::fabs(double(i) / na - double(j) / nb));
  }
  return d;
}

double KSComplement(const std::vector<double>& real, const std::vector<double>& synthetic) {
  return 1.0 - KolmogorovSmirnovStatistic(real, synthetic);
}

double TVComplement(const std::vector<int32_t>& real, const std::vector<int32_t>& synthetic) {
  std::unordered_map<int32_t, double> pr, ps;
  double nr = 0, ns = 0;
  for (int32_t v : real)
    if (v >= 0) pr[v] += 1, nr += 1;
  for (int32_t v : synthetic)
    if (v >= 0) ps[v] += 1, ns += 1;
  if (nr == 0 || ns == 0) return std::numeric_limits<double>::quiet_NaN();
  double tv = 0;
  for (const auto& [k, c] : pr) {
    auto it = ps.find(k);
    tv += std::fabs(c / nr - (it == ps.end() ? 0.0 : it->second / ns));
  }
  for (const auto& [k, c] : ps)
    if (!pr.count(k)) tv += c / ns;
  return 1.0 - 0.5 * tv;
}

namespace {

// Eigen-decomposition of a small symmetric matrix a: [k, k] by cyclic Jacobi
// rotations. On return `vals` holds the eigenvalues in descending order and
// `vecs` ([k, k], column j = eigenvector j) the matching unit eigenvectors.
void SymmetricEigen(std::vector<double> a, int k, std::vector<double>* vals,
                    std::vector<double>* vecs) {
  std::vector<double> v(size_t(k) * k, 0.0);
  for (int i = 0; i < k; ++i) v[size_t(i) * k + i] = 1;
  auto at = [&](int r, int c) -> double& { return a[size_t(r) * k + c]; };
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0, diag = 0;
    for (int r = 0; r < k; ++r)
      for (int c = 0; c < k; ++c) (r == c ? diag : off) += at(r, c) * at(r, c);
    if (off <= 1e-30 * (diag + 1e-300)) break;
    for (int p = 0; p < k; ++p)
      for (int q = p + 1; q < k; ++q) {
        double apq = at(p, q);
        if (std::fabs(apq) < 1e-300) continue;
        double theta = (at(q, q) - at(p, p)) / (2 * apq);
        double t = (theta >= 0 ? 1 : -1) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
        double cs = 1 / std::sqrt(t * t + 1), sn = t * cs;
        for (int r = 0; r < k; ++r) {  // A <- A J (columns p, q)
          double arp = at(r, p), arq = at(r, q);
          at(r, p) = cs * arp - sn * arq;
          at(r, q) = sn * arp + cs * arq;
        }
        for (int c = 0; c < k; ++c) {  // A <- J^T A (rows p, q)
          double apc = at(p, c), aqc = at(q, c);
          at(p, c) = cs * apc - sn * aqc;
          at(q, c) = sn * apc + cs * aqc;
        }
        for (int r = 0; r < k; ++r) {
          double vrp = v[size_t(r) * k + p], vrq = v[size_t(r) * k + q];
          v[size_t(r) * k + p] = cs * vrp - sn * vrq;
          v[size_t(r) * k + q] = sn * vrp + cs * vrq;
        }
      }
  }
  std::vector<int> order(static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) order[size_t(i)] = i;
  std::sort(order.begin(), order.end(), [&](int x, int y) { return at(x, x) > at(y, y); });
  vals->assign(size_t(k), 0.0);
  vecs->assign(size_t(k) * k, 0.0);
  for (int j = 0; j < k; ++j) {
    (*vals)[size_t(j)] = at(order[size_t(j)], order[size_t(j)]);
    for (int r = 0; r < k; ++r) (*vecs)[size_t(r) * k + j] = v[size_t(r) * k + order[size_t(j)]];
  }
}

// Orthonormalises the k columns of q: [d, k] (modified Gram-Schmidt). A column
// that vanishes is replaced by a fresh random direction.
void Orthonormalize(std::vector<double>* q, size_t d, int k, Philox* rng) {
  auto col = [&](int j, size_t r) -> double& { return (*q)[r * size_t(k) + size_t(j)]; };
  for (int j = 0; j < k; ++j) {
    for (int attempt = 0; attempt < 4; ++attempt) {
      double before = 0;
      for (size_t r = 0; r < d; ++r) before += col(j, r) * col(j, r);
      for (int pass = 0; pass < 2; ++pass)
        for (int i = 0; i < j; ++i) {
          double dot = 0;
          for (size_t r = 0; r < d; ++r) dot += col(i, r) * col(j, r);
          for (size_t r = 0; r < d; ++r) col(j, r) -= dot * col(i, r);
        }
      double norm = 0;
      for (size_t r = 0; r < d; ++r) norm += col(j, r) * col(j, r);
      if (norm > 1e-20 * before && norm > 1e-300) {
        double inv = 1 / std::sqrt(norm);
        for (size_t r = 0; r < d; ++r) col(j, r) *= inv;
        break;
      }
      for (size_t r = 0; r < d; ++r) col(j, r) = rng->Normal();
    }
  }
}

}  // namespace

void Pca2::Project(const double* v, double* out) const {
  for (int c = 0; c < 2; ++c) {
    double s = 0;
    for (size_t j = 0; j < dim; ++j) s += (v[j] - mean[j]) * components[size_t(c) * dim + j];
    out[c] = s;
  }
}

namespace {

// The sample covariance [d, d] of the rows x [n, d] about `mean` [d].
std::vector<double> Covariance(const std::vector<double>& x, size_t n, size_t d,
                               const std::vector<double>& mean) {
  // Upper triangle accumulated, then mirrored.
  std::vector<double> cov(d * d, 0.0), row(d);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < d; ++j) row[j] = x[i * d + j] - mean[j];
    for (size_t a = 0; a < d; ++a) {
      const double ra = row[a];
      if (ra == 0) continue;
      double* c = &cov[a * d];
      for (size_t b = a; b < d; ++b) c[b] += ra * row[b];
    }
  }
  for (size_t a = 0; a < d; ++a)
    for (size_t b = a; b < d; ++b) {
      cov[a * d + b] /= double(n - 1);
      cov[b * d + a] = cov[a * d + b];
    }
  return cov;
}

// One subspace-iteration product: z = cov q, and the symmetric Rayleigh-Ritz matrix
// b = q^T cov q [k, k] (q, z: [d, k]).
void RayleighRitz(const std::vector<double>& cov, const std::vector<double>& q, size_t d, int k,
                  std::vector<double>* z, std::vector<double>* b) {
  std::fill(z->begin(), z->end(), 0.0);
  for (size_t r = 0; r < d; ++r) {
    const double* cr = &cov[r * d];
    double* zr = &(*z)[r * size_t(k)];
    for (size_t s = 0; s < d; ++s) {
      const double c = cr[s];
      const double* qs = &q[s * size_t(k)];
      for (int j = 0; j < k; ++j) zr[j] += c * qs[j];
    }
  }
  for (int a = 0; a < k; ++a)
    for (int c = 0; c < k; ++c) {
      double s = 0;
      for (size_t r = 0; r < d; ++r) s += q[r * size_t(k) + a] * (*z)[r * size_t(k) + c];
      (*b)[size_t(a) * k + c] = s;
    }
  for (int a = 0; a < k; ++a)
    for (int c = a + 1; c < k; ++c)
      (*b)[size_t(a) * k + c] = (*b)[size_t(c) * k + a] =
          0.5 * ((*b)[size_t(a) * k + c] + (*b)[size_t(c) * k + a]);
}

// Ritz vector c = q vecs[:, c] into comp [d], unit length, its sign fixed: the first
// entry within rounding of the largest magnitude is positive.
void RitzVector(const std::vector<double>& q, const std::vector<double>& vecs, size_t d, int k,
                int c, double* comp) {
  for (size_t r = 0; r < d; ++r) {
    double s = 0;
    for (int j = 0; j < k; ++j) s += q[r * size_t(k) + j] * vecs[size_t(j) * k + c];
    comp[r] = s;
  }
  double norm = 0, big = 0;
  for (size_t r = 0; r < d; ++r) {
    norm += comp[r] * comp[r];
    big = std::max(big, std::fabs(comp[r]));
  }
  double lead = 0;
  for (size_t r = 0; r < d && lead == 0; ++r)
    if (std::fabs(comp[r]) >= big * (1 - 1e-9)) lead = comp[r];
  double f = (lead < 0 ? -1 : 1) / std::sqrt(std::max(norm, 1e-300));
  for (size_t r = 0; r < d; ++r) comp[r] *= f;
}

}  // namespace

Pca2 FitPca2(const std::vector<double>& x, size_t n, size_t d) {
  DS_CHECK(x.size() == n * d);
  Pca2 p;
  p.dim = d;
  p.mean.assign(d, 0.0);
  p.components.assign(2 * d, 0.0);
  if (d == 0 || n < 2) return p;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < d; ++j) p.mean[j] += x[i * d + j];
  for (double& m : p.mean) m /= double(n);
  const std::vector<double> cov = Covariance(x, n, d, p.mean);
  for (size_t a = 0; a < d; ++a) p.total_variance += cov[a * d + a];

  // Subspace iteration on k >= 2 vectors (more vectors converge faster:
  // the error shrinks like (lambda_{k+1} / lambda_2)^iterations).
  const int k = int(std::min<size_t>(d, 8));
  Philox rng(0x9CA, 0);
  std::vector<double> q(d * size_t(k)), z(d * size_t(k));  // [d, k]
  for (double& v : q) v = rng.Normal();
  Orthonormalize(&q, d, k, &rng);
  std::vector<double> vals, vecs, b(size_t(k) * k);
  double prev0 = -1, prev1 = -1;
  const double scale = std::max(p.total_variance, 1e-300);
  for (int iter = 0; iter < 3000; ++iter) {
    RayleighRitz(cov, q, d, k, &z, &b);
    SymmetricEigen(b, k, &vals, &vecs);
    bool converged = size_t(k) == d || (std::fabs(vals[0] - prev0) < 1e-13 * scale &&
                                        std::fabs(vals[1] - prev1) < 1e-13 * scale && iter > 3);
    prev0 = vals[0];
    prev1 = k > 1 ? vals[1] : 0.0;  // d == 1: one eigenvalue (ASan: read past vals)
    if (converged || iter == 2999) break;
    q.swap(z);
    Orthonormalize(&q, d, k, &rng);
  }
  for (int c = 0; c < std::min(k, 2); ++c) {
    p.eigenvalues[c] = std::max(0.0, vals[size_t(c)]);
    RitzVector(q, vecs, d, k, c, &p.components[size_t(c) * d]);
  }
  return p;
}

}  // namespace ds
