// Renyi-DP accountant for DP-SGD: the Poisson-subsampled Gaussian mechanism
// (Mironov, Talwar, Zhang 2019, "Renyi Differential Privacy of the Sampled
// Gaussian Mechanism", arXiv:1908.10530), composed over training steps and
// converted to (epsilon, delta)-DP. It computes what TensorFlow Privacy's
// compute_rdp and Google's dp_accounting.rdp.RdpAccountant compute (add/remove
// one neighbouring relation); tests/data/privacy/rdp_vectors.csv pins it to
// dp-accounting 0.6.0 (scripts/make_dp_vectors.py).
//
// Per step, with sampling rate q, noise multiplier sigma and order a > 1:
//   A_a = E_{z ~ mu0} [((1-q) + q * mu1(z)/mu0(z))^a],   mu0 = N(0, s^2), mu1 = N(1, s^2)
//   rdp(a) = log(A_a) / (a - 1)
// Integer a: binomial expansion, summed in log space,
//   A_a = sum_{i=0..a} C(a,i) (1-q)^(a-i) q^i exp((i^2 - i) / (2 s^2)).
// Fractional a: the two-sided series of Sec. 3.3 of the paper (TF Privacy's
//   _compute_log_a_frac): terms with log|C(a,i)|, erfc tails split at
//   z0 = s^2 log(1/q - 1) + 1/2, stopped when both halves decrease and are
//   e^-30 below the total; if it has not converged after 1000 terms the order
//   is dropped (rdp = +inf), exactly as the references do.
// Special cases: q = 0 -> 0; sigma = 0 -> +inf; q = 1 -> a / (2 sigma^2).
// Composition: rdp_total(a) = steps * rdp(a).
//
// Conversion to (epsilon, delta), minimised over the orders (the argmin is
// returned as the "optimal order"):
//   kClassic  (Mironov 2017, Prop. 3):  eps = rdp(a) + log(1/delta) / (a - 1)
//   kImproved (Balle et al. 2020 Prop. 12 / Canonne-Kamath-Steinke 2020 eq. 20):
//             eps = rdp(a) + log1p(-1/a) - (log(delta) + log(a)) / (a - 1), only for a > 1.01;
//             and eps = 0 when delta^2 > 1 - exp(-rdp(a)) (the KL bound).
// kImproved is the default: it is what dp_accounting's RdpAccountant (and TF
// Privacy's compute_dp_sgd_privacy since it moved onto dp_accounting) uses now.
// The reference (gretel-synthetics through TF Privacy) reported with
// sampling rate q = batch_size / n, steps = ceil(epochs * n / batch_size),
// delta = 1/n and DefaultOrders().
//
// Thread safety: all functions are pure (no global state); safe to call
// concurrently.
#pragma once

#include <cstdint>
#include <vector>

#include "util/status.h"

