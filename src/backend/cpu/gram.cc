#include "backend/cpu/gram.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace ds {
namespace cpu {
namespace {

#if defined(__AVX512F__)
// out[i] = the sum of the 16 lanes of v[i], i < 16: a tree of unpacks and
// 128-bit lane shuffles (45 instructions against 16 reductions of ~8 each).
inline __m512 SumsOf16(const __m512* v) {
  __m512 w[8], x[4], y[2];
  for (int i = 0; i < 8; ++i)
    w[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(w[2 * i]), b = _mm512_castps_pd(w[2 * i + 1]);
    x[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  for (int i = 0; i < 2; ++i)
    y[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0xdd));
  return _mm512_add_ps(_mm512_shuffle_f32x4(y[0], y[1], 0x88), _mm512_shuffle_f32x4(y[0], y[1], 0xdd));
}

// The 4 x 4 block's entries with s <= t < n from acc[i][j] (rows t0 + i, s0 + j).
inline void StoreBlock(const __m512 (&acc)[4][4], int n, int t0, int s0, float* g) {
  alignas(64) float sums[16];
  _mm512_store_ps(sums, SumsOf16(&acc[0][0]));
  for (int i = 0; i < 4; ++i) {
    const int t = t0 + i;
    if (t >= n) break;
    for (int j = 0; j < 4; ++j) {
      const int s = s0 + j;
      if (s > t) break;
      g[size_t(t) * n + s] = sums[4 * i + j];
    }
  }
}
#endif

#if defined(__AVX512F__)
// GCC 12 warns falsely inside the masked-load intrinsics (their unused source
// operand), as in train_cpu.cc's transposes.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Rows t0..t0+3 against rows s0..s0+3 (indices past n read row n - 1 and are
// not stored); entries with s <= t < n written to g.
void Block4x4(int n, int k, const float* a, size_t lda, int t0, int s0, float* g) {
  const float* t_0 = a + size_t(std::min(t0 + 0, n - 1)) * lda;
  const float* t_1 = a + size_t(std::min(t0 + 1, n - 1)) * lda;
  const float* t_2 = a + size_t(std::min(t0 + 2, n - 1)) * lda;
  const float* t_3 = a + size_t(std::min(t0 + 3, n - 1)) * lda;
  const float* s_0 = a + size_t(std::min(s0 + 0, n - 1)) * lda;
  const float* s_1 = a + size_t(std::min(s0 + 1, n - 1)) * lda;
  const float* s_2 = a + size_t(std::min(s0 + 2, n - 1)) * lda;
  const float* s_3 = a + size_t(std::min(s0 + 3, n - 1)) * lda;
  // 16 named accumulators: GCC keeps an array of them on the stack, stored and
  // reloaded every step (measured 1.5-2x slower).
  __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00,
         a12 = a00, a13 = a00, a20 = a00, a21 = a00, a22 = a00, a23 = a00, a30 = a00, a31 = a00,
         a32 = a00, a33 = a00;
  for (int c = 0; c < k; c += 16) {
    const __mmask16 m = k - c >= 16 ? __mmask16(0xffff) : __mmask16((1u << (k - c)) - 1);
    const __m512 x0 = _mm512_maskz_loadu_ps(m, t_0 + c), x1 = _mm512_maskz_loadu_ps(m, t_1 + c);
    const __m512 x2 = _mm512_maskz_loadu_ps(m, t_2 + c), x3 = _mm512_maskz_loadu_ps(m, t_3 + c);
    const __m512 y0 = _mm512_maskz_loadu_ps(m, s_0 + c), y1 = _mm512_maskz_loadu_ps(m, s_1 + c);
    const __m512 y2 = _mm512_maskz_loadu_ps(m, s_2 + c), y3 = _mm512_maskz_loadu_ps(m, s_3 + c);
    a00 = _mm512_fmadd_ps(x0, y0, a00), a01 = _mm512_fmadd_ps(x0, y1, a01);
    a02 = _mm512_fmadd_ps(x0, y2, a02), a03 = _mm512_fmadd_ps(x0, y3, a03);
    a10 = _mm512_fmadd_ps(x1, y0, a10), a11 = _mm512_fmadd_ps(x1, y1, a11);
    a12 = _mm512_fmadd_ps(x1, y2, a12), a13 = _mm512_fmadd_ps(x1, y3, a13);
    a20 = _mm512_fmadd_ps(x2, y0, a20), a21 = _mm512_fmadd_ps(x2, y1, a21);
    a22 = _mm512_fmadd_ps(x2, y2, a22), a23 = _mm512_fmadd_ps(x2, y3, a23);
    a30 = _mm512_fmadd_ps(x3, y0, a30), a31 = _mm512_fmadd_ps(x3, y1, a31);
    a32 = _mm512_fmadd_ps(x3, y2, a32), a33 = _mm512_fmadd_ps(x3, y3, a33);
  }
  const __m512 acc[4][4] = {{a00, a01, a02, a03}, {a10, a11, a12, a13}, {a20, a21, a22, a23},
                            {a30, a31, a32, a33}};
  StoreBlock(acc, n, t0, s0, g);
}
#pragma GCC diagnostic pop
#endif

#if defined(__AVX512F__) && defined(__AVX512BF16__) && defined(__AVX512BW__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Block4x4 on bf16 rows: vdpbf16ps takes 32 values a step (each product of
// two bf16 exact in fp32, summed in fp32), a masked tail.
void Block4x4Bf16(int n, int k, const uint16_t* a, size_t lda, int t0, int s0, float* g) {
  const uint16_t* t_0 = a + size_t(std::min(t0 + 0, n - 1)) * lda;
  const uint16_t* t_1 = a + size_t(std::min(t0 + 1, n - 1)) * lda;
  const uint16_t* t_2 = a + size_t(std::min(t0 + 2, n - 1)) * lda;
  const uint16_t* t_3 = a + size_t(std::min(t0 + 3, n - 1)) * lda;
  const uint16_t* s_0 = a + size_t(std::min(s0 + 0, n - 1)) * lda;
  const uint16_t* s_1 = a + size_t(std::min(s0 + 1, n - 1)) * lda;
  const uint16_t* s_2 = a + size_t(std::min(s0 + 2, n - 1)) * lda;
  const uint16_t* s_3 = a + size_t(std::min(s0 + 3, n - 1)) * lda;
  // 16 named accumulators: GCC keeps an array of them on the stack, stored and
  // reloaded every step.
  __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00,
         a12 = a00, a13 = a00, a20 = a00, a21 = a00, a22 = a00, a23 = a00, a30 = a00, a31 = a00,
         a32 = a00, a33 = a00;
  for (int c = 0; c < k; c += 32) {
    const __mmask32 m = k - c >= 32 ? ~__mmask32(0) : __mmask32((1u << (k - c)) - 1);
    const __m512bh x0 = (__m512bh)_mm512_maskz_loadu_epi16(m, t_0 + c);
    const __m512bh x1 = (__m512bh)_mm512_maskz_loadu_epi16(m, t_1 + c);
    const __m512bh x2 = (__m512bh)_mm512_maskz_loadu_epi16(m, t_2 + c);
    const __m512bh x3 = (__m512bh)_mm512_maskz_loadu_epi16(m, t_3 + c);
    const __m512bh y0 = (__m512bh)_mm512_maskz_loadu_epi16(m, s_0 + c);
    const __m512bh y1 = (__m512bh)_mm512_maskz_loadu_epi16(m, s_1 + c);
    const __m512bh y2 = (__m512bh)_mm512_maskz_loadu_epi16(m, s_2 + c);
    const __m512bh y3 = (__m512bh)_mm512_maskz_loadu_epi16(m, s_3 + c);
    a00 = _mm512_dpbf16_ps(a00, x0, y0), a01 = _mm512_dpbf16_ps(a01, x0, y1);
    a02 = _mm512_dpbf16_ps(a02, x0, y2), a03 = _mm512_dpbf16_ps(a03, x0, y3);
    a10 = _mm512_dpbf16_ps(a10, x1, y0), a11 = _mm512_dpbf16_ps(a11, x1, y1);
    a12 = _mm512_dpbf16_ps(a12, x1, y2), a13 = _mm512_dpbf16_ps(a13, x1, y3);
    a20 = _mm512_dpbf16_ps(a20, x2, y0), a21 = _mm512_dpbf16_ps(a21, x2, y1);
    a22 = _mm512_dpbf16_ps(a22, x2, y2), a23 = _mm512_dpbf16_ps(a23, x2, y3);
    a30 = _mm512_dpbf16_ps(a30, x3, y0), a31 = _mm512_dpbf16_ps(a31, x3, y1);
    a32 = _mm512_dpbf16_ps(a32, x3, y2), a33 = _mm512_dpbf16_ps(a33, x3, y3);
  }
  const __m512 acc[4][4] = {{a00, a01, a02, a03}, {a10, a11, a12, a13}, {a20, a21, a22, a23},
                            {a30, a31, a32, a33}};
  StoreBlock(acc, n, t0, s0, g);
}
#pragma GCC diagnostic pop
#endif

[[maybe_unused]] float Bf16ToFloat(uint16_t v) {
  const uint32_t u = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

void GramLowerBf16(int n, int k, const uint16_t* a, size_t lda, float* g) {
  if (n <= 0) return;
#if defined(__AVX512F__) && defined(__AVX512BF16__) && defined(__AVX512BW__)
  for (int t0 = 0; t0 < n; t0 += 4)
    for (int s0 = 0; s0 <= t0; s0 += 4) Block4x4Bf16(n, k, a, lda, t0, s0, g);
#else
  for (int t = 0; t < n; ++t)
    for (int s = 0; s <= t; ++s) {
      const uint16_t* x = a + size_t(t) * lda;
      const uint16_t* y = a + size_t(s) * lda;
      float sum = 0;
      for (int c = 0; c < k; ++c) sum += Bf16ToFloat(x[c]) * Bf16ToFloat(y[c]);
      g[size_t(t) * n + s] = sum;
    }
#endif
}

void GramLower(int n, int k, const float* a, size_t lda, float* g) {
  if (n <= 0) return;
#if defined(__AVX512F__)
  for (int t0 = 0; t0 < n; t0 += 4)
    for (int s0 = 0; s0 <= t0; s0 += 4) Block4x4(n, k, a, lda, t0, s0, g);
#else
  for (int t = 0; t < n; ++t)
    for (int s = 0; s <= t; ++s) {
      const float* x = a + size_t(t) * lda;
      const float* y = a + size_t(s) * lda;
      float sum = 0;
      for (int c = 0; c < k; ++c) sum += x[c] * y[c];
      g[size_t(t) * n + s] = sum;
    }
#endif
}

}  // namespace cpu
}  // namespace ds
