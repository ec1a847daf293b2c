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

namespace ds {

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
