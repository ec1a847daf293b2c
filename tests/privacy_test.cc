// Tests for src/privacy: the RDP accountant (against dp-accounting vectors,
// published TF Privacy numbers, closed forms and cross-checks between its two
// series), and the ChaCha20-based Gaussian noise (RFC 8439 vectors, a scalar
// libm reference, distribution tests, determinism).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "privacy/dp_config.h"
#include "privacy/rdp_accountant.h"
#include "privacy/secure_noise.h"

namespace ds {
namespace {

// ---------------------------------------------------------------- accountant

struct Vector {
  double q, sigma;
  int64_t steps;
  double delta, eps, order, eps_classic, order_classic;
};

std::vector<Vector> LoadVectors() {
  const std::string path = std::string(DS_TEST_DATA) + "/privacy/rdp_vectors.csv";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<Vector> out;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      EXPECT_EQ(line, "q,sigma,steps,delta,epsilon,order,epsilon_classic,order_classic");
      header = false;
      continue;
    }
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream ss(line);
    Vector v;
    ss >> v.q >> v.sigma >> v.steps >> v.delta >> v.eps >> v.order >> v.eps_classic >>
        v.order_classic;
    EXPECT_FALSE(ss.fail()) << line;
    out.push_back(v);
  }
  return out;
}

TEST(RdpAccountant, DefaultOrdersAreTheReferences) {
  const std::vector<double> o = DefaultOrders();
  ASSERT_EQ(o.size(), 99u + 58u + 3u);
  EXPECT_DOUBLE_EQ(o.front(), 1.05);
  EXPECT_DOUBLE_EQ(o[98], 5.95);
  EXPECT_EQ(o[99], 6.0);
  EXPECT_EQ(o[156], 63.0);
  EXPECT_EQ(o[157], 128.0);
  EXPECT_EQ(o.back(), 512.0);
  EXPECT_TRUE(std::is_sorted(o.begin(), o.end()));
}

TEST(RdpAccountant, MatchesDpAccountingVectors) {
  const std::vector<Vector> vs = LoadVectors();
  ASSERT_EQ(vs.size(), 300u);
  double worst = 0, worst_classic = 0;
  int order_mismatch = 0;
  for (const Vector& v : vs) {
    SCOPED_TRACE(testing::Message() << "q=" << v.q << " sigma=" << v.sigma << " steps=" << v.steps
                                    << " delta=" << v.delta);
    const DpParams p{v.q, v.sigma, v.steps, v.delta};
    const DpResult r = ComputeEpsilon(p);
    const DpResult c = ComputeEpsilon(p, RdpConversion::kClassic);
    const double rel = std::abs(r.epsilon - v.eps) / v.eps;
    const double rel_c = std::abs(c.epsilon - v.eps_classic) / v.eps_classic;
    // The brief asks for 1%; we match to floating-point noise.
    EXPECT_LT(rel, 1e-9) << r.epsilon << " vs " << v.eps;
    EXPECT_LT(rel_c, 1e-9) << c.epsilon << " vs " << v.eps_classic;
    worst = std::max(worst, rel);
    worst_classic = std::max(worst_classic, rel_c);
    order_mismatch += (r.order != v.order) + (c.order != v.order_classic);
    // The improved conversion is never worse than the classic one.
    EXPECT_LE(r.epsilon, c.epsilon * (1 + 1e-12));
  }
  EXPECT_EQ(order_mismatch, 0);
  std::printf("worst relative error: improved %.3g, classic %.3g\n", worst, worst_classic);
}

