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

// mask[0..n) = keep flags (1 keep, 0 drop) for dropout site `site`, step t.
inline void DrawKeepMask(uint64_t seed, int site, int t, float rate, uint8_t* mask, size_t n) {
  const uint64_t stream = (uint64_t(site) << 32) | uint32_t(t);
  const uint32_t thr = uint32_t(std::lround(double(rate) * 65536.0));
  uint32_t words[64];
  size_t i = 0;
  uint32_t block = 0;
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
