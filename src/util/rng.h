// Counter-based random numbers (Philox-4x32-10) for reproducible, splittable
// streams: the same (seed, stream) gives the same sequence on every thread,
// process and device. Training derives one stream per purpose (init, shuffle,
// dropout) and generation one stream per record index, so that output does not
// depend on the number of workers or batch slot assignment.
#pragma once

#include <cmath>
#include <cstdint>

namespace ds {

// splitmix64's finaliser: a fixed 64-bit mix (hashes of records and fields).
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class Philox {
 public:
  Philox(uint64_t seed, uint64_t stream) : key_{uint32_t(seed), uint32_t(seed >> 32)} {
    ctr_[0] = 0;
    ctr_[1] = 0;
    ctr_[2] = uint32_t(stream);
    ctr_[3] = uint32_t(stream >> 32);
  }
  // Next 32 random bits.
  uint32_t NextU32() {
    if (idx_ == 4) Refill();
    return buf_[idx_++];
  }
  uint64_t NextU64() { return (uint64_t(NextU32()) << 32) | NextU32(); }
  // Uniform in [0, 1) with 24 bits of precision.
  float Uniform() { return float(NextU32() >> 8) * (1.0f / 16777216.0f); }
  // Uniform in [0, 1) with 53 bits.
  double UniformDouble() { return double(NextU64() >> 11) * (1.0 / 9007199254740992.0); }
  // Unbiased integer in [0, n).
  uint64_t Below(uint64_t n) {
    if (n <= 1) return 0;
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = NextU64(); while (x >= limit);
    return x % n;
  }
  // Standard normal (Box-Muller).
  double Normal() {
    double u1 = UniformDouble(), u2 = UniformDouble();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  void Refill() {
    uint32_t c0 = ctr_[0], c1 = ctr_[1], c2 = ctr_[2], c3 = ctr_[3];
    uint32_t k0 = key_[0], k1 = key_[1];
    for (int r = 0; r < 10; ++r) {
      uint64_t p0 = uint64_t(0xD2511F53u) * c0;
      uint64_t p1 = uint64_t(0xCD9E8D57u) * c2;
      uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0;
      uint32_t n1 = uint32_t(p1);
      uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
      uint32_t n3 = uint32_t(p0);
      c0 = n0; c1 = n1; c2 = n2; c3 = n3;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    buf_[0] = c0; buf_[1] = c1; buf_[2] = c2; buf_[3] = c3;
    idx_ = 0;
    if (++ctr_[0] == 0) ++ctr_[1];
  }
  uint32_t key_[2];
  uint32_t ctr_[4];
  uint32_t buf_[4] = {0, 0, 0, 0};
  int idx_ = 4;
};

}  // namespace ds
