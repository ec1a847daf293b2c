// Learning-rate schedule of a training run (docs/training.md "Learning rate").
//
//   constant  the configured learning_rate for every step (the reference);
//   plateau   reduce on plateau, once per epoch: after more than `patience`
//             epochs in a row without an improvement of the early-stopping
//             metric (by early_stopping_min_delta), lr *= factor, never below
//             min_ratio * learning_rate; the count restarts after a reduction.
//             (PyTorch's ReduceLROnPlateau with cooldown 0, as TabularARGN
//             trains.)
// The state (lr, wait) is part of checkpoint.json, so a resumed run continues
// the same schedule.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace ds {

// The field tokenizer's default starting rate for a run of `steps_per_epoch`
// optimizer steps an epoch (a learning_rate not given; without dp): `base` x
// sqrt(kFieldLrRefSteps / steps), at least `base` and at most kFieldLrMax. A
// table's run stops on its held-out loss after a similar number of epochs
// whatever its size, so a table of few steps an epoch gets few steps in all,
// and at 0.003 they crawl: breast_cancer (455 records, 15 steps an epoch)
// trained 29-33 epochs at 0.003 and 16-20 at 0.006, at a lower held-out loss
// (docs/typed_fields.md "Learning rate by steps an epoch"). The adaptive batch
// (clamp(records / 16, 1, 32)) gives every table under ~500 records 12-16
// steps an epoch, so the cap; telco_churn (141) keeps 0.00303. A cap of 0.01
// lost up to 6 points on the smallest tables (stocks, carshare, penguins).
inline constexpr double kFieldLrRefSteps = 144;
inline constexpr double kFieldLrMax = 0.006;
inline double FieldLearningRate(double base, int64_t steps_per_epoch) {
  const double steps = double(std::max<int64_t>(1, steps_per_epoch));
  return std::clamp(base * std::sqrt(kFieldLrRefSteps / steps), base, std::max(base, kFieldLrMax));
}

class LrSchedule {
 public:
  LrSchedule() = default;
  LrSchedule(bool plateau, double lr, double factor, int patience, double min_ratio)
      : plateau_(plateau), lr_(lr), min_lr_(lr * min_ratio), factor_(factor),
        patience_(patience) {}

  double lr() const { return lr_; }
  int wait() const { return wait_; }
  void Restore(double lr, int wait) {
    lr_ = lr;
    wait_ = wait;
  }
  // After an epoch: whether its metric improved. Returns true when the rate
  // was reduced.
  bool EndEpoch(bool improved) {
    if (!plateau_) return false;
    if (improved) {
      wait_ = 0;
      return false;
    }
    if (++wait_ <= patience_) return false;
    wait_ = 0;
    const double next = std::max(lr_ * factor_, min_lr_);
    const bool reduced = next < lr_;
    lr_ = next;
    return reduced;
  }

 private:
  bool plateau_ = false;
  double lr_ = 0, min_lr_ = 0, factor_ = 0.5;
  int patience_ = 2, wait_ = 0;
};

}  // namespace ds
