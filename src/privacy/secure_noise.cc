#include "privacy/secure_noise.h"

#include <errno.h>
#include <string.h>  // explicit_bzero
#include <sys/random.h>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "util/status.h"

namespace ds {
namespace {

constexpr uint32_t kSigma[4] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u};

inline uint32_t Rotl(uint32_t v, int c) { return (v << c) | (v >> (32 - c)); }

// ---- scalar block (RFC 8439 2.3) ----
inline void QuarterRound(uint32_t* x, int a, int b, int c, int d) {
  x[a] += x[b];
  x[d] ^= x[a];
  x[d] = Rotl(x[d], 16);
  x[c] += x[d];
  x[b] ^= x[c];
  x[b] = Rotl(x[b], 12);
  x[a] += x[b];
  x[d] ^= x[a];
  x[d] = Rotl(x[d], 8);
  x[c] += x[d];
  x[b] ^= x[c];
  x[b] = Rotl(x[b], 7);
}

// ---- 8 blocks side by side, one block per vector lane (GCC/Clang vector
// extensions: AVX2/AVX-512 registers where available, plain code elsewhere) ----
constexpr int kLanes = 8;
typedef uint32_t U32x8 __attribute__((vector_size(32)));

[[gnu::always_inline]] inline U32x8 Rotl8(U32x8 v, int c) { return (v << c) | (v >> (32 - c)); }

[[gnu::always_inline]] inline void QuarterRound8(U32x8 (&x)[16], int a, int b, int c, int d) {
  x[a] += x[b];
  x[d] = Rotl8(x[d] ^ x[a], 16);
  x[c] += x[d];
  x[b] = Rotl8(x[b] ^ x[c], 12);
  x[a] += x[b];
  x[d] = Rotl8(x[d] ^ x[a], 8);
  x[c] += x[d];
  x[b] = Rotl8(x[b] ^ x[c], 7);
}

// x[w][l] = word w of the block with counter `counter + l`.
[[gnu::always_inline]] inline void Block8(const uint32_t key[8], uint64_t counter, uint64_t nonce,
                                          U32x8 (&x)[16]) {
  U32x8 s[16];
  for (int w = 0; w < 4; ++w) s[w] = U32x8{} + kSigma[w];
  for (int w = 0; w < 8; ++w) s[4 + w] = U32x8{} + key[w];
  for (int l = 0; l < kLanes; ++l) {
    const uint64_t c = counter + uint64_t(l);
    s[12][l] = uint32_t(c);
    s[13][l] = uint32_t(c >> 32);
  }
  s[14] = U32x8{} + uint32_t(nonce);
  s[15] = U32x8{} + uint32_t(nonce >> 32);
  for (int w = 0; w < 16; ++w) x[w] = s[w];
  for (int r = 0; r < 10; ++r) {
    QuarterRound8(x, 0, 4, 8, 12);
    QuarterRound8(x, 1, 5, 9, 13);
    QuarterRound8(x, 2, 6, 10, 14);
    QuarterRound8(x, 3, 7, 11, 15);
    QuarterRound8(x, 0, 5, 10, 15);
    QuarterRound8(x, 1, 6, 11, 12);
    QuarterRound8(x, 2, 7, 8, 13);
    QuarterRound8(x, 3, 4, 9, 14);
  }
  for (int w = 0; w < 16; ++w) x[w] += s[w];
}

// ---- branch-free math kernels (vectorizable) ----

// Top 53 bits of v as a double in [0, 1): (2 * top52 + bit11) * 2^-53, exact.
inline double Unit53(uint64_t v) {
  const double hi = std::bit_cast<double>(0x3FF0000000000000ull | (v >> 12)) - 1.0;
  const double lo = std::bit_cast<double>((0ull - ((v >> 11) & 1)) & 0x3CA0000000000000ull);
  return hi + lo;  // lo is 2^-53 or 0
}

// Natural log for x in [2^-1022, inf) (normal, finite, > 0). x = m 2^e with
// m in [sqrt(1/2), sqrt(2)); log m = 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.1716,
// summed to s^23 (next term < 1e-18 relative).
inline double LogKernel(double x) {
  const uint64_t ix = std::bit_cast<uint64_t>(x);
  const int64_t e = int64_t(ix - 0x3FE6A09E667F3BCDull) >> 52;  // bits of sqrt(1/2)
  const double m = std::bit_cast<double>(ix - (uint64_t(e) << 52));
  const double f = m - 1.0;  // exact (Sterbenz)
  const double s = f / (2.0 + f);
  const double s2 = s * s;
  double p = 1.0 / 23;
  p = p * s2 + 1.0 / 21;
  p = p * s2 + 1.0 / 19;
  p = p * s2 + 1.0 / 17;
  p = p * s2 + 1.0 / 15;
  p = p * s2 + 1.0 / 13;
  p = p * s2 + 1.0 / 11;
  p = p * s2 + 1.0 / 9;
  p = p * s2 + 1.0 / 7;
  p = p * s2 + 1.0 / 5;
  p = p * s2 + 1.0 / 3;
  p = p * s2;
  return double(e) * 0.69314718055994530942 + (2.0 * s + 2.0 * s * p);
}

constexpr double InvFact(int n) {
  double f = 1;
  for (int i = 2; i <= n; ++i) f *= i;
  return 1.0 / f;
}

// sin and cos of 2 pi u for u in [0, 1). 4u is exact; q = round(4u) picks the
// quadrant, th = (4u - q) pi/2 in [-pi/4, pi/4]; Taylor to th^17 / th^18
// (remainder < 1e-17), then rotate by q quarter turns.
inline void SinCos2Pi(double u, double* sin_out, double* cos_out) {
  const double t = 4.0 * u;
  const int64_t qn = int64_t(t + 0.5);  // round(4u): 0..4 (truncation = floor here)
  const double q = double(qn);
  const double th = (t - q) * 1.57079632679489661923;
  const double t2 = th * th;
  double sp = InvFact(17);
  sp = sp * t2 - InvFact(15);
  sp = sp * t2 + InvFact(13);
  sp = sp * t2 - InvFact(11);
  sp = sp * t2 + InvFact(9);
  sp = sp * t2 - InvFact(7);
  sp = sp * t2 + InvFact(5);
  sp = sp * t2 - InvFact(3);
  const double sn = th + th * (sp * t2);
  double cp = -InvFact(18);
  cp = cp * t2 + InvFact(16);
  cp = cp * t2 - InvFact(14);
  cp = cp * t2 + InvFact(12);
  cp = cp * t2 - InvFact(10);
  cp = cp * t2 + InvFact(8);
  cp = cp * t2 - InvFact(6);
  cp = cp * t2 + InvFact(4);
  cp = cp * t2 - InvFact(2);
  const double cn = 1.0 + cp * t2;
  // Rotate by qn quarter turns: (c, s) -> (-s, c) per turn. Integer selects
  // keep the loop vectorizable (std::floor and bool temporaries do not).
  const int64_t qi = qn & 3;
  const double c0 = (qi & 1) ? sn : cn;
  const double s0 = (qi & 1) ? cn : sn;
  *cos_out = ((qi + 1) & 2) ? -c0 : c0;  // quadrants 1, 2
  *sin_out = (qi & 2) ? -s0 : s0;        // quadrants 2, 3
}

// out[i] = sqrt(in[i]) for in[i] >= 0, n a multiple of 8. std::sqrt does not
// vectorize without -fno-math-errno (it may set errno), so use the packed
// instruction where the target has one.
inline void SqrtArray(const double* in, double* out, int n) {
// (256-bit: GCC 12's _mm512_sqrt_pd trips -Werror=uninitialized.)
#if defined(__AVX__)
  for (int i = 0; i < n; i += 4) _mm256_store_pd(out + i, _mm256_sqrt_pd(_mm256_load_pd(in + i)));
#elif defined(__SSE2__)
  for (int i = 0; i < n; i += 2) _mm_store_pd(out + i, _mm_sqrt_pd(_mm_load_pd(in + i)));
#else
  for (int i = 0; i < n; ++i) out[i] = std::sqrt(in[i]);
#endif
}

// 64 standard normals from the 8 blocks at counter..counter+7 (layout: header).
void NormalGroup(const uint32_t key[8], uint64_t nonce, uint64_t counter, double* z /*[64]*/) {
  U32x8 x[16];
  Block8(key, counter, nonce, x);
  alignas(64) uint64_t v[64];  // [8 word pairs][8 blocks]
  for (int k = 0; k < 8; ++k)
    for (int l = 0; l < kLanes; ++l)
      v[k * 8 + l] = uint64_t(x[2 * k][l]) | (uint64_t(x[2 * k + 1][l]) << 32);
  alignas(64) double u1[32], u2[32];
  for (int i = 0; i < 32; ++i) {
    u1[i] = 1.0 - Unit53(v[i]);  // (0, 1]
    u2[i] = Unit53(v[32 + i]);   // [0, 1)
  }
  alignas(64) double w[32], r[32];  // w = -2 ln u1, r = sqrt(w)
  for (int i = 0; i < 32; ++i) w[i] = -2.0 * LogKernel(u1[i]);
  SqrtArray(w, r, 32);
  for (int i = 0; i < 32; ++i) {
    double s, c;
    SinCos2Pi(u2[i], &s, &c);
    z[i] = r[i] * c;
    z[32 + i] = r[i] * s;
  }
}

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline uint32_t LoadLe32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

}  // namespace

