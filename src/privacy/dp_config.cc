#include "privacy/dp_config.h"

#include <fmt/format.h>

#include <cmath>

namespace ds {

Result<DpPlan> PlanDp(const DpSettings& s, int64_t num_records, int64_t batch_size,
                      int64_t epochs) {
  if (!(s.dp_l2_norm_clip > 0) || std::isinf(s.dp_l2_norm_clip)) {
    return DS_ERR(kInvalidArgument, "dp_l2_norm_clip must be finite and > 0, got {}",
                  s.dp_l2_norm_clip);
  }
  if (!(s.dp_target_epsilon >= 0) || std::isinf(s.dp_target_epsilon)) {
    return DS_ERR(kInvalidArgument, "dp_target_epsilon must be finite and >= 0 (0 = off), got {}",
                  s.dp_target_epsilon);
  }
  if (!(s.dp_delta >= 0 && s.dp_delta < 1)) {
    return DS_ERR(kInvalidArgument, "dp_delta must be in [0, 1) (0 = 1/records), got {}",
                  s.dp_delta);
  }
  if (batch_size <= 0)
    return DS_ERR(kInvalidArgument, "batch_size must be > 0, got {}", batch_size);
  if (epochs <= 0) return DS_ERR(kInvalidArgument, "epochs must be > 0, got {}", epochs);
  if (num_records < batch_size || num_records < 2) {
    return DS_ERR(kInvalidInput,
                  "too few records for DP training: {} records, batch_size {} (need at least "
                  "one batch)",
                  num_records, batch_size);
  }
  DpPlan p;
  p.expected_batch_size = double(batch_size);
  p.sampling_rate = double(batch_size) / double(num_records);
  // ceil(epochs * n / b) without overflow for realistic sizes.
  const long double steps = std::ceil((long double)epochs * num_records / batch_size);
  if (steps > (long double)kMaxSteps) {
    return DS_ERR(kInvalidArgument, "too many DP steps ({} epochs)", epochs);
  }
  p.steps = int64_t(steps);
  p.delta = s.dp_delta > 0 ? s.dp_delta : 1.0 / double(num_records);
  p.l2_norm_clip = s.dp_l2_norm_clip;
  if (s.marginal_share > 0) {
    if (!(s.dp_target_epsilon > 0) || !(s.marginal_share < 1))
      return DS_ERR(kInvalidArgument,
                    "dp_marginal_share {} needs dp_target_epsilon and must be < 1 (the "
                    "marginals take a share of the target)",
                    s.marginal_share);
    Result<double> sm = NoiseForTargetEpsilon(s.marginal_share * s.dp_target_epsilon, 1.0, 1, p.delta);
    if (!sm.ok()) return sm.status();
    p.marginal_noise_multiplier = sm.value();
  }
  const std::vector<double> extra = p.ExtraRdp();
  if (s.dp_target_epsilon > 0) {
    Result<double> sigma =
        NoiseForTargetEpsilon(s.dp_target_epsilon, p.sampling_rate, p.steps, p.delta,
                              RdpConversion::kImproved, extra.empty() ? nullptr : &extra);
    if (!sigma.ok()) return sigma.status();
    p.noise_multiplier = sigma.value();
  } else {
    if (!(s.dp_noise_multiplier > 0) || std::isinf(s.dp_noise_multiplier)) {
      return DS_ERR(kInvalidArgument,
                    "dp_noise_multiplier must be finite and > 0 when dp_target_epsilon is not "
                    "set, got {}",
                    s.dp_noise_multiplier);
    }
    p.noise_multiplier = s.dp_noise_multiplier;
  }
  p.noise_stddev = p.noise_multiplier * p.l2_norm_clip;
  p.expected = ComputeEpsilon({p.sampling_rate, p.noise_multiplier, p.steps, p.delta});
  p.sgd_epsilon_alone = p.expected.epsilon;
  if (!extra.empty()) {
    RdpAccountant acc;
    acc.AddSteps(p.sampling_rate, p.noise_multiplier, p.steps);
    acc.AddGaussian(p.marginal_noise_multiplier);
    p.expected = acc.GetEpsilon(p.delta);
    p.marginal_epsilon_alone = ComputeEpsilon({1.0, p.marginal_noise_multiplier, 1, p.delta}).epsilon;
  }
  return p;
}

double DefaultMarginalShare(double target_epsilon, int64_t records) {
  if (target_epsilon <= 2 || (records > 0 && records < kDpFewRecords)) return 0.8;
  if (target_epsilon <= 5) return 0.65;
  return 0.5;
}

std::vector<double> DpPlan::ExtraRdp() const {
  if (!(marginal_noise_multiplier > 0)) return {};
  return GaussianRdp(marginal_noise_multiplier, DefaultOrders());
}

std::string DescribeDpPlan(const DpPlan& p) {
  if (p.marginal_noise_multiplier > 0)
    return fmt::format(
        "DP: DP-SGD q={:.4g} sigma={:.4g} clip={:.4g} steps={} (alone eps={:.4g}) + marginals "
        "Gaussian sigma={:.4g} (alone eps={:.4g}); delta={:.3g} -> composed eps={:.4g} (order {:g})",
        p.sampling_rate, p.noise_multiplier, p.l2_norm_clip, p.steps, p.sgd_epsilon_alone,
        p.marginal_noise_multiplier, p.marginal_epsilon_alone, p.delta, p.expected.epsilon,
        p.expected.order);
  return fmt::format(
      "DP-SGD: q={:.4g} sigma={:.4g} clip={:.4g} steps={} delta={:.3g} -> eps={:.4g} (order {:g})",
      p.sampling_rate, p.noise_multiplier, p.l2_norm_clip, p.steps, p.delta, p.expected.epsilon,
      p.expected.order);
}

}  // namespace ds