// Published TF Privacy numbers (2019, classic conversion). Both come from the
// compute_dp_sgd_privacy tool (orders 1.25..4.5, 5..63, 128, 256, 512 and
// steps = ceil(epochs * N / batch_size)): its docstring says N=60000,
// batch 256, noise 1.12, 60 epochs, delta 1e-5 -> (2.92, 1e-5)-DP, and the
// tutorials README says the MNIST defaults (noise 1.1, 60 epochs) give eps = 3.01.
TEST(RdpAccountant, MatchesPublishedTfPrivacyNumbers) {
  std::vector<double> orders = {1.25, 1.5, 1.75, 2., 2.25, 2.5, 3., 3.5, 4., 4.5};
  for (int a = 5; a < 64; ++a) orders.push_back(a);
  for (double a : {128., 256., 512.}) orders.push_back(a);
  const double q = 256.0 / 60000;
  const int64_t steps = int64_t(std::ceil(60.0 * 60000 / 256));
  ASSERT_EQ(steps, 14063);
  const double e112 =
      ComputeEpsilon({q, 1.12, steps, 1e-5}, orders, RdpConversion::kClassic).epsilon;
  const double e110 =
      ComputeEpsilon({q, 1.1, steps, 1e-5}, orders, RdpConversion::kClassic).epsilon;
  EXPECT_NEAR(e112, 2.92, 0.005);
  EXPECT_NEAR(e110, 3.01, 0.005);
  // The improved conversion (today's default) is tighter for the same run.
  EXPECT_LT(ComputeEpsilon({q, 1.1, steps, 1e-5}, orders).epsilon, e110);

  // The MNIST tutorial itself (orders 1 + x/10 for x = 1..99, then 12..63; steps
  // = epoch * 60000 // 256) prints eps 1.03 after epoch 1, 1.11 after epoch 2
  // and 3.01 after epoch 60; the README's table adds noise 1.3 / 15 epochs ->
  // 1.19 and noise 0.7 / 45 epochs -> 7.10 (all at delta = 1e-5, batch 256).
  std::vector<double> tutorial;
  for (int x = 1; x < 100; ++x) tutorial.push_back(1 + x / 10.0);
  for (int a = 12; a < 64; ++a) tutorial.push_back(a);
  struct Published {
    double sigma;
    int epochs;
    double eps;
  };
  for (const Published& c :
       {Published{1.1, 1, 1.03}, Published{1.1, 2, 1.11}, Published{1.1, 60, 3.01},
        Published{1.3, 15, 1.19}, Published{0.7, 45, 7.10}}) {
    const int64_t st = int64_t(c.epochs) * 60000 / 256;
    const double e =
        ComputeEpsilon({q, c.sigma, st, 1e-5}, tutorial, RdpConversion::kClassic).epsilon;
    EXPECT_NEAR(e, c.eps, 0.005) << c.sigma << " " << c.epochs;
  }
}

TEST(RdpAccountant, SpecialCases) {
  const std::vector<double> orders = DefaultOrders();
  // q = 1: the plain Gaussian mechanism, rdp(a) = a / (2 sigma^2).
  std::vector<double> rdp = ComputeRdp(1.0, 2.0, orders);
  for (size_t k = 0; k < orders.size(); ++k) EXPECT_DOUBLE_EQ(rdp[k], orders[k] / 8.0);
  // q = 0: nothing is released about anyone.
  EXPECT_EQ(ComputeEpsilon({0.0, 1.0, 1000, 1e-5}).epsilon, 0.0);
  // sigma = 0: no finite guarantee.
  EXPECT_TRUE(std::isinf(ComputeEpsilon({0.01, 0.0, 10, 1e-5}).epsilon));
  // steps = 0: nothing spent, even with sigma = 0.
  EXPECT_EQ(ComputeEpsilon({0.01, 0.0, 0, 1e-5}).epsilon, 0.0);
  // Integer order 2 in closed form: A_2 = 1 + q^2 (exp(1/sigma^2) - 1).
  for (double q : {0.001, 0.02, 0.3, 0.9}) {
    for (double s : {0.7, 1.3, 4.0}) {
      const double want = std::log1p(q * q * std::expm1(1 / (s * s)));
      // Summing ~1-sized terms in log space limits the absolute accuracy to ~1e-17.
      EXPECT_NEAR(ComputeRdp(q, s, {2.0})[0], want, 3e-17 + 1e-13 * want) << q << " " << s;
    }
  }
}

