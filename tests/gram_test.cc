// GramLower (backend/cpu/gram.h): the clip path's per-example Gram matrices,
// against a double-precision loop, over the 4 x 4 block edges (n not a
// multiple of 4), the masked k tail (k not a multiple of 16) and a row stride
// wider than k (the time-major layout).
#include "backend/cpu/gram.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace ds {
namespace cpu {
namespace {

TEST(GramLower, MatchesDoubleLoopAndKeepsTheUpperTriangle) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int n : {1, 2, 3, 4, 5, 7, 8, 21, 33})
    for (int k : {1, 15, 16, 17, 64, 130, 512}) {
      const size_t lda = size_t(k) * 3 + 5;
      std::vector<float> a(size_t(n) * lda);
      for (float& v : a) v = nd(rng);
      const float kSentinel = -12345.0f;
      std::vector<float> g(size_t(n) * n, kSentinel);
      GramLower(n, k, a.data(), lda, g.data());
      for (int t = 0; t < n; ++t)
        for (int s = 0; s < n; ++s) {
          const float got = g[size_t(t) * n + s];
          if (s > t) {
            EXPECT_EQ(got, kSentinel) << "upper entry written: n " << n << " k " << k;
            continue;
          }
          double want = 0, mag = 0;
          for (int c = 0; c < k; ++c) {
            const double p = double(a[t * lda + c]) * a[s * lda + c];
            want += p;
            mag += std::fabs(p);
          }
          EXPECT_NEAR(got, want, 1e-5 * mag + 1e-6)
              << "n " << n << " k " << k << " t " << t << " s " << s;
        }
    }
}

// bf16 rows: the products of the rounded values are exact in fp32, so the
// result is the double loop over the same bf16 values to fp32 summation (k
// tails of 1..31 past steps of 32).
TEST(GramLowerBf16, MatchesDoubleLoopOnTheRoundedValues) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto to_float = [](uint16_t v) {
    const uint32_t u = uint32_t(v) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  for (int n : {1, 3, 4, 5, 21, 33})
    for (int k : {1, 24, 31, 32, 33, 64, 130, 512}) {
      const size_t lda = size_t(k) * 3 + 5;
      std::vector<uint16_t> a(size_t(n) * lda);
      for (uint16_t& v : a) {
        const float f = nd(rng);
        uint32_t u;
        std::memcpy(&u, &f, 4);
        v = uint16_t(u >> 16);  // truncation: any bf16 value will do
      }
      const float kSentinel = -12345.0f;
      std::vector<float> g(size_t(n) * n, kSentinel);
      GramLowerBf16(n, k, a.data(), lda, g.data());
      for (int t = 0; t < n; ++t)
        for (int s = 0; s < n; ++s) {
          const float got = g[size_t(t) * n + s];
          if (s > t) {
            EXPECT_EQ(got, kSentinel) << "upper entry written: n " << n << " k " << k;
            continue;
          }
          double want = 0, mag = 0;
          for (int c = 0; c < k; ++c) {
            const double p = double(to_float(a[t * lda + c])) * to_float(a[s * lda + c]);
            want += p;
            mag += std::fabs(p);
          }
          EXPECT_NEAR(got, want, 1e-5 * mag + 1e-6)
              << "n " << n << " k " << k << " t " << t << " s " << s;
        }
    }
}

TEST(GramLower, EmptyIsANoOp) {
  float g = 3.0f;
  GramLower(0, 16, nullptr, 16, &g);
  GramLower(-1, 16, nullptr, 16, &g);
  EXPECT_EQ(g, 3.0f);
}

}  // namespace
}  // namespace cpu
}  // namespace ds
