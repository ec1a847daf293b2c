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
// GCC 12 warns falsely inside the masked-load intrinsics (their unused source
// operand), as in train_cpu.cc's transposes.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Rows t0..t0+3 against rows s0..s0+3 (indices past n read row n - 1 and are
// not stored); entries with s <= t < n written to g.
void Block4x4(int n, int k, const float* a, size_t lda, int t0, int s0, float* g) {
  const float* rt[4];
  const float* rs[4];
  for (int i = 0; i < 4; ++i) {
    rt[i] = a + size_t(std::min(t0 + i, n - 1)) * lda;
    rs[i] = a + size_t(std::min(s0 + i, n - 1)) * lda;
  }
  __m512 acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_ps();
  int c = 0;
  for (; c + 16 <= k; c += 16) {
    __m512 vt[4], vs[4];
    for (int i = 0; i < 4; ++i) vt[i] = _mm512_loadu_ps(rt[i] + c);
    for (int j = 0; j < 4; ++j) vs[j] = _mm512_loadu_ps(rs[j] + c);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_fmadd_ps(vt[i], vs[j], acc[i][j]);
  }
  if (c < k) {
    const __mmask16 m = __mmask16((1u << (k - c)) - 1);
    __m512 vt[4], vs[4];
    for (int i = 0; i < 4; ++i) vt[i] = _mm512_maskz_loadu_ps(m, rt[i] + c);
    for (int j = 0; j < 4; ++j) vs[j] = _mm512_maskz_loadu_ps(m, rs[j] + c);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_fmadd_ps(vt[i], vs[j], acc[i][j]);
  }
  for (int i = 0; i < 4; ++i) {
    const int t = t0 + i;
    if (t >= n) break;
    for (int j = 0; j < 4; ++j) {
      const int s = s0 + j;
      if (s > t) break;
      g[size_t(t) * n + s] = _mm512_reduce_add_ps(acc[i][j]);
    }
  }
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
  const uint16_t* rt[4];
  const uint16_t* rs[4];
  for (int i = 0; i < 4; ++i) {
    rt[i] = a + size_t(std::min(t0 + i, n - 1)) * lda;
    rs[i] = a + size_t(std::min(s0 + i, n - 1)) * lda;
  }
  __m512 acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int c = 0; c < k; c += 32) {
    const __mmask32 m = k - c >= 32 ? ~__mmask32(0) : __mmask32((1u << (k - c)) - 1);
    __m512bh vt[4], vs[4];
    for (int i = 0; i < 4; ++i) vt[i] = (__m512bh)_mm512_maskz_loadu_epi16(m, rt[i] + c);
    for (int j = 0; j < 4; ++j) vs[j] = (__m512bh)_mm512_maskz_loadu_epi16(m, rs[j] + c);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], vt[i], vs[j]);
  }
  for (int i = 0; i < 4; ++i) {
    const int t = t0 + i;
    if (t >= n) break;
    for (int j = 0; j < 4; ++j) {
      const int s = s0 + j;
      if (s > t) break;
      g[size_t(t) * n + s] = _mm512_reduce_add_ps(acc[i][j]);
    }
  }
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
