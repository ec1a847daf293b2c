#include "privacy/rdp_accountant.h"

#include <math.h>  // lgamma_r (thread-safe; std::lgamma writes the global signgam)

#include <algorithm>
#include <cmath>
#include <limits>

namespace ds {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kMaxStepsLogAFrac = 1000;  // as TF Privacy / dp_accounting

// log|Gamma(x)| (scipy.special.gammaln).
double LogAbsGamma(double x) {
  int sign;
  return lgamma_r(x, &sign);
}

double LogComb(double n, double k) {
  return LogAbsGamma(n + 1) - LogAbsGamma(k + 1) - LogAbsGamma(n - k + 1);
}

// log(exp(x) + exp(y)).
double LogAdd(double x, double y) {
  double a = std::min(x, y), b = std::max(x, y);
  if (a == -kInf) return b;
  return std::log1p(std::exp(a - b)) + b;
}

// log(erfc(x)), accurate where erfc underflows.
double LogErfc(double x) {
  if (x < 25.0) return std::log(std::erfc(x));
  // erfc(x) = exp(-x^2) / (x sqrt(pi)) * (1 - 1/(2x^2) + 3/(2x^2)^2 - 15/(2x^2)^3 + ...);
  // at x >= 25 the terms fall by >= 1250/(2k-1) each, so 8 terms are exact in double.
  const double t = 1.0 / (2.0 * x * x);
  double sum = 1.0, term = 1.0;
  for (int k = 1; k <= 8; ++k) {
    term *= -(2.0 * k - 1.0) * t;
    sum += term;
  }
  return -x * x - std::log(x) - 0.5 * std::log(M_PI) + std::log(sum);
}

// log(A_alpha) for integer alpha, 0 < q < 1.
double LogAInt(double q, double sigma, int64_t alpha) {
  double log_a = -kInf;
  const double log1mq = std::log1p(-q), logq = std::log(q);
  const double two_s2 = 2.0 * (sigma * sigma);
  for (int64_t i = 0; i <= alpha; ++i) {
    const double di = double(i);
    const double log_coef = LogComb(double(alpha), di) + di * logq + double(alpha - i) * log1mq;
    const double s = log_coef + (di * di - di) / two_s2;
    log_a = LogAdd(log_a, s);
  }
  return log_a;
}

// log(A_alpha) for fractional alpha, 0 < q < 1 (arXiv:1908.10530 Sec. 3.3).
// Returns +inf when the series does not converge in kMaxStepsLogAFrac terms.
double LogAFrac(double q, double sigma, double alpha) {
  double log_a0 = -kInf, log_a1 = -kInf;
  const double z0 = sigma * sigma * std::log(1.0 / q - 1.0) + 0.5;
  const double log1mq = std::log1p(-q), logq = std::log(q);
  const double two_s2 = 2.0 * (sigma * sigma);
  const double sqrt2_sigma = std::sqrt(2.0) * sigma;
  const double log_half = std::log(0.5);
  double last_s0 = -kInf, last_s1 = -kInf;
  for (int i = 0; i < kMaxStepsLogAFrac; ++i) {
    const double di = double(i);
    const double log_coef = LogComb(alpha, di);
    const double j = alpha - di;
    const double log_t0 = log_coef + di * logq + j * log1mq;
    const double log_t1 = log_coef + j * logq + di * log1mq;
    const double log_e0 = log_half + LogErfc((di - z0) / sqrt2_sigma);
    const double log_e1 = log_half + LogErfc((z0 - j) / sqrt2_sigma);
    const double log_s0 = log_t0 + (di * di - di) / two_s2 + log_e0;
    const double log_s1 = log_t1 + (j * j - j) / two_s2 + log_e1;
    log_a0 = LogAdd(log_a0, log_s0);
    log_a1 = LogAdd(log_a1, log_s1);
    const double total = LogAdd(log_a0, log_a1);
    if (log_s0 < last_s0 && log_s1 < last_s1 && std::max(log_s0, log_s1) < total - 30) {
      return total;
    }
    last_s0 = log_s0;
    last_s1 = log_s1;
  }
  return kInf;
}

double RdpOneOrder(double q, double sigma, double alpha) {
  if (q == 0) return 0;
  if (std::isinf(alpha) || sigma == 0) return kInf;
  if (q == 1.0) return alpha / (2 * (sigma * sigma));
  const double log_a = (alpha == std::floor(alpha) && alpha < 9.0e15)
                           ? LogAInt(q, sigma, int64_t(alpha))
                           : LogAFrac(q, sigma, alpha);
  return log_a / (alpha - 1);
}

void CheckRdpInputs(double q, double sigma, const std::vector<double>& orders) {
  if (!(q >= 0 && q <= 1)) DS_THROW(kInvalidArgument, "sampling rate must be in [0, 1], got {}", q);
  if (!(sigma >= 0) || std::isinf(sigma)) {
    DS_THROW(kInvalidArgument, "dp_noise_multiplier must be finite and >= 0, got {}", sigma);
  }
  for (double a : orders) {
    if (!(a > 1)) DS_THROW(kInvalidArgument, "RDP order must be > 1, got {}", a);
  }
}

void CheckSizes(const std::vector<double>& orders, const std::vector<double>& rdp) {
  if (orders.size() != rdp.size() || orders.empty()) {
    DS_THROW(kInvalidArgument, "RDP orders ({}) and values ({}) must be non-empty and match",
             orders.size(), rdp.size());
  }
}

std::vector<double> Scaled(const std::vector<double>& v, double k) {
  std::vector<double> out(v.size());
  // 0 steps of an infinite-RDP mechanism cost nothing (avoid 0 * inf = nan).
  for (size_t i = 0; i < v.size(); ++i) out[i] = (k == 0 || v[i] == 0) ? 0.0 : v[i] * k;
  return out;
}

}  // namespace