// The fractional series (erfc tails) and the integer binomial sum compute the
// same function: at a +- 1e-7 around integers they must agree with rdp(a).
TEST(RdpAccountant, FractionalSeriesMatchesIntegerSum) {
  for (double q : {0.001, 0.01, 0.05}) {
    for (double s : {0.8, 1.1, 2.0, 5.0}) {
      for (double a : {2.0, 3.0, 5.0, 8.0, 16.0}) {
        const std::vector<double> r = ComputeRdp(q, s, {a - 1e-7, a, a + 1e-7});
        if (std::isinf(r[0]) || std::isinf(r[2])) continue;  // series did not converge
        EXPECT_NEAR(r[0], r[1], 1e-5 * r[1]) << q << " " << s << " " << a;
        EXPECT_NEAR(r[2], r[1], 1e-5 * r[1]) << q << " " << s << " " << a;
        EXPECT_LE(r[0], r[2]);  // RDP is non-decreasing in the order
      }
    }
  }
}

TEST(RdpAccountant, Monotone) {
  const double delta = 1e-5;
  double prev = 0;
  for (int64_t steps : {1, 10, 100, 1000, 10000, 100000}) {
    const double e = ComputeEpsilon({0.01, 1.0, steps, delta}).epsilon;
    EXPECT_GT(e, prev) << steps;
    prev = e;
  }
  prev = 0;
  for (double q : {0.0005, 0.001, 0.01, 0.05, 0.2, 0.5, 1.0}) {
    const double e = ComputeEpsilon({q, 1.0, 1000, delta}).epsilon;
    EXPECT_GT(e, prev) << q;
    prev = e;
  }
  prev = INFINITY;
  for (double s : {0.5, 0.7, 1.0, 1.5, 3.0, 10.0, 100.0}) {
    const double e = ComputeEpsilon({0.01, s, 1000, delta}).epsilon;
    EXPECT_LT(e, prev) << s;
    prev = e;
  }
  // Smaller delta costs more epsilon.
  EXPECT_GT(ComputeEpsilon({0.01, 1.0, 1000, 1e-7}).epsilon,
            ComputeEpsilon({0.01, 1.0, 1000, 1e-5}).epsilon);
}

TEST(RdpAccountant, DeltaForEpsilonInvertsEpsilonForDelta) {
  for (RdpConversion conv : {RdpConversion::kImproved, RdpConversion::kClassic}) {
    for (double delta : {1e-5, 1e-7}) {
      const DpParams p{0.01, 1.1, 2000, delta};
      const DpResult e = ComputeEpsilon(p, conv);
      const DeltaResult d = ComputeDeltaForEpsilon(p, e.epsilon, conv);
      EXPECT_NEAR(d.delta, delta, 1e-9 * delta);
      EXPECT_EQ(d.order, e.order);
      // Spending less epsilon leaves a larger delta.
      EXPECT_GT(ComputeDeltaForEpsilon(p, 0.5 * e.epsilon, conv).delta, delta);
    }
  }
}

TEST(RdpAccountant, RunningAccountantAddsUp) {
  RdpAccountant acc;
  acc.AddSteps(0.01, 1.1, 300);
  acc.AddSteps(0.01, 1.1, 700);
  const DpResult a = acc.GetEpsilon(1e-5);
  const DpResult b = ComputeEpsilon({0.01, 1.1, 1000, 1e-5});
  EXPECT_NEAR(a.epsilon, b.epsilon, 1e-12 * b.epsilon);
  // A different q then composes: between the two pure runs.
  acc.AddSteps(0.02, 1.1, 1000);
  const double mixed = acc.GetEpsilon(1e-5).epsilon;
  EXPECT_GT(mixed, ComputeEpsilon({0.01, 1.1, 2000, 1e-5}).epsilon);
  EXPECT_LT(mixed, ComputeEpsilon({0.02, 1.1, 2000, 1e-5}).epsilon);
  EXPECT_NEAR(acc.GetDelta(mixed).delta, 1e-5, 1e-14);
}