void ChaCha20Block(const uint32_t key[8], const uint32_t words12_15[4], uint32_t out[16]) {
  uint32_t s[16];
  for (int w = 0; w < 4; ++w) s[w] = kSigma[w];
  for (int w = 0; w < 8; ++w) s[4 + w] = key[w];
  for (int w = 0; w < 4; ++w) s[12 + w] = words12_15[w];
  uint32_t x[16];
  std::memcpy(x, s, sizeof(x));
  for (int r = 0; r < 10; ++r) {
    QuarterRound(x, 0, 4, 8, 12);
    QuarterRound(x, 1, 5, 9, 13);
    QuarterRound(x, 2, 6, 10, 14);
    QuarterRound(x, 3, 7, 11, 15);
    QuarterRound(x, 0, 5, 10, 15);
    QuarterRound(x, 1, 6, 11, 12);
    QuarterRound(x, 2, 7, 8, 13);
    QuarterRound(x, 3, 4, 9, 14);
  }
  for (int w = 0; w < 16; ++w) out[w] = x[w] + s[w];
}

void ChaCha20Xor(const uint8_t key[32], uint32_t counter, const uint8_t nonce[12],
                 const uint8_t* in, uint8_t* out, size_t n) {
  uint32_t k[8];
  for (int w = 0; w < 8; ++w) k[w] = LoadLe32(key + 4 * w);
  uint32_t words[4] = {counter, LoadLe32(nonce), LoadLe32(nonce + 4), LoadLe32(nonce + 8)};
  uint32_t block[16];
  for (size_t off = 0; off < n; off += 64) {
    ChaCha20Block(k, words, block);
    ++words[0];
    const size_t len = std::min<size_t>(64, n - off);
    for (size_t i = 0; i < len; ++i) {
      out[off + i] = in[off + i] ^ uint8_t(block[i / 4] >> (8 * (i % 4)));
    }
  }
}