std::vector<double> DefaultOrders() {
  std::vector<double> orders;
  orders.reserve(160);
  for (int x = 1; x < 100; ++x) orders.push_back(1 + x / 20.0);
  for (int a = 6; a < 64; ++a) orders.push_back(a);
  orders.push_back(128);
  orders.push_back(256);
  orders.push_back(512);
  return orders;
}

std::vector<double> ComputeRdp(double q, double sigma, const std::vector<double>& orders) {
  CheckRdpInputs(q, sigma, orders);
  std::vector<double> rdp(orders.size());
  for (size_t k = 0; k < orders.size(); ++k) rdp[k] = RdpOneOrder(q, sigma, orders[k]);
  return rdp;
}

DpResult RdpToEpsilon(const std::vector<double>& orders, const std::vector<double>& rdp,
                      double delta, RdpConversion conversion) {
  CheckSizes(orders, rdp);
  if (!(delta > 0 && delta < 1))
    DS_THROW(kInvalidArgument, "delta must be in (0, 1), got {}", delta);
  size_t best = 0;
  double best_eps = kInf;
  for (size_t k = 0; k < orders.size(); ++k) {
    const double a = orders[k], r = rdp[k];
    double eps;
    if (conversion == RdpConversion::kClassic) {
      eps = r - std::log(delta) / (a - 1);
      if (std::isnan(eps)) continue;  // nanargmin
    } else if (r < 0) {
      eps = 0;  // numerical noise from extreme inputs, as dp_accounting
    } else if (delta * delta + std::expm1(-r) > 0) {
      eps = 0;  // KL bound: delta >= sqrt(1 - exp(-rdp))
    } else if (a > 1.01) {
      eps = r + std::log1p(-1 / a) - std::log(delta * a) / (a - 1);
    } else {
      eps = kInf;
    }
    if (eps < best_eps) {
      best_eps = eps;
      best = k;
    }
  }
  return {std::max(0.0, best_eps), orders[best]};
}