TEST(RdpAccountant, NoiseForTargetEpsilonRoundTrip) {
  struct Case {
    double eps, q;
    int64_t steps;
    double delta;
  };
  for (const Case& c : {Case{1.0, 0.01, 1000, 1e-5}, Case{3.0, 256.0 / 60000, 14063, 1e-5},
                        Case{8.0, 0.05, 5000, 1 / 7043.0}, Case{0.5, 0.001, 100, 1e-6},
                        Case{10.0, 1.0, 10, 1e-5}}) {
    SCOPED_TRACE(testing::Message() << c.eps << " " << c.q << " " << c.steps);
    const Result<double> sigma = NoiseForTargetEpsilon(c.eps, c.q, c.steps, c.delta);
    ASSERT_TRUE(sigma.ok()) << sigma.status().ToString();
    const double got = ComputeEpsilon({c.q, sigma.value(), c.steps, c.delta}).epsilon;
    EXPECT_LE(got, c.eps);
    EXPECT_GT(got, c.eps * 0.999);  // close, not wastefully noisy
    // A slightly smaller sigma would exceed the target.
    EXPECT_GT(ComputeEpsilon({c.q, sigma.value() * (1 - 1e-5), c.steps, c.delta}).epsilon, c.eps);
  }
  // q = 1 (full batch), closed form check: eps = min_a a T/(2 s^2) + ... is
  // covered above; here: nothing to protect -> no noise.
  EXPECT_EQ(NoiseForTargetEpsilon(1.0, 0.0, 100, 1e-5).value(), 0.0);
  EXPECT_EQ(NoiseForTargetEpsilon(1.0, 0.1, 0, 1e-5).value(), 0.0);
  // Unreachable: even sigma = 1000 over 1e9 full-batch steps spends more than 0.01.
  const Result<double> bad = NoiseForTargetEpsilon(0.01, 1.0, 1000000000, 1e-5);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("unreachable"), std::string::npos);
  EXPECT_FALSE(NoiseForTargetEpsilon(-1.0, 0.1, 10, 1e-5).ok());
  EXPECT_FALSE(NoiseForTargetEpsilon(1.0, 1.5, 10, 1e-5).ok());
  EXPECT_FALSE(NoiseForTargetEpsilon(1.0, 0.1, 10, 0.0).ok());
}

TEST(RdpAccountant, MaxStepsWithinBudget) {
  for (double target : {1.0, 2.0, 8.0}) {  // one step already costs 0.78
    const double q = 0.01, s = 1.1, delta = 1e-5;
    const int64_t n = MaxStepsWithinBudget(target, q, s, delta);
    ASSERT_GT(n, 0) << target;
    EXPECT_LE(ComputeEpsilon({q, s, n, delta}).epsilon, target);
    EXPECT_GT(ComputeEpsilon({q, s, n + 1, delta}).epsilon, target);
  }
  EXPECT_EQ(MaxStepsWithinBudget(0.01, 1.0, 0.5, 1e-5), 0);  // one step already too much
  EXPECT_EQ(MaxStepsWithinBudget(1.0, 0.0, 1.0, 1e-5), kMaxSteps);
}

TEST(RdpAccountant, RejectsInvalidInput) {
  EXPECT_FALSE(CheckDpParams({1.5, 1.0, 10, 1e-5}).ok());
  EXPECT_FALSE(CheckDpParams({0.1, -1.0, 10, 1e-5}).ok());
  EXPECT_FALSE(CheckDpParams({0.1, 1.0, -1, 1e-5}).ok());
  const Status s = CheckDpParams({0.1, 1.0, 10, 1.0});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("dp_delta"), std::string::npos);
  EXPECT_TRUE(CheckDpParams({0.1, 1.0, 10, 1e-5}).ok());
  EXPECT_THROW(ComputeEpsilon({0.1, 1.0, 10, 0.0}), Error);
  EXPECT_THROW(ComputeRdp(0.1, 1.0, {1.0}), Error);
}

