// DP-SGD settings and the plan the trainer follows. The lead owns the config
// file format; this header only names what the privacy code needs and turns it
// into numbers (sampling rate, steps, noise multiplier, delta) with checks.
//
// What the trainer must do for the epsilon reported by the accountant to hold
// (record-level DP, add/remove-one neighbouring datasets):
//  1. Privacy unit = one training RECORD (CSV row / text line), not a chunk:
//     all token chunks cut from one record belong to the same example; its
//     gradient is the sum over its chunks. (The reference's unit was a
//     100-token chunk and its clip applied to the batch mean: see docs/reference.md §4.)
//  2. Sampling: each step includes each record independently with probability
//     q = sampling_rate (Poisson sampling; the batch size varies around
//     expected_batch_size). Fixed-size shuffled batches are what the reference
//     and most libraries use, but the RDP analysis here is for Poisson
//     sampling; with shuffling it is the usual approximation, not a proof.
//  3. Clip each record's gradient g_i (all parameters together) to L2 norm
//     C = dp_l2_norm_clip: g_i * min(1, C / ||g_i||).
//  4. Sum the clipped gradients, add N(0, (sigma * C)^2) noise to every
//     coordinate (SecureGaussian::Add with stddev = sigma * C, sigma =
//     plan.noise_multiplier), divide by expected_batch_size (not by the
//     realised batch size, which would leak it), then take the optimizer step.
//  5. Count steps; stop before plan.steps is exceeded (MaxStepsWithinBudget),
//     and report RdpAccountant / ComputeEpsilon values per epoch.
//  Nothing else may touch the training data (no data-dependent early stopping
//  on the training loss, no data-dependent vocabulary without accounting for
//  it: the tokenizer is trained on the raw data and is NOT covered).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "privacy/rdp_accountant.h"
#include "util/status.h"

namespace ds {

struct DpSettings {
  bool dp = false;                   // `dp`
  double dp_noise_multiplier = 0.1;  // `dp_noise_multiplier` (reference default; weak)
  double dp_l2_norm_clip = 3.0;      // `dp_l2_norm_clip`
  double dp_target_epsilon = 0;      // `dp_target_epsilon`: > 0 = choose sigma to meet it
  double dp_delta = 0;               // `dp_delta`: 0 = 1 / num_records (the reference's)
  // The reference's unsafe setup (clip on the batch-mean gradient, chunk-level unit).
  // Only for reproducing the reference; the reported epsilon is then nominal.
  bool allow_unsafe_rules = false;
  // > 0 (needs dp_target_epsilon): one Gaussian release besides DP-SGD (the
  // calibration marginals, train/calibrate.h), its noise chosen so that alone
  // it would spend this share of the target; DP-SGD's sigma is then solved for
  // the composition (RDP adds up), so the total stays within the target.
  double marginal_share = 0;
};

struct DpPlan {
  double sampling_rate = 0;        // q = expected_batch_size / num_records
  double expected_batch_size = 0;  // the divisor of the noisy gradient sum
  int64_t steps = 0;               // ceil(epochs * num_records / batch_size)
  double noise_multiplier = 0;     // sigma (from settings or solved for the target)
  double noise_stddev = 0;         // sigma * dp_l2_norm_clip, per coordinate
  double l2_norm_clip = 0;         // C
  double delta = 0;                // resolved delta
  DpResult expected;               // epsilon after all `steps` (improved conversion), composed
  // The marginal release (DpSettings::marginal_share; 0 = none): noise
  // multiplier (stddev / L2 sensitivity), and the epsilon each part would
  // spend alone at `delta` (they compose to less than their sum).
  double marginal_noise_multiplier = 0;
  double marginal_epsilon_alone = 0, sgd_epsilon_alone = 0;
  std::vector<double> ExtraRdp() const;  // GaussianRdp of the release (empty: none)
};

// Validates the settings (field names in messages) and computes the plan.
// num_records: records the model trains on (after the validation split);
// batch_size: expected records per step; epochs: planned epochs (> 0).
// Errors: kInvalidArgument for out-of-range fields, too few records
// (num_records < batch_size), or an unreachable dp_target_epsilon.
Result<DpPlan> PlanDp(const DpSettings& s, int64_t num_records, int64_t batch_size, int64_t epochs);

// The share of a target epsilon the calibration marginals get by default
// under dp (measured on telco_churn, docs/privacy.md): most of a small
// budget, half of a large one; most of any budget for fewer than
// kDpFewRecords records (0: not known), where DP-SGD's few dozen noisy steps
// learn little beyond what the measured marginals carry (penguins, mpg).
inline constexpr int64_t kDpFewRecords = 1000;
double DefaultMarginalShare(double target_epsilon, int64_t records = 0);

// One line for logs: "DP-SGD: q=0.0043 sigma=1.10 clip=1.0 steps=14063 delta=1e-05 -> eps=2.92
// (order 17)".
std::string DescribeDpPlan(const DpPlan& plan);

}  // namespace ds
