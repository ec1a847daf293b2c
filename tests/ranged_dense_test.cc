// RangedDense (backend/cpu/ranged_dense.h), the ranged logits of generation
// as one kernel over the rows sharing a range: equal to the fp32 dot products
// of a double-precision reference within rounding; bit for bit the portable
// form (std::fma in the same order), whatever rows share the call; nothing
// written outside [lo, hi). And through the backend: StepRange's ranged rows
// equal the plain path's full GEMM logits within the same tolerance, and a
// row's logits do not depend on the other rows' ranges.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cpu/buffer.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/ranged_dense.h"
#include "util/rng.h"

namespace ds {
namespace {

struct Problem {
  int m, K, V;
  std::vector<float> x, w, b;
  Problem(int m_, int K_, int V_, uint64_t seed) : m(m_), K(K_), V(V_) {
    Philox rng(seed, 0);
    auto u = [&] { return float(rng.UniformDouble() * 2 - 1); };
    x.resize(size_t(m) * K);
    w.resize(size_t(K) * V);
    b.resize(size_t(V));
    for (auto& v : x) v = u();
    for (auto& v : w) v = u() * 0.2f;
    for (auto& v : b) v = u();
  }
  std::vector<const float*> Rows() const {
    std::vector<const float*> r;
    for (int i = 0; i < m; ++i) r.push_back(x.data() + size_t(i) * K);
    return r;
  }
  double Ref(int r, int v) const {
    double s = b[size_t(v)];
    for (int k = 0; k < K; ++k) s += double(x[size_t(r) * K + k]) * w[size_t(k) * V + v];
    return s;
  }
};

std::vector<float> RunRanged(const Problem& p, int lo, int hi, bool portable) {
  std::vector<float> out(size_t(p.m) * p.V, 12345.0f);  // sentinel outside the range
  std::vector<float*> o;
  for (int i = 0; i < p.m; ++i) o.push_back(out.data() + size_t(i) * p.V);
  const auto x = p.Rows();
  if (portable) {
    cpu::RangedDensePortable(p.m, x.data(), p.K, p.w.data(), p.V, p.b.data(), lo, hi, o.data());
  } else {
    const auto packed = cpu::PackRangedDense(p.K, p.V, p.w.data(), p.V);
    cpu::RangedDense(p.m, x.data(), p.K, packed.data(), p.b.data(), lo, hi, o.data());
  }
  return out;
}

TEST(RangedDense, MatchesReferenceAndPortableFormBitForBit) {
  const Problem p(13, 128, 400, 5);  // 13 rows: four blocks of 3 and a tail of 1
  const int ranges[][2] = {{0, 1}, {3, 18}, {7, 23}, {100, 164}, {150, 255}, {39, 400}, {0, 400}};
  for (const auto& rg : ranges) {
    const int lo = rg[0], hi = rg[1];
    const auto fast = RunRanged(p, lo, hi, false), port = RunRanged(p, lo, hi, true);
    for (int r = 0; r < p.m; ++r) {
      for (int v = 0; v < p.V; ++v) {
        const float got = fast[size_t(r) * p.V + v];
        if (v < lo || v >= hi) {
          ASSERT_EQ(got, 12345.0f) << "wrote outside [" << lo << ", " << hi << ") at " << v;
          continue;
        }
        ASSERT_EQ(got, port[size_t(r) * p.V + v]) << "row " << r << " id " << v;
        // 128 terms of |x w| <= 0.2: fp32 rounding stays far below 1e-5.
        ASSERT_NEAR(got, p.Ref(r, v), 1e-5) << "row " << r << " id " << v;
      }
    }
  }
}

// K % 4 != 0 (the chains' tail) and V % 16 != 0 (a partial last panel).
TEST(RangedDense, OddSizesMatchThePortableForm) {
  const Problem p(5, 37, 45, 13);
  for (const auto& rg : {std::pair{0, 45}, std::pair{31, 45}, std::pair{44, 45}, std::pair{15, 17}}) {
    const auto fast = RunRanged(p, rg.first, rg.second, false);
    const auto port = RunRanged(p, rg.first, rg.second, true);
    for (size_t i = 0; i < fast.size(); ++i) ASSERT_EQ(fast[i], port[i]) << i;
  }
}

TEST(RangedDense, ARowsLogitsDoNotDependOnItsGroup) {
  const Problem p(11, 96, 200, 9);
  const auto all = RunRanged(p, 20, 125, false);
  const auto x = p.Rows();
  const auto packed = cpu::PackRangedDense(p.K, p.V, p.w.data(), p.V);
  for (int r = 0; r < p.m; ++r) {  // the same row alone
    std::vector<float> out(size_t(p.V), 0.0f);
    float* o = out.data();
    cpu::RangedDense(1, &x[size_t(r)], p.K, packed.data(), p.b.data(), 20, 125, &o);
    for (int v = 20; v < 125; ++v) ASSERT_EQ(out[size_t(v)], all[size_t(r) * p.V + v]);
  }
}

// The backend: rows of mixed ranges (three groups, one full-width row, one
// empty range) against the plain path's GEMM over every logit.
TEST(RangedDense, BackendRangedRowsMatchThePlainPath) {
  NetworkSpec spec;
  spec.vocab_size = 150;
  spec.embedding_dim = 16;
  spec.rnn_units = 64;
  spec.num_layers = 1;
  const ParamLayout lay = ParamLayout::For(spec);
  cpu::Buffer<float> w(lay.total);
  InitParams(spec, "glorot_uniform", 4, w.data());
  const int n = 9, V = spec.vocab_size;
  auto fast = cpu::NewCpuInferBackend(spec, w.data(), n, 1, cpu::InferOptions{Precision::kFp32, true});
  auto plain =
      cpu::NewCpuInferBackend(spec, w.data(), n, 1, cpu::InferOptions{Precision::kFp32, false});
  auto alone = cpu::NewCpuInferBackend(spec, w.data(), n, 1, cpu::InferOptions{Precision::kFp32, true});
  std::vector<int> ids(n);
  std::vector<int32_t> tok(n), lo(n), hi(n);
  for (int i = 0; i < n; ++i) ids[i] = i, tok[i] = (7 * i + 3) % V;
  const int32_t L[] = {5, 40, 5, 0, 40, 5, 77, 40, 10}, Hh[] = {60, 145, 60, 150, 145, 60, 77, 145, 11};
  for (int i = 0; i < n; ++i) lo[i] = L[i], hi[i] = Hh[i];
  std::vector<float> a(size_t(n) * V), b(size_t(n) * V);
  for (int step = 0; step < 3; ++step) {
    fast->StepRange(ids.data(), tok.data(), n, lo.data(), hi.data(), a.data());
    plain->StepRange(ids.data(), tok.data(), n, nullptr, nullptr, b.data());
    for (int i = 0; i < n; ++i)
      for (int v = lo[i]; v < hi[i]; ++v)
        ASSERT_NEAR(a[size_t(i) * V + v], b[size_t(i) * V + v], 2e-5) << "row " << i << " id " << v;
    // Row 1 stepped in a batch where every other row has another range, and
    // with them all on row 1's range: the same bits.
    std::vector<int32_t> lo2(n, lo[1]), hi2(n, hi[1]);
    std::vector<float> c(size_t(n) * V);
    alone->StepRange(ids.data(), tok.data(), n, lo2.data(), hi2.data(), c.data());
    for (int v = lo[1]; v < hi[1]; ++v) ASSERT_EQ(a[size_t(V) + v], c[size_t(V) + v]) << v;
    for (int i = 0; i < n; ++i) tok[i] = (tok[i] + 11) % V;
  }
}

}  // namespace
}  // namespace ds
