// src/dist without mpirun: the exact sum's properties that make mpirun runs
// independent of the rank count, and the attempt range a rank generates.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <regex>
#include <vector>

#include "dist/comm.h"
#include "dist/data_parallel.h"
#include "dist/profile.h"
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

// The data-parallel step sends the scale with its statistics: LocalMax then
// ReduceWithMax must give Reduce's bits, and a non-finite term an infinite max.
TEST(ExactSum, ScaleCarriedOutsideGivesTheSameBits) {
  const size_t n = 777;
  auto t = Terms(3, n, 11);
  std::vector<float> a(n), b(n);
  dist::ExactSum s;
  s.Begin(n, 4);
  for (int k = 0; k < 3; ++k) s.Add(t[size_t(k)].data(), double(k + 2));
  ASSERT_TRUE(s.Reduce(9, a.data()).ok());
  const double m = s.LocalMax();
  double want = 0;
  for (int k = 0; k < 3; ++k)
    for (float x : t[size_t(k)]) want = std::max(want, std::fabs(double(x)) * double(k + 2));
  EXPECT_EQ(m, want);
  ASSERT_TRUE(s.ReduceWithMax(m, 9, b.data()).ok());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), n * sizeof(float)));
  // A larger scale from another rank changes the rounding grid, not the value.
  ASSERT_TRUE(s.ReduceWithMax(4 * m, 9, b.data()).ok());
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * m);
  t[1][5] = INFINITY;
  s.Begin(n, 4);
  for (int k = 0; k < 3; ++k) s.Add(t[size_t(k)].data(), 1);
  EXPECT_TRUE(std::isinf(s.LocalMax()));
}

// Without mpirun the profile is this process's: one line, the phases' sums.
TEST(Profile, OneLinePerRankWithEveryPhase) {
  dist::AddTime(dist::Phase::kValidate, 1.5, 0.25);
  {
    dist::Timed t(dist::Phase::kSave);
    t.Stop();
    t.Stop();  // once only
  }
  auto lines = dist::ProfileLines(10.0);
  ASSERT_TRUE(lines.ok());
  ASSERT_EQ(lines.value().size(), 1u);
  const std::string& l = lines.value()[0];
  EXPECT_NE(l.find("mpi profile rank 0: setup 0.00s"), std::string::npos) << l;
  EXPECT_NE(l.find("validation 1.50s (cpu 0.25s)"), std::string::npos) << l;
  EXPECT_NE(l.find("save 0.00s"), std::string::npos) << l;
  // Other: the total less the phases (the earlier tests of this binary may
  // have timed a few ms of fixed-point sums into the same process's profile;
  // each printed value is rounded to 0.01).
  double phases = 0;
  const std::regex wall("([0-9]+\\.[0-9]{2})s \\(cpu");
  for (auto it = std::sregex_iterator(l.begin(), l.end(), wall); it != std::sregex_iterator(); ++it)
    phases += std::stod((*it)[1].str());
  std::smatch other;
  ASSERT_TRUE(std::regex_search(l, other, std::regex("; other ([0-9]+\\.[0-9]{2})s of 10\\.00s; process cpu "))) << l;
  EXPECT_GE(phases, 1.5) << l;
  EXPECT_NEAR(std::stod(other[1].str()), 10.0 - phases, 0.051) << l;  // 10 roundings
  EXPECT_NE(l.find("s outside the phases)"), std::string::npos) << l;
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
  EXPECT_TRUE(p.legal_lo.empty());
  // Weights and each target's legal ids (the field tokenizer's loss over
  // legal ids) go with their rows: without them a shard's softmax runs over
  // the whole vocabulary, another loss than one process's.
  b.weights = {1, 1, 0.5f, 1, 0, 1};
  b.legal_lo = {0, 1, 2, 3, 4, 5};
  b.legal_hi = {10, 11, 12, 13, 14, 15};
  dist::SliceBatch(b, 0, 1, &p);
  EXPECT_EQ(p.inputs, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(p.weights, (std::vector<float>{1, 1}));
  EXPECT_EQ(p.legal_lo, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(p.legal_hi, (std::vector<int32_t>{10, 11}));
  dist::SliceBatch(b, 1, 3, &p);
  EXPECT_EQ(p.weights, (std::vector<float>{0.5f, 1, 0, 1}));
  EXPECT_EQ(p.legal_lo, (std::vector<int32_t>{2, 3, 4, 5}));
  EXPECT_EQ(p.legal_hi, (std::vector<int32_t>{12, 13, 14, 15}));
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
