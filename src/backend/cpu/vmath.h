// Vectorizable elementwise math for the CPU backend.
//
// libm's expf per element is far too slow inside the LSTM cell, so these are
// branch-free polynomial forms that GCC vectorizes (AVX-512 with -march=native)
// inside `#pragma omp simd` loops:
//
//   exp(x)     = 2^n * P(r),  n = rint(x / ln 2), r = x - n ln 2 (Cody-Waite split),
//                P = Cephes expf minimax polynomial (|rel err| < 2e-7), x clamped
//                to [-87.3, 88.3] so 2^n stays a normal float;
//   sigmoid(x) = 1 / (1 + exp(-x));
//   tanh(x)    = 2 / (1 + exp(-2x)) - 1   (absolute error ~1e-7 near 0).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ds::cpu {

inline float FastExp(float x) {
  // Ternaries, not std::fmin/fmax: those are libm calls unless -ffinite-math-only.
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.3f ? 88.3f : x;
  // Round to nearest by the 1.5 * 2^23 trick (std::floor does not vectorize
  // under the default -ftrapping-math).
  float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t e = (int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &e, sizeof scale);
  return p * scale;
}

inline float FastSigmoid(float x) { return 1.0f / (1.0f + FastExp(-x)); }

inline float FastTanh(float x) { return 2.0f / (1.0f + FastExp(-2.0f * x)) - 1.0f; }

}  // namespace ds::cpu