TEST(DpConfig, PlanFromNoiseMultiplier) {
  DpSettings s;
  s.dp = true;
  s.dp_noise_multiplier = 1.1;
  s.dp_l2_norm_clip = 1.5;
  const Result<DpPlan> p = PlanDp(s, 60000, 256, 60);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_DOUBLE_EQ(p->sampling_rate, 256.0 / 60000);
  EXPECT_EQ(p->steps, 14063);
  EXPECT_DOUBLE_EQ(p->delta, 1.0 / 60000);  // the reference's delta = 1/n
  EXPECT_DOUBLE_EQ(p->noise_stddev, 1.1 * 1.5);
  EXPECT_DOUBLE_EQ(p->expected.epsilon,
                   ComputeEpsilon({256.0 / 60000, 1.1, 14063, 1.0 / 60000}).epsilon);
  EXPECT_NE(DescribeDpPlan(p.value()).find("steps=14063"), std::string::npos);
}

TEST(DpConfig, PlanFromTargetEpsilon) {
  DpSettings s;
  s.dp = true;
  s.dp_target_epsilon = 5.0;
  s.dp_delta = 1e-5;
  const Result<DpPlan> p = PlanDp(s, 7043, 64, 30);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_LE(p->expected.epsilon, 5.0);
  EXPECT_GT(p->expected.epsilon, 4.99);
  EXPECT_DOUBLE_EQ(p->delta, 1e-5);
  // The reference's default noise (0.1) over the same run: epsilon in the
  // hundreds or more, which is why the target mode exists.
  DpSettings weak;
  weak.dp = true;
  EXPECT_GT(PlanDp(weak, 7043, 64, 30)->expected.epsilon, 100.0);
}

TEST(DpConfig, PlanErrors) {
  DpSettings s;
  s.dp = true;
  s.dp_l2_norm_clip = 0;
  EXPECT_NE(PlanDp(s, 1000, 64, 1).status().message().find("dp_l2_norm_clip"), std::string::npos);
  s.dp_l2_norm_clip = 1;
  const Status few = PlanDp(s, 10, 64, 1).status();
  EXPECT_EQ(few.code(), Code::kInvalidInput);
  EXPECT_NE(few.message().find("too few records"), std::string::npos);
  s.dp_target_epsilon = 1e-3;  // unreachable: q = 0.64 over 157 steps, even with sigma = 1000
  s.dp_delta = 1e-5;
  EXPECT_NE(PlanDp(s, 100, 64, 100).status().message().find("unreachable"), std::string::npos);
  s.dp_target_epsilon = 0;
  s.dp_delta = 1.0;
  EXPECT_NE(PlanDp(s, 1000, 64, 1).status().message().find("dp_delta"), std::string::npos);
}

// ---------------------------------------------------------------- ChaCha20

std::vector<uint8_t> Hex(const std::string& s) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < s.size();) {
    if (s[i] == ' ' || s[i] == ':' || s[i] == '\n') {
      ++i;
      continue;
    }
    out.push_back(uint8_t(std::stoi(s.substr(i, 2), nullptr, 16)));
    i += 2;
  }
  return out;
}

uint32_t Le32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

