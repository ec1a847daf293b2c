// Gaussian noise for DP-SGD from a cryptographically secure generator.
//
// Generator: ChaCha20 (RFC 8439 block function, 20 rounds) used as a counter-mode
// stream: state = constants | 256-bit key | 64-bit block counter | 64-bit nonce
// (words 12-13 = counter, 14-15 = nonce, the original Bernstein layout, so the
// counter never wraps). The key and nonce come from getrandom(2) (the kernel
// CSPRNG); the counter starts at 0 and only moves forward, so no block is ever
// reused by one generator. The generator is move-only (a copy would replay the
// same noise) and wipes its key on destruction.
//
// Gaussian: Box-Muller on 53-bit uniforms, in double precision:
//   64 keystream bits -> u1 = 1 - k / 2^53 in (0, 1]  (k = top 53 bits),
//                        u2 = k' / 2^53 in [0, 1)
//   r = sqrt(-2 ln u1), z0 = r cos(2 pi u2), z1 = r sin(2 pi u2).
// ln, sin and cos are our own branch-free polynomial kernels (they agree with
// libm to < 1e-13 absolute on the samples, checked in the test) so that the
// whole pipeline vectorizes; the angle is reduced exactly (4 u2 is exact, the
// quadrant is taken from its integer part). The largest |z| is
// sqrt(2 ln 2^53) = 8.57.
//
// Sample layout (fixes the determinism contract): "group" g of 64 samples uses
// the 8 ChaCha20 blocks with counters C+8g .. C+8g+7, where C is the generator's
// counter at the call. Viewing the 8 blocks as words x[w][b] (w = word 0..15,
// b = block 0..7), 64-bit value v[k*8+b] = x[2k][b] | x[2k+1][b] << 32;
// pair i (0..31) takes u1 from v[i] and u2 from v[32+i]; sample i = z0 and
// sample 32+i = z1. A call of n samples consumes ceil(n/64) groups (the unused
// tail of the last group is discarded), so the output is a function of
// (key, nonce, counter, n) only, whatever the number of OpenMP threads.
//
// Threads: one SecureGaussian must not be used from two threads at once (the
// counter is plain state); a large call parallelizes internally with OpenMP
// (n >= kParallelMin). Use one generator per thread or a lock.
//
// Floating point caveat (documented, not solved): like every DP-SGD library
// (TF Privacy, Opacus) this samples a continuous Gaussian in floating point and
// rounds it to float; the finite-precision "holes" that Mironov (2012) exploits
// for Laplace are not accounted for. The noise is added to a float sum of many
// clipped gradients, which makes such attacks far less direct, but the
// guarantee is the standard, idealized one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds {

// RFC 8439 section 2.3 block function. State = "expand 32-byte k" | key[8] |
// words12_15[4]; out = the 16 keystream words (serialize little-endian for bytes).
// RFC layout: words12_15 = {block counter, nonce word 0, nonce word 1, nonce word 2}.
void ChaCha20Block(const uint32_t key[8], const uint32_t words12_15[4], uint32_t out[16]);

// RFC 8439 section 2.4 encryption: out[i] = in[i] ^ keystream byte i, the keystream
// starting at block `counter` with the 96-bit nonce. in and out may alias.
void ChaCha20Xor(const uint8_t key[32], uint32_t counter, const uint8_t nonce[12],
                 const uint8_t* in, uint8_t* out, size_t n);

// The vectorized kernel: 8 blocks with 64-bit counters counter..counter+7 and a
// 64-bit nonce (words 12..15 = lo(ctr), hi(ctr), lo(nonce), hi(nonce)),
// out[w][b] = word w of block b.
void ChaCha20Block8(const uint32_t key[8], uint64_t counter, uint64_t nonce, uint32_t out[16][8]);

class SecureGaussian {
 public:
  static constexpr size_t kGroup = 64;  // samples per 8 ChaCha20 blocks

  // Key and nonce from getrandom(2). Throws ds::Error(kUnavailable) if the
  // kernel cannot supply entropy (no getrandom, or it fails).
  static SecureGaussian FromOsEntropy();
  // TESTS AND BENCHMARKS ONLY: the key is a public function of `seed`, so the
  // noise is predictable and gives NO privacy. Never use it for DP training.
  static SecureGaussian Deterministic(uint64_t seed);

  SecureGaussian(SecureGaussian&& other) noexcept;
  SecureGaussian& operator=(SecureGaussian&& other) noexcept;
  SecureGaussian(const SecureGaussian&) = delete;
  SecureGaussian& operator=(const SecureGaussian&) = delete;
  ~SecureGaussian();

  // out[i] = stddev * z_i, z_i iid N(0, 1), i < n.  out: [n]
  void Fill(float* out, size_t n, double stddev);
  // inout[i] += stddev * z_i (rounded once to float).  inout: [n]
  void Add(float* inout, size_t n, double stddev);
  // Double-precision samples (tests, small uses).  out: [n]
  void FillDouble(double* out, size_t n, double stddev);
  // One uniform in [0, 1) from the same stream: the top 53 bits of word pair 0
  // of the next 8 blocks (the rest of them discarded) / 2^53. For the
  // exponential mechanism (privacy/exponential_mechanism.h).
  double Uniform();

  // Calls with at least this many samples split the groups over OpenMP threads.
  static constexpr size_t kParallelMin = size_t(1) << 16;

  uint64_t counter() const { return counter_; }  // next block counter

 private:
  SecureGaussian(const uint32_t key[8], uint64_t nonce);
  template <typename Sink>
  void Generate(size_t n, Sink&& sink);

  uint32_t key_[8];       // ChaCha20 key words
  uint64_t nonce_ = 0;    // words 14-15
  uint64_t counter_ = 0;  // words 12-13 of the next block
};

}  // namespace ds