void ChaCha20Block8(const uint32_t key[8], uint64_t counter, uint64_t nonce, uint32_t out[16][8]) {
  U32x8 x[16];
  Block8(key, counter, nonce, x);
  for (int w = 0; w < 16; ++w)
    for (int l = 0; l < kLanes; ++l) out[w][l] = x[w][l];
}

SecureGaussian::SecureGaussian(const uint32_t key[8], uint64_t nonce) : nonce_(nonce) {
  std::memcpy(key_, key, sizeof(key_));
}

SecureGaussian SecureGaussian::FromOsEntropy() {
  uint8_t buf[40];  // 32-byte key + 8-byte nonce
  size_t got = 0;
  while (got < sizeof(buf)) {
    const ssize_t r = getrandom(buf + got, sizeof(buf) - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      DS_THROW(kUnavailable, "getrandom(2) failed: {}", strerror(errno));
    }
    got += size_t(r);
  }
  uint32_t key[8];
  for (int w = 0; w < 8; ++w) key[w] = LoadLe32(buf + 4 * w);
  const uint64_t nonce = uint64_t(LoadLe32(buf + 32)) | uint64_t(LoadLe32(buf + 36)) << 32;
  SecureGaussian g(key, nonce);
  explicit_bzero(buf, sizeof(buf));
  explicit_bzero(key, sizeof(key));
  return g;
}

