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

#if defined(__AVX512F__)
namespace {

// R rows x NV vectors of 16 columns starting at column c; the last vector
// holds the lanes of `last` (masked loads and stores: nothing outside the
// range is read from W or b, or written). R x NV x 4 accumulators.
template <int R, int NV>
void Block(const float* const* x, int K, const float* w, int ldw, const float* b, int c,
           __mmask16 last, float* const* out) {
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
  auto step = [&](int k, __m512* a) __attribute__((always_inline)) {
    const float* wk = w + size_t(k) * ldw + c;
    __m512 wv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j)
      wv[j] = j + 1 < NV ? _mm512_loadu_ps(wk + 16 * j) : _mm512_maskz_loadu_ps(last, wk + 16 * j);
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
    const __mmask16 mk = j + 1 < NV ? __mmask16(0xffff) : last;
    const __m512 bv = _mm512_maskz_loadu_ps(mk, b + c + 16 * j);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const int i = r * NV + j;
      const __m512 s = _mm512_add_ps(_mm512_add_ps(acc[0][i], acc[1][i]),
                                     _mm512_add_ps(acc[2][i], acc[3][i]));
      _mm512_mask_storeu_ps(out[r] + c + 16 * j, mk, _mm512_add_ps(s, bv));
    }
  }
}

// Rows in blocks of R over column chunks of 32 (NV = 2; the tail chunk 1 or
// 2 vectors): 3 x 2 x 4 = 24 accumulators.
template <int R>
void Rows(const float* const* x, int K, const float* w, int ldw, const float* b, int lo, int hi,
          float* const* out) {
  constexpr int kCols = 32;
  for (int c = lo; c < hi; c += kCols) {
    const int n = std::min(kCols, hi - c), nv = (n + 15) / 16;
    const __mmask16 last = __mmask16((1u << (n - 16 * (nv - 1))) - 1u);
    if (nv == 1) {
      Block<R, 1>(x, K, w, ldw, b, c, last, out);
    } else {
      Block<R, 2>(x, K, w, ldw, b, c, last, out);
    }
  }
}

}  // namespace
#endif

void RangedDense(int m, const float* const* x, int K, const float* w, int ldw, const float* b,
                 int lo, int hi, float* const* out) {
  if (m <= 0 || hi <= lo) return;
#if defined(__AVX512F__)
  constexpr int kRows = 3;
  int r = 0;
  for (; r + kRows <= m; r += kRows) Rows<kRows>(x + r, K, w, ldw, b, lo, hi, out + r);
  if (m - r == 2) Rows<2>(x + r, K, w, ldw, b, lo, hi, out + r);
  if (m - r == 1) Rows<1>(x + r, K, w, ldw, b, lo, hi, out + r);
#else
  RangedDensePortable(m, x, K, w, ldw, b, lo, hi, out);
#endif
}

}  // namespace ds::cpu
