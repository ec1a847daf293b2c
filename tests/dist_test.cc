// src/dist without mpirun: the exact sum's properties that make mpirun runs
// independent of the rank count, and the attempt range a rank generates.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "dist/comm.h"
#include "dist/data_parallel.h"
#include "generate/scheduler.h"

namespace ds {
namespace {

std::vector<std::vector<float>> Terms(int k, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  auto t = std::vector<std::vector<float>>(size_t(k), std::vector<float>(n));
  for (auto& v : t)
    for (auto& x : v) x = d(rng) * std::pow(10.0f, float(int(rng() % 7) - 3));
  return t;
}

TEST(ExactSum, WithoutMpirunNothingIsDistributed) {
  EXPECT_EQ(dist::Size(), 1);
  EXPECT_EQ(dist::Rank(), 0);
  EXPECT_FALSE(dist::Active());
  EXPECT_EQ(dist::DataParallel::Make(4, 10), nullptr);
  EXPECT_TRUE(dist::CheckLaunch().ok());
}

// The integers are summed, so the order (and grouping) of the terms does not
// change a bit of the result; and it is the weighted mean to float precision.
TEST(ExactSum, OrderIndependentAndAccurate) {
  const size_t n = 1000;
  auto t = Terms(5, n, 7);
  const std::vector<double> w = {3, 1, 4, 1, 5};
  std::vector<float> a(n), b(n);
  dist::ExactSum s;
  s.Begin(n, 5);
  for (int k = 0; k < 5; ++k) s.Add(t[size_t(k)].data(), w[size_t(k)]);
  ASSERT_TRUE(s.Reduce(14, a.data()).ok());
  s.Begin(n, 5);
  for (int k : {4, 2, 0, 3, 1}) std::copy(t[size_t(k)].begin(), t[size_t(k)].end(), s.Add(w[size_t(k)]));
  ASSERT_TRUE(s.Reduce(14, b.data()).ok());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), n * sizeof(float)));
  double worst = 0, big = 0;
  for (size_t i = 0; i < n; ++i) {
    double e = 0;
    for (int k = 0; k < 5; ++k) e += w[size_t(k)] * double(t[size_t(k)][i]);
    e /= 14;
    worst = std::max(worst, std::fabs(double(a[i]) - e));
    big = std::max(big, std::fabs(e));
  }
  EXPECT_LT(worst, 1e-6 * big);
}

TEST(ExactSum, NonFiniteMakesEverythingNaN) {
  std::vector<float> g = {1, 2, NAN}, out(3);
  dist::ExactSum s;
  s.Begin(3, 1);
  s.Add(g.data(), 1);
  ASSERT_TRUE(s.Reduce(1, out.data()).ok());
  for (float v : out) EXPECT_TRUE(std::isnan(v));
  g = {0, 0, 0};
  s.Begin(3, 1);
  s.Add(g.data(), 1);
  ASSERT_TRUE(s.Reduce(1, out.data()).ok());
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

TEST(ExactSum, SliceBatch) {
  Batch b;
  b.batch = 3;
  b.steps = 2;
  b.inputs = {1, 2, 3, 4, 5, 6};
  b.targets = {7, 8, 9, 10, 11, 12};
  Batch p;
  dist::SliceBatch(b, 1, 3, &p);
  EXPECT_EQ(p.batch, 2);
  EXPECT_EQ(p.inputs, (std::vector<int32_t>{3, 4, 5, 6}));
  EXPECT_EQ(p.targets, (std::vector<int32_t>{9, 10, 11, 12}));
  EXPECT_TRUE(p.weights.empty());
}

// A rank's part of a generation: exactly the attempts [first, end), finished
// at end however many were valid.
TEST(AttemptRange, IssuesOnlyTheRangeAndFinishesAtItsEnd) {
  AttemptScheduler::Options o;
  o.target = 100;
  o.first = 40;
  o.end = 50;
  AttemptScheduler s(o);
  std::vector<GenTask> t;
  s.Issue(1000, &t);
  ASSERT_EQ(t.size(), 10u);
  for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(t[i].id, 40 + i);
  for (const auto& task : t) {
    GeneratedRecord r;
    r.id = task.id;
    r.valid = task.id % 3 != 0;
    s.Complete(r);
  }
  GeneratedRecord r;
  uint64_t next = 40;
  while (s.Pop(&r)) EXPECT_EQ(r.id, next++);
  EXPECT_EQ(next, 50u);
  EXPECT_TRUE(s.finished());
  EXPECT_TRUE(s.status().ok());
  AttemptScheduler::Position p{45, 0, 3, 2};
  EXPECT_TRUE(AttemptScheduler::CheckStart(o, p).ok());
  p.attempt = 5;
  EXPECT_FALSE(AttemptScheduler::CheckStart(o, p).ok());
}

}  // namespace
}  // namespace ds
