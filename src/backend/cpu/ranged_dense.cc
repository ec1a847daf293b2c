#include "backend/cpu/ranged_dense.h"

#include <algorithm>
#include <cmath>

#if defined(__AVX512F__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // see vmath.h
#include <immintrin.h>
#endif

namespace ds::cpu {

// Every element: four fp32 chains of fused multiply-adds, chain j over k = j,
// j + 4, j + 8, ... in order, combined as (c0 + c1) + (c2 + c3) + b[v]. Four
// chains, so that a lone row of a narrow range (a digit: one vector of 16)
// does not wait on one FMA latency chain of K steps.
constexpr int kChains = 4;

void RangedDensePortable(int m, const float* const* x, int K, const float* w, int ldw,
                         const float* b, int lo, int hi, float* const* out) {
  for (int r = 0; r < m; ++r) {
    for (int v = lo; v < hi; ++v) {
      float acc[kChains] = {0, 0, 0, 0};
      for (int k = 0; k < K; ++k)
        acc[k % kChains] = std::fma(x[r][k], w[size_t(k) * ldw + v], acc[k % kChains]);
      out[r][v] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + b[v];
    }
  }
}

std::vector<float> PackRangedDense(int K, int V, const float* w, int ldw) {
  const int panels = (V + 15) / 16;
  std::vector<float> p(size_t(panels) * K * 16, 0.0f);
  for (int t = 0; t < panels; ++t)
    for (int k = 0; k < K; ++k)
      for (int l = 0; l < 16 && 16 * t + l < V; ++l)
        p[(size_t(t) * K + k) * 16 + l] = w[size_t(k) * ldw + 16 * t + l];
  return p;
}

#if defined(__AVX512F__)
namespace {

// R rows x NV panels from panel t on; lane l of panel t + j is column
// 16 (t + j) + l, kept where its bit of mask[j] is set (masked loads and
// stores: nothing outside the range is read from b, or written).
// R x NV x 4 accumulators.
template <int R, int NV>
void Block(const float* const* x, int K, const float* packed, const float* b, int t,
           const __mmask16* mask, float* const* out) {
  // The small loops unrolled early, so that the accumulators become registers
  // (without it GCC keeps the array on the stack and stores it at every k).
  __m512 acc[kChains][R * NV];
#pragma GCC unroll 4
  for (int q = 0; q < kChains; ++q)
#pragma GCC unroll 32
    for (int i = 0; i < R * NV; ++i) acc[q][i] = _mm512_setzero_ps();
  const float* xr[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) xr[r] = x[r];
  const float* pt = packed + size_t(t) * K * 16;
  auto step = [&](int k, __m512* a) __attribute__((always_inline)) {
    __m512 wv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) wv[j] = _mm512_loadu_ps(pt + (size_t(j) * K + k) * 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 xb = _mm512_set1_ps(xr[r][k]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) a[r * NV + j] = _mm512_fmadd_ps(xb, wv[j], a[r * NV + j]);
    }
  };
  int k = 0;
  for (; k + kChains <= K; k += kChains) {
#pragma GCC unroll 4
    for (int q = 0; q < kChains; ++q) step(k + q, acc[q]);
  }
  // The tail (K % 4 terms) by constant indices: a variable index would keep
  // the accumulators in memory.
  if (k < K) step(k, acc[0]);
  if (k + 1 < K) step(k + 1, acc[1]);
  if (k + 2 < K) step(k + 2, acc[2]);
#pragma GCC unroll 4
  for (int j = 0; j < NV; ++j) {
    const int c = 16 * (t + j);
    const __m512 bv = _mm512_maskz_loadu_ps(mask[j], b + c);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const int i = r * NV + j;
      const __m512 s = _mm512_add_ps(_mm512_add_ps(acc[0][i], acc[1][i]),
                                     _mm512_add_ps(acc[2][i], acc[3][i]));
      _mm512_mask_storeu_ps(out[r] + c, mask[j], _mm512_add_ps(s, bv));
    }
  }
}

// The lanes of panel t inside [lo, hi).
__mmask16 PanelMask(int t, int lo, int hi) {
  const int a = std::max(lo - 16 * t, 0), e = std::min(hi - 16 * t, 16);
  return e <= a ? __mmask16(0) : __mmask16(((1u << e) - 1u) & ~((1u << a) - 1u));
}

// Rows x0.. (R of them) over panels t, t + 1 (NV = 2; one when t + 1 is past
// the range): 3 x 2 x 4 = 24 accumulators.
template <int R>
void Panels(const float* const* x, int K, const float* packed, const float* b, int t, int t1,
            const __mmask16* mask, float* const* out) {
  if (t + 1 < t1) {
    Block<R, 2>(x, K, packed, b, t, mask, out);
  } else {
    Block<R, 1>(x, K, packed, b, t, mask, out);
  }
}

}  // namespace
#endif

void RangedDense(int m, const float* const* x, int K, const float* packed, const float* b, int lo,
                 int hi, float* const* out) {
  if (m <= 0 || hi <= lo) return;
#if defined(__AVX512F__)
  // Panel pairs outside, rows inside: a pair (2 x 16 x K floats, 16 KB at K =
  // 128) stays in L1 for all the rows, where rows outside streamed every panel
  // of the range from L2 for each 3 rows (fail2ban, 256 pieces: a 350-id text
  // range, 180 KB; the dense took more time than the LSTM's GEMM). Each
  // element's sum is the same either way.
  constexpr int kRows = 3;
  const int t1 = (hi + 15) / 16;
  for (int t = lo / 16; t < t1; t += 2) {
    const __mmask16 mask[2] = {PanelMask(t, lo, hi), PanelMask(t + 1, lo, hi)};
    int r = 0;
    for (; r + kRows <= m; r += kRows) Panels<kRows>(x + r, K, packed, b, t, t1, mask, out + r);
    if (m - r == 2) Panels<2>(x + r, K, packed, b, t, t1, mask, out + r);
    if (m - r == 1) Panels<1>(x + r, K, packed, b, t, t1, mask, out + r);
  }
#else
  // The packed panels as a row-major matrix per panel: column v of W is lane
  // v % 16 of panel v / 16, at stride 16 over k.
  for (int v = lo; v < hi; ++v) {
    std::vector<float*> o(out, out + m);
    const float* col = packed + size_t(v / 16) * K * 16 + v % 16;
    for (int r = 0; r < m; ++r) o[size_t(r)] += v;  // out_r[v] at o[r][0]
    RangedDensePortable(m, x, K, col, 16, b + v, 0, 1, o.data());
  }
#endif
}

}  // namespace ds::cpu