// RFC 8439 section 2.3.2.
TEST(ChaCha20, Rfc8439BlockFunction) {
  uint32_t key[8];
  for (int w = 0; w < 8; ++w) {
    const uint8_t b[4] = {uint8_t(4 * w), uint8_t(4 * w + 1), uint8_t(4 * w + 2),
                          uint8_t(4 * w + 3)};
    key[w] = Le32(b);
  }
  const std::vector<uint8_t> nonce = Hex("00:00:00:09:00:00:00:4a:00:00:00:00");
  const uint32_t words[4] = {1, Le32(&nonce[0]), Le32(&nonce[4]), Le32(&nonce[8])};
  uint32_t out[16];
  ChaCha20Block(key, words, out);
  const uint32_t want[16] = {0xe4e7f110, 0x15593bd1, 0x1fdd0f50, 0xc47120a3, 0xc7f4d1c7, 0x0368c033,
                             0x9aaa2204, 0x4e6cd4c3, 0x466482d2, 0x09aa9f07, 0x05d7c214, 0xa2028bd9,
                             0xd19c12b5, 0xb94e16de, 0xe883d0cb, 0x4e3c50a2};
  for (int w = 0; w < 16; ++w) EXPECT_EQ(out[w], want[w]) << w;
}

// RFC 8439 section 2.4.2.
TEST(ChaCha20, Rfc8439Encryption) {
  uint8_t key[32];
  for (int i = 0; i < 32; ++i) key[i] = uint8_t(i);
  const std::vector<uint8_t> nonce = Hex("00:00:00:00:00:00:00:4a:00:00:00:00");
  const std::string text =
      "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the "
      "future, sunscreen would be it.";
  const std::vector<uint8_t> want = Hex(
      "6e 2e 35 9a 25 68 f9 80 41 ba 07 28 dd 0d 69 81 e9 7e 7a ec 1d 43 60 c2 0a 27 af cc fd 9f "
      "ae 0b f9 1b 65 c5 52 47 33 ab 8f 59 3d ab cd 62 b3 57 16 39 d6 24 e6 51 52 ab 8f 53 0c "
      "35 9f 08 61 d8 07 ca 0d bf 50 0d 6a 61 56 a3 8e 08 8a 22 b6 5e 52 bc 51 4d 16 cc f8 06 81 "
      "8c e9 1a b7 79 37 36 5a f9 0b bf 74 a3 5b e6 b4 0b 8e ed f2 78 5e 42 87 4d");
  ASSERT_EQ(want.size(), text.size());
  std::vector<uint8_t> ct(text.size());
  ChaCha20Xor(key, 1, nonce.data(), reinterpret_cast<const uint8_t*>(text.data()), ct.data(),
              text.size());
  EXPECT_EQ(ct, want);
  std::vector<uint8_t> pt(ct.size());
  ChaCha20Xor(key, 1, nonce.data(), ct.data(), pt.data(), ct.size());
  EXPECT_EQ(std::string(pt.begin(), pt.end()), text);
}

// The 8-lane kernel the sampler uses is the RFC block function with a 64-bit
// counter in words 12-13 (including a carry into word 13).
TEST(ChaCha20, EightLaneKernelMatchesScalar) {
  const uint32_t key[8] = {0x03020100, 0x07060504, 0xdeadbeef, 42, 7, 0xffffffff, 0, 99};
  const uint64_t nonce = 0x0123456789abcdefull;
  for (uint64_t ctr : {uint64_t(0), uint64_t(0xfffffffcull), uint64_t(1) << 40}) {
    uint32_t x[16][8];
    ChaCha20Block8(key, ctr, nonce, x);
    for (int b = 0; b < 8; ++b) {
      const uint64_t c = ctr + b;
      const uint32_t words[4] = {uint32_t(c), uint32_t(c >> 32), uint32_t(nonce),
                                 uint32_t(nonce >> 32)};
      uint32_t want[16];
      ChaCha20Block(key, words, want);
      for (int w = 0; w < 16; ++w) ASSERT_EQ(x[w][b], want[w]) << ctr << " " << b << " " << w;
    }
  }
}

// ---------------------------------------------------------------- Gaussian

