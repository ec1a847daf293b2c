#include "train/lr_schedule.h"

#include <gtest/gtest.h>

#include <vector>

namespace ds {
namespace {

// The rate of each epoch for a sequence of "improved" verdicts.
std::vector<double> Rates(LrSchedule s, const std::vector<bool>& improved) {
  std::vector<double> out;
  for (bool i : improved) {
    out.push_back(s.lr());
    s.EndEpoch(i);
  }
  return out;
}

TEST(LrSchedule, ConstantNeverChanges) {
  LrSchedule s(false, 0.01, 0.5, 0, 0.1);
  for (double lr : Rates(s, {true, false, false, false, false})) EXPECT_EQ(lr, 0.01);
}

TEST(LrSchedule, PlateauHalvesAfterPatiencePlusOneBadEpochs) {
  // patience 2: the third epoch in a row without improvement halves the rate
  // and the count restarts; an improvement resets it.
  LrSchedule s(true, 0.004, 0.5, 2, 0.1);
  const std::vector<bool> improved = {true, false, false, false, false, true,
                                      false, false, false, false, false, false};
  const std::vector<double> want = {0.004, 0.004, 0.004, 0.004, 0.002, 0.002,
                                    0.002, 0.002, 0.002, 0.001, 0.001, 0.001};
  std::vector<double> got = Rates(s, improved);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(got[i], want[i]) << "epoch " << i + 1;
}

TEST(LrSchedule, PlateauStopsAtTheFloor) {
  LrSchedule s(true, 0.01, 0.5, 0, 0.1);
  std::vector<double> got = Rates(s, std::vector<bool>(8, false));
  const std::vector<double> want = {0.01, 0.005, 0.0025, 0.00125, 0.001, 0.001, 0.001, 0.001};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(got[i], want[i]) << "epoch " << i + 1;
  EXPECT_FALSE(s.EndEpoch(false) && s.lr() < 0.001);
}

TEST(LrSchedule, RestoreContinuesTheSameSchedule) {
  LrSchedule a(true, 0.003, 0.5, 1, 0.1), b(true, 0.003, 0.5, 1, 0.1);
  const std::vector<bool> improved = {true, false, false, false, true, false, false};
  for (size_t i = 0; i < 3; ++i) a.EndEpoch(improved[i]);
  b.Restore(a.lr(), a.wait());
  for (size_t i = 3; i < improved.size(); ++i) {
    a.EndEpoch(improved[i]);
    b.EndEpoch(improved[i]);
    EXPECT_EQ(a.lr(), b.lr());
    EXPECT_EQ(a.wait(), b.wait());
  }
}

}  // namespace
}  // namespace ds

namespace ds {
namespace {

// FieldLearningRate: base x sqrt(144 / steps an epoch), within [base, 0.006].
TEST(FieldLearningRate, FewStepsAnEpochGetALargerRateUpToTheCap) {
  EXPECT_DOUBLE_EQ(FieldLearningRate(0.003, 144), 0.003);   // the reference: unchanged
  EXPECT_DOUBLE_EQ(FieldLearningRate(0.003, 1000), 0.003);  // many steps: never below base
  EXPECT_DOUBLE_EQ(FieldLearningRate(0.003, 64), 0.0045);   // sqrt(144 / 64) = 1.5
  EXPECT_DOUBLE_EQ(FieldLearningRate(0.003, 36), 0.006);    // sqrt(4) = 2: the cap
  EXPECT_DOUBLE_EQ(FieldLearningRate(0.003, 15), 0.006);    // breast_cancer's 15
  EXPECT_DOUBLE_EQ(FieldLearningRate(0.003, 1), 0.006);
  EXPECT_DOUBLE_EQ(FieldLearningRate(0.003, 0), 0.006);     // no step: as one
  // Monotone: fewer steps never give a smaller rate.
  double last = 0;
  for (int64_t s = 400; s >= 1; --s) {
    const double lr = FieldLearningRate(0.003, s);
    EXPECT_GE(lr, last) << s;
    last = lr;
  }
  // A base above the cap is kept as it is.
  EXPECT_DOUBLE_EQ(FieldLearningRate(0.02, 10), 0.02);
}

}  // namespace
}  // namespace ds