DeltaResult RdpToDelta(const std::vector<double>& orders, const std::vector<double>& rdp,
                       double epsilon, RdpConversion conversion) {
  CheckSizes(orders, rdp);
  if (!(epsilon >= 0)) DS_THROW(kInvalidArgument, "epsilon must be >= 0, got {}", epsilon);
  size_t best = 0;
  double best_log = kInf;
  for (size_t k = 0; k < orders.size(); ++k) {
    const double a = orders[k], r = rdp[k];
    double log_delta;
    if (conversion == RdpConversion::kClassic) {
      log_delta = (r - epsilon) * (a - 1);
      if (std::isnan(log_delta)) continue;
    } else {
      if (r <= 0) {
        log_delta = -kInf;
      } else {
        log_delta = 0.5 * std::log1p(-std::exp(-r));
      }
      if (a > 1.01) {
        const double bound = (a - 1) * (r - epsilon + std::log1p(-1 / a)) - std::log(a);
        log_delta = std::min(log_delta, bound);
      }
    }
    if (log_delta < best_log) {
      best_log = log_delta;
      best = k;
    }
  }
  return {std::min(std::exp(best_log), 1.0), orders[best]};
}

Status CheckDpParams(const DpParams& p) {
  if (!(p.sampling_rate >= 0 && p.sampling_rate <= 1)) {
    return DS_ERR(kInvalidArgument, "DP sampling rate must be in [0, 1], got {}", p.sampling_rate);
  }
  if (!(p.noise_multiplier >= 0) || std::isinf(p.noise_multiplier)) {
    return DS_ERR(kInvalidArgument, "dp_noise_multiplier must be finite and >= 0, got {}",
                  p.noise_multiplier);
  }
  if (p.steps < 0) return DS_ERR(kInvalidArgument, "DP steps must be >= 0, got {}", p.steps);
  if (!(p.delta > 0 && p.delta < 1)) {
    return DS_ERR(kInvalidArgument, "dp_delta must be in (0, 1), got {}", p.delta);
  }
  return Status::Ok();
}

DpResult ComputeEpsilon(const DpParams& p, RdpConversion conversion) {
  return ComputeEpsilon(p, DefaultOrders(), conversion);
}

DpResult ComputeEpsilon(const DpParams& p, const std::vector<double>& orders,
                        RdpConversion conversion) {
  ThrowIfError(CheckDpParams(p));
  const std::vector<double> rdp =
      Scaled(ComputeRdp(p.sampling_rate, p.noise_multiplier, orders), double(p.steps));
  return RdpToEpsilon(orders, rdp, p.delta, conversion);
}

DeltaResult ComputeDeltaForEpsilon(const DpParams& p, double epsilon, RdpConversion conversion) {
  DpParams checked = p;
  checked.delta = 0.5;  // unused here
  ThrowIfError(CheckDpParams(checked));
  const std::vector<double> orders = DefaultOrders();
  const std::vector<double> rdp =
      Scaled(ComputeRdp(p.sampling_rate, p.noise_multiplier, orders), double(p.steps));
  return RdpToDelta(orders, rdp, epsilon, conversion);
}

std::vector<double> GaussianRdp(double noise_multiplier, const std::vector<double>& orders) {
  return ComputeRdp(1.0, noise_multiplier, orders);
}

namespace {
std::vector<double> PlusExtra(std::vector<double> rdp, const std::vector<double>* extra) {
  if (extra == nullptr) return rdp;
  if (extra->size() != rdp.size())
    DS_THROW(kInvalidArgument, "extra RDP has {} orders, expected {}", extra->size(), rdp.size());
  for (size_t k = 0; k < rdp.size(); ++k) rdp[k] += (*extra)[k];
  return rdp;
}
}  // namespace