namespace ds {

enum class RdpConversion {
  kImproved,  // default; matches dp_accounting.rdp.compute_epsilon
  kClassic,   // eps = rdp + log(1/delta)/(a-1); matches TF Privacy before 2020
};

struct DpParams {
  double sampling_rate = 0;     // q in [0, 1]: expected batch size / number of records
  double noise_multiplier = 0;  // sigma >= 0: noise stddev / L2 clip norm
  int64_t steps = 0;            // >= 0 noisy gradient steps
  double delta = 0;             // in (0, 1)
};

struct DpResult {
  double epsilon = 0;  // +inf when no finite bound exists (sigma = 0)
  double order = 0;    // the RDP order that attains the minimum
};

// The reference's orders: 1.05, 1.10, ..., 5.95 (computed as 1 + x/20, x = 1..99),
// then 6, 7, ..., 63, then 128, 256, 512. 160 orders.
std::vector<double> DefaultOrders();

// Per-step RDP of the Poisson-subsampled Gaussian at each order (not multiplied
// by steps). Throws ds::Error(kInvalidArgument) when q is outside [0, 1], sigma < 0
// or an order is <= 1.
std::vector<double> ComputeRdp(double sampling_rate, double noise_multiplier,
                               const std::vector<double>& orders);

// Smallest epsilon over the orders for the given delta (rdp: total, composed).
// Throws ds::Error(kInvalidArgument) if delta is not in (0, 1) or sizes differ.
DpResult RdpToEpsilon(const std::vector<double>& orders, const std::vector<double>& rdp,
                      double delta, RdpConversion conversion = RdpConversion::kImproved);

// Smallest delta over the orders for the given epsilon (>= 0). Returns
// {delta, order} in a DpResult-shaped pair.
struct DeltaResult {
  double delta = 1;
  double order = 0;
};
DeltaResult RdpToDelta(const std::vector<double>& orders, const std::vector<double>& rdp,
                       double epsilon, RdpConversion conversion = RdpConversion::kImproved);

// Checks the ranges above; the message names the field ("dp_delta must be in (0, 1), got 0").
Status CheckDpParams(const DpParams& p);

// Epsilon spent by `steps` steps of DP-SGD with DefaultOrders(). Throws
// ds::Error(kInvalidArgument) on invalid params (see CheckDpParams).
DpResult ComputeEpsilon(const DpParams& p, RdpConversion conversion = RdpConversion::kImproved);
// Same with explicit orders.
DpResult ComputeEpsilon(const DpParams& p, const std::vector<double>& orders,
                        RdpConversion conversion = RdpConversion::kImproved);

// Delta for a given epsilon after `steps` steps (p.delta is ignored).
DeltaResult ComputeDeltaForEpsilon(const DpParams& p, double epsilon,
                                   RdpConversion conversion = RdpConversion::kImproved);

// The smallest noise multiplier sigma (to a relative 1e-6, rounded up) with
// ComputeEpsilon({q, sigma, steps, delta}).epsilon <= target_epsilon.
// Errors: kInvalidArgument for bad inputs or when even sigma = kMaxNoiseMultiplier
// does not reach the target. steps = 0 or q = 0 returns 0 (no noise needed).
inline constexpr double kMaxNoiseMultiplier = 1000.0;
// extra_rdp (optional, [DefaultOrders().size()]): the RDP of other mechanisms
// composed with the steps (e.g. GaussianRdp of measured marginals); the
// target then holds for the composition.
Result<double> NoiseForTargetEpsilon(double target_epsilon, double sampling_rate, int64_t steps,
                                     double delta,
                                     RdpConversion conversion = RdpConversion::kImproved,
                                     const std::vector<double>* extra_rdp = nullptr);

// RDP of one Gaussian mechanism (no sampling) with noise stddev =
// noise_multiplier x L2 sensitivity: a / (2 sigma^2) at each order (what
// ComputeRdp gives for q = 1).
std::vector<double> GaussianRdp(double noise_multiplier, const std::vector<double>& orders);

// The largest number of steps whose epsilon stays <= target_epsilon (0 if even
// one step exceeds it; capped at kMaxSteps when the budget is never exceeded,
// e.g. q = 0). For stopping training early once the budget is spent. Throws
// ds::Error(kInvalidArgument) on invalid inputs.
inline constexpr int64_t kMaxSteps = int64_t(1) << 62;
int64_t MaxStepsWithinBudget(double target_epsilon, double sampling_rate, double noise_multiplier,
                             double delta, RdpConversion conversion = RdpConversion::kImproved,
                             const std::vector<double>* extra_rdp = nullptr);

// Running accountant for a trainer whose q or sigma may change between steps
// (e.g. a final partial epoch): RDP adds up over steps.
//   RdpAccountant acc;  acc.AddSteps(q, sigma, steps_this_epoch);
//   DpResult r = acc.GetEpsilon(delta);
class RdpAccountant {
 public:
  explicit RdpAccountant(std::vector<double> orders = DefaultOrders());
  // Adds `count` steps of the subsampled Gaussian (throws kInvalidArgument on bad input).
  void AddSteps(double sampling_rate, double noise_multiplier, int64_t count);
  // Adds one Gaussian mechanism (GaussianRdp): e.g. noisy marginals.
  void AddGaussian(double noise_multiplier);
  DpResult GetEpsilon(double delta, RdpConversion conversion = RdpConversion::kImproved) const;
  DeltaResult GetDelta(double epsilon, RdpConversion conversion = RdpConversion::kImproved) const;
  const std::vector<double>& orders() const { return orders_; }
  const std::vector<double>& rdp() const { return rdp_; }  // [orders.size()] total so far

 private:
  std::vector<double> orders_;  // [K]
  std::vector<double> rdp_;     // [K]
  // Cache of the last per-step rdp (the common case: same q, sigma every epoch).
  double last_q_ = -1, last_sigma_ = -1;
  std::vector<double> last_step_rdp_;  // [K]
};

}  // namespace ds
