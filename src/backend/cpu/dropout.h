// Inverted-dropout keep masks for the CPU backend, drawn from the Philox
// stream that TrainBackend documents: site s at timestep t uses
// Philox(seed, stream = s << 32 | t), 16 bits per element, low half of each
// 32-bit word first; keep iff bits >= round(rate * 65536).
//
// DrawKeepMask produces exactly the sequence of ds::Philox::NextU32() (counter
// blocks 0, 1, 2, ... of 4 words each) but 16 counter blocks at a time in
// vectorizable loops.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "util/rng.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
// GCC 12's false maybe-uninitialized inside its AVX-512 intrinsics (vmath.h).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define DS_PHILOX_AVX512 1
#endif

namespace ds::cpu {

// 16 consecutive Philox-4x32-10 blocks, counters first..first+15 (low 32 bits;
// the caller keeps first + 15 < 2^32), stream s: out[4 * lane + word].
inline void Philox16(uint64_t seed, uint64_t stream, uint32_t first, uint32_t* out) {
  uint32_t c0[16], c1[16], c2[16], c3[16];
  for (int i = 0; i < 16; ++i) {
    c0[i] = first + uint32_t(i);
    c1[i] = 0;
    c2[i] = uint32_t(stream);
    c3[i] = uint32_t(stream >> 32);
  }
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int r = 0; r < 10; ++r) {
#pragma omp simd
    for (int i = 0; i < 16; ++i) {
      const uint64_t p0 = uint64_t(0xD2511F53u) * c0[i];
      const uint64_t p1 = uint64_t(0xCD9E8D57u) * c2[i];
      const uint32_t n0 = uint32_t(p1 >> 32) ^ c1[i] ^ k0;
      const uint32_t n1 = uint32_t(p1);
      const uint32_t n2 = uint32_t(p0 >> 32) ^ c3[i] ^ k1;
      const uint32_t n3 = uint32_t(p0);
      c0[i] = n0;
      c1[i] = n1;
      c2[i] = n2;
      c3[i] = n3;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  for (int i = 0; i < 16; ++i) {
    out[4 * i] = c0[i];
    out[4 * i + 1] = c1[i];
    out[4 * i + 2] = c2[i];
    out[4 * i + 3] = c3[i];
  }
}

#if defined(DS_PHILOX_AVX512)
// hi / lo = the high / low 32 bits of a[i] * m[i] per 32-bit lane.
inline void MulHiLo32(__m512i a, __m512i m, __m512i* hi, __m512i* lo) {
  const __m512i pe = _mm512_mul_epu32(a, m);                        // even lanes, 64-bit
  const __m512i po = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);  // odd lanes
  *lo = _mm512_mask_blend_epi32(0xAAAA, pe, _mm512_slli_epi64(po, 32));
  *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(pe, 32), po);
}

// Philox16 in AVX-512 registers (the same words): w[q] = out[16 q .. 16 q + 16).
inline void Philox16Avx512(uint64_t seed, uint64_t stream, uint32_t first, __m512i w[4]) {
  __m512i c0 = _mm512_add_epi32(_mm512_set1_epi32(int(first)),
                                _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  __m512i c1 = _mm512_setzero_si512();
  __m512i c2 = _mm512_set1_epi32(int(uint32_t(stream)));
  __m512i c3 = _mm512_set1_epi32(int(uint32_t(stream >> 32)));
  const __m512i m0 = _mm512_set1_epi32(int(0xD2511F53u)), m1 = _mm512_set1_epi32(int(0xCD9E8D57u));
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    __m512i hi0, lo0, hi1, lo1;
    MulHiLo32(c0, m0, &hi0, &lo0);
    MulHiLo32(c2, m1, &hi1, &lo1);
    c0 = _mm512_ternarylogic_epi32(hi1, c1, _mm512_set1_epi32(int(k0)), 0x96);  // xor of three
    c2 = _mm512_ternarylogic_epi32(hi0, c3, _mm512_set1_epi32(int(k1)), 0x96);
    c1 = lo1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // Lane i of c0..c3 -> words 4 i .. 4 i + 3: 4 x 4 transposes within each
  // 128-bit lane, then of the 128-bit lanes.
  const __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
  const __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
  const __m512i r0 = _mm512_unpacklo_epi64(t0, t2), r1 = _mm512_unpackhi_epi64(t0, t2);
  const __m512i r2 = _mm512_unpacklo_epi64(t1, t3), r3 = _mm512_unpackhi_epi64(t1, t3);
  const __m512i u0 = _mm512_shuffle_i32x4(r0, r1, 0x44), u1 = _mm512_shuffle_i32x4(r2, r3, 0x44);
  const __m512i u2 = _mm512_shuffle_i32x4(r0, r1, 0xEE), u3 = _mm512_shuffle_i32x4(r2, r3, 0xEE);
  w[0] = _mm512_shuffle_i32x4(u0, u1, 0x88);
  w[1] = _mm512_shuffle_i32x4(u0, u1, 0xDD);
  w[2] = _mm512_shuffle_i32x4(u2, u3, 0x88);
  w[3] = _mm512_shuffle_i32x4(u2, u3, 0xDD);
}
#endif

// mask[0..n) = keep flags (1 keep, 0 drop) for dropout site `site`, step t.
inline void DrawKeepMask(uint64_t seed, int site, int t, float rate, uint8_t* mask, size_t n) {
  const uint64_t stream = (uint64_t(site) << 32) | uint32_t(t);
  const uint32_t thr = uint32_t(std::lround(double(rate) * 65536.0));
  uint32_t words[64];
  size_t i = 0;
  uint32_t block = 0;
#if defined(DS_PHILOX_AVX512)
  if (thr <= 0xFFFFu) {  // the 16-bit compare (rate < 1 - 2^-17)
    const __m512i t16 = _mm512_set1_epi16(short(uint16_t(thr)));
    const __m256i one = _mm256_set1_epi8(1);
    for (; i + 128 <= n; i += 128, block += 16) {
      __m512i w[4];
      Philox16Avx512(seed, stream, block, w);
      for (int q = 0; q < 4; ++q)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(mask + i + 32 * q),
                            _mm256_maskz_mov_epi8(_mm512_cmpge_epu16_mask(w[q], t16), one));
    }
  }
#endif
  for (; i + 128 <= n; i += 128, block += 16) {  // 64 words = 128 elements
    Philox16(seed, stream, block, words);
#pragma omp simd
    for (int w = 0; w < 64; ++w) {
      mask[i + 2 * w] = (words[w] & 0xFFFFu) >= thr;
      mask[i + 2 * w + 1] = (words[w] >> 16) >= thr;
    }
  }
  if (i < n) {
    Philox16(seed, stream, block, words);
    for (int w = 0; w < 64 && i < n; ++w) {  // n - i < 128: at most 64 words
      mask[i++] = (words[w] & 0xFFFFu) >= thr;
      if (i < n) mask[i++] = (words[w] >> 16) >= thr;
    }
  }
}

// The same with the scalar ds::Philox, for tests.
inline void DrawKeepMaskReference(uint64_t seed, int site, int t, float rate, uint8_t* mask,
                                  size_t n) {
  Philox rng(seed, (uint64_t(site) << 32) | uint32_t(t));
  const uint32_t thr = uint32_t(std::lround(double(rate) * 65536.0));
  for (size_t i = 0; i < n; i += 2) {
    const uint32_t r = rng.NextU32();
    mask[i] = (r & 0xFFFFu) >= thr;
    if (i + 1 < n) mask[i + 1] = (r >> 16) >= thr;
  }
}

}  // namespace ds::cpu