Result<double> NoiseForTargetEpsilon(double target_epsilon, double q, int64_t steps, double delta,
                                     RdpConversion conversion, const std::vector<double>* extra) {
  if (!(target_epsilon > 0) || std::isinf(target_epsilon)) {
    return DS_ERR(kInvalidArgument, "dp_target_epsilon must be finite and > 0, got {}",
                  target_epsilon);
  }
  DS_RETURN_IF_ERROR(CheckDpParams({q, 1.0, steps, delta}));
  if (steps == 0 || q == 0) return 0.0;
  const std::vector<double> orders = DefaultOrders();
  auto eps_at = [&](double sigma) {
    if (extra == nullptr) return ComputeEpsilon({q, sigma, steps, delta}, orders, conversion).epsilon;
    return RdpToEpsilon(orders, PlusExtra(Scaled(ComputeRdp(q, sigma, orders), double(steps)), extra),
                        delta, conversion)
        .epsilon;
  };
  double hi = kMaxNoiseMultiplier;
  const double eps_hi = eps_at(hi);
  if (!(eps_hi <= target_epsilon)) {
    return DS_ERR(kInvalidArgument,
                  "dp_target_epsilon {} is unreachable: even dp_noise_multiplier {} gives "
                  "epsilon {:.4g} (sampling rate {:.4g}, {} steps, delta {:.3g}); train fewer "
                  "steps, use a larger dataset or a smaller batch",
                  target_epsilon, kMaxNoiseMultiplier, eps_hi, q, steps, delta);
  }
  // Invariant: eps_at(hi) <= target < eps_at(lo) (eps_at(0) = inf).
  double lo = 0;
  while (hi - lo > 1e-6 * hi) {
    const double mid = 0.5 * (lo + hi);
    if (eps_at(mid) <= target_epsilon) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi;
}

int64_t MaxStepsWithinBudget(double target_epsilon, double q, double sigma, double delta,
                             RdpConversion conversion, const std::vector<double>* extra) {
  if (!(target_epsilon >= 0)) {
    DS_THROW(kInvalidArgument, "dp_target_epsilon must be >= 0, got {}", target_epsilon);
  }
  ThrowIfError(CheckDpParams({q, sigma, 0, delta}));
  const std::vector<double> orders = DefaultOrders();
  const std::vector<double> step_rdp = ComputeRdp(q, sigma, orders);
  auto within = [&](int64_t steps) {
    return RdpToEpsilon(orders, PlusExtra(Scaled(step_rdp, double(steps)), extra), delta,
                        conversion)
               .epsilon <= target_epsilon;
  };
  if (!within(1)) return 0;
  // Exponential search for the first failing step count, then bisection.
  int64_t good = 1, bad = 2;
  while (within(bad)) {
    good = bad;
    if (bad >= kMaxSteps / 2) return kMaxSteps;
    bad *= 2;
  }
  while (bad - good > 1) {
    const int64_t mid = good + (bad - good) / 2;
    if (within(mid)) {
      good = mid;
    } else {
      bad = mid;
    }
  }
  return good;
}

RdpAccountant::RdpAccountant(std::vector<double> orders)
    : orders_(std::move(orders)), rdp_(orders_.size(), 0.0) {
  CheckRdpInputs(0, 0, orders_);
  if (orders_.empty()) DS_THROW(kInvalidArgument, "RdpAccountant needs at least one order");
}

void RdpAccountant::AddSteps(double q, double sigma, int64_t count) {
  if (count < 0) DS_THROW(kInvalidArgument, "DP steps must be >= 0, got {}", count);
  if (count == 0) return;
  if (q != last_q_ || sigma != last_sigma_) {
    last_step_rdp_ = ComputeRdp(q, sigma, orders_);
    last_q_ = q;
    last_sigma_ = sigma;
  }
  for (size_t k = 0; k < orders_.size(); ++k) {
    if (last_step_rdp_[k] != 0) rdp_[k] += double(count) * last_step_rdp_[k];
  }
}

void RdpAccountant::AddGaussian(double noise_multiplier) {
  const std::vector<double> g = GaussianRdp(noise_multiplier, orders_);
  for (size_t k = 0; k < orders_.size(); ++k) rdp_[k] += g[k];
}

DpResult RdpAccountant::GetEpsilon(double delta, RdpConversion conversion) const {
  return RdpToEpsilon(orders_, rdp_, delta, conversion);
}

DeltaResult RdpAccountant::GetDelta(double epsilon, RdpConversion conversion) const {
  return RdpToDelta(orders_, rdp_, epsilon, conversion);
}

}  // namespace ds