// Box-Muller with libm on the same keystream bits, following the layout
// documented in secure_noise.h: the fast kernels must agree to ~1e-14.
TEST(SecureGaussian, MatchesLibmReference) {
  // Recover the key of Deterministic(seed) is not possible from outside, so
  // compare through a known key: Deterministic(0)'s first group equals the
  // reference computed from ChaCha20Block8 with the same key. We get the key by
  // re-deriving it the documented way (SplitMix64 of the seed).
  uint64_t state = 12345;
  auto split = [&state]() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  uint32_t key[8];
  for (int w = 0; w < 8; w += 2) {
    const uint64_t r = split();
    key[w] = uint32_t(r);
    key[w + 1] = uint32_t(r >> 32);
  }
  const uint64_t nonce = 0x594C4E4F54534554ull;
  SecureGaussian g = SecureGaussian::Deterministic(12345);
  const int kGroups = 200;
  std::vector<double> z(kGroups * 64);
  g.FillDouble(z.data(), z.size(), 1.0);
  double worst = 0;
  for (int grp = 0; grp < kGroups; ++grp) {
    uint32_t x[16][8];
    ChaCha20Block8(key, 8 * uint64_t(grp), nonce, x);
    uint64_t v[64];
    for (int k = 0; k < 8; ++k)
      for (int b = 0; b < 8; ++b)
        v[k * 8 + b] = uint64_t(x[2 * k][b]) | uint64_t(x[2 * k + 1][b]) << 32;
    for (int i = 0; i < 32; ++i) {
      const double u1 = 1.0 - double(v[i] >> 11) * 0x1p-53;
      const double u2 = double(v[32 + i] >> 11) * 0x1p-53;
      const double r = std::sqrt(-2.0 * std::log(u1));
      const double z0 = r * std::cos(2 * M_PI * u2), z1 = r * std::sin(2 * M_PI * u2);
      const double* got = &z[grp * 64];
      worst = std::max(worst, std::abs(got[i] - z0));
      worst = std::max(worst, std::abs(got[32 + i] - z1));
    }
  }
  EXPECT_LT(worst, 1e-13);
}

struct Moments {
  double mean, stddev, kurtosis, within1, within2;
};
Moments Stats(const std::vector<float>& x) {
  double s1 = 0, s2 = 0;
  for (float v : x) s1 += v;
  const double mean = s1 / x.size();
  double s4 = 0, w1 = 0, w2 = 0;
  for (float v : x) {
    const double d = v - mean;
    s2 += d * d;
    s4 += d * d * d * d;
  }
  const double var = s2 / x.size();
  const double sd = std::sqrt(var);
  for (float v : x) {
    w1 += std::abs(v - mean) < sd;
    w2 += std::abs(v - mean) < 2 * sd;
  }
  return {mean, sd, s4 / x.size() / (var * var), w1 / x.size(), w2 / x.size()};
}

TEST(SecureGaussian, MomentsAndShape) {
  const size_t n = 1000000;
  for (double stddev : {1.0, 3.5}) {
    SecureGaussian g = SecureGaussian::Deterministic(7);
    std::vector<float> x(n);
    g.Fill(x.data(), n, stddev);
    const Moments m = Stats(x);
    // Standard errors at n = 1e6: mean 1e-3 sd, sd 7e-4 sd, kurtosis 2.5e-3.
    EXPECT_NEAR(m.mean / stddev, 0.0, 5e-3);
    EXPECT_NEAR(m.stddev / stddev, 1.0, 0.01);
    EXPECT_NEAR(m.stddev / stddev, 1.0, 0.004);
    EXPECT_NEAR(m.kurtosis, 3.0, 0.02);
    EXPECT_NEAR(m.within1, 0.682689, 0.003);
    EXPECT_NEAR(m.within2, 0.954500, 0.002);
  }
  // Kolmogorov-Smirnov against Phi (critical value at the 0.1% level: 1.95 / sqrt(n)).
  SecureGaussian g = SecureGaussian::Deterministic(8);
  std::vector<double> z(n);
  g.FillDouble(z.data(), n, 1.0);
  std::sort(z.begin(), z.end());
  double d = 0;
  for (size_t i = 0; i < n; ++i) {
    const double cdf = 0.5 * std::erfc(-z[i] / std::sqrt(2.0));
    d = std::max({d, std::abs(cdf - double(i) / n), std::abs(cdf - double(i + 1) / n)});
  }
  EXPECT_LT(d, 1.95 / std::sqrt(double(n)));
  // The tails exist (P(|z| > 4) = 6.3e-5, ~63 expected) but stay below the
  // 53-bit Box-Muller bound of 8.58.
  const size_t tail = std::count_if(z.begin(), z.end(), [](double v) { return std::abs(v) > 4; });
  EXPECT_GT(tail, 30u);
  EXPECT_LT(tail, 110u);
  EXPECT_LT(std::max(-z.front(), z.back()), 8.58);
}