SecureGaussian SecureGaussian::Deterministic(uint64_t seed) {
  uint64_t state = seed;
  uint32_t key[8];
  for (int w = 0; w < 8; w += 2) {
    const uint64_t r = SplitMix64(state);
    key[w] = uint32_t(r);
    key[w + 1] = uint32_t(r >> 32);
  }
  return SecureGaussian(key, 0x594C4E4F54534554ull /* "TESTONLY" */);
}

SecureGaussian::SecureGaussian(SecureGaussian&& o) noexcept
    : nonce_(o.nonce_), counter_(o.counter_) {
  std::memcpy(key_, o.key_, sizeof(key_));
  // The moved-from object gets a fresh zero key and a counter at the end of the
  // space; using it is a bug, but at least it cannot replay our stream.
  explicit_bzero(o.key_, sizeof(o.key_));
  o.counter_ = ~uint64_t(0) << 8;
}

SecureGaussian& SecureGaussian::operator=(SecureGaussian&& o) noexcept {
  if (this != &o) {
    std::memcpy(key_, o.key_, sizeof(key_));
    nonce_ = o.nonce_;
    counter_ = o.counter_;
    explicit_bzero(o.key_, sizeof(o.key_));
    o.counter_ = ~uint64_t(0) << 8;
  }
  return *this;
}

SecureGaussian::~SecureGaussian() { explicit_bzero(key_, sizeof(key_)); }

template <typename Sink>
void SecureGaussian::Generate(size_t n, Sink&& sink) {
  if (n == 0) return;
  const size_t groups = (n + kGroup - 1) / kGroup;
  const uint64_t base = counter_;
  DS_CHECK(base <= ~uint64_t(0) - 8 * uint64_t(groups));  // 2^64 blocks: never in practice
  counter_ += 8 * uint64_t(groups);
  auto one = [&](size_t g) {
    alignas(64) double z[kGroup];
    NormalGroup(key_, nonce_, base + 8 * uint64_t(g), z);
    const size_t off = g * kGroup;
    sink(z, off, std::min(kGroup, n - off));
  };
  if (n >= kParallelMin) {
#pragma omp parallel for schedule(static)
    for (int64_t g = 0; g < int64_t(groups); ++g) one(size_t(g));
  } else {
    for (size_t g = 0; g < groups; ++g) one(g);
  }
}

void SecureGaussian::Fill(float* out, size_t n, double stddev) {
  Generate(n, [&](const double* z, size_t off, size_t cnt) {
    float* o = out + off;
    for (size_t i = 0; i < cnt; ++i) o[i] = float(z[i] * stddev);
  });
}

void SecureGaussian::Add(float* inout, size_t n, double stddev) {
  Generate(n, [&](const double* z, size_t off, size_t cnt) {
    float* o = inout + off;
    for (size_t i = 0; i < cnt; ++i) o[i] = float(double(o[i]) + z[i] * stddev);
  });
}

double SecureGaussian::Uniform() {
  DS_CHECK(counter_ <= ~uint64_t(0) - 8);
  alignas(64) uint32_t x[16][8];
  ChaCha20Block8(key_, counter_, nonce_, x);
  counter_ += 8;
  const uint64_t v = uint64_t(x[0][0]) | uint64_t(x[1][0]) << 32;
  const double u = double(v >> 11) * 0x1.0p-53;
  std::fill(&x[0][0], &x[0][0] + 16 * 8, 0u);
  return u;
}

void SecureGaussian::FillDouble(double* out, size_t n, double stddev) {
  Generate(n, [&](const double* z, size_t off, size_t cnt) {
    double* o = out + off;
    for (size_t i = 0; i < cnt; ++i) o[i] = z[i] * stddev;
  });
}

}  // namespace ds