TEST(SecureGaussian, DeterministicModeIsReproducibleAndChunkInvariant) {
  const size_t n = 3 * SecureGaussian::kParallelMin + 64 * 5;  // parallel path
  SecureGaussian a = SecureGaussian::Deterministic(99);
  SecureGaussian b = SecureGaussian::Deterministic(99);
  std::vector<float> xa(n), xb(n);
  a.Fill(xa.data(), n, 1.0);
  // Same stream in group-aligned serial chunks of varying size.
  size_t off = 0;
  for (size_t chunk : {size_t(64), size_t(640), size_t(64 * 1000)}) {
    b.Fill(xb.data() + off, chunk, 1.0);
    off += chunk;
  }
  b.Fill(xb.data() + off, n - off, 1.0);
  EXPECT_EQ(std::memcmp(xa.data(), xb.data(), n * sizeof(float)), 0);
  EXPECT_EQ(a.counter(), b.counter());
  // A partial group is discarded: the next call starts on a fresh group.
  SecureGaussian c = SecureGaussian::Deterministic(99);
  std::vector<float> xc(128);
  c.Fill(xc.data(), 10, 1.0);
  c.Fill(xc.data() + 64, 64, 1.0);
  EXPECT_EQ(std::memcmp(xc.data(), xa.data(), 10 * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(xc.data() + 64, xa.data() + 64, 64 * sizeof(float)), 0);
  // Another seed gives another stream.
  SecureGaussian d = SecureGaussian::Deterministic(100);
  std::vector<float> xd(256);
  d.Fill(xd.data(), xd.size(), 1.0);
  EXPECT_NE(std::memcmp(xd.data(), xa.data(), xd.size() * sizeof(float)), 0);
}

TEST(SecureGaussian, AddMatchesFill) {
  const size_t n = 1000;
  std::vector<float> base(n), noise(n), sum(n);
  for (size_t i = 0; i < n; ++i) base[i] = sum[i] = 0.25f * float(i);
  SecureGaussian::Deterministic(5).Fill(noise.data(), n, 0.5);
  SecureGaussian::Deterministic(5).Add(sum.data(), n, 0.5);
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(sum[i], base[i] + noise[i], 1e-4f * (1 + base[i]));
}

TEST(SecureGaussian, OsEntropyInstancesDiffer) {
  SecureGaussian a = SecureGaussian::FromOsEntropy();
  SecureGaussian b = SecureGaussian::FromOsEntropy();
  const size_t n = 200000;
  std::vector<float> xa(n), xb(n);
  a.Fill(xa.data(), n, 2.0);
  b.Fill(xb.data(), n, 2.0);
  size_t equal = 0;
  for (size_t i = 0; i < n; ++i) equal += xa[i] == xb[i];
  EXPECT_LT(equal, 10u);
  const Moments m = Stats(xa);
  EXPECT_NEAR(m.mean, 0.0, 0.03);  // 7 standard errors
  EXPECT_NEAR(m.stddev, 2.0, 0.02);
  // Moving keeps the stream; the source no longer replays it.
  SecureGaussian moved = std::move(a);
  std::vector<float> x1(64);
  moved.Fill(x1.data(), 64, 1.0);
  EXPECT_TRUE(std::all_of(x1.begin(), x1.end(), [](float v) { return std::isfinite(v); }));
}

}  // namespace
}  // namespace ds
