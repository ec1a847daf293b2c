// Token sampling for generation.
//
//   p_i = softmax(logits / T)_i = e_i / sum_k e_k,  e_i = exp((l_i - max_j l_j) / T)
//   token = smallest i with  u * sum_k e_k < sum_{j <= i} e_j,   u ~ Uniform[0, 1)  (53 bits)
//
// e_i is cpu::FastExp (vmath.h, relative error < 2e-7, vectorized) in fp32;
// the sums run by blocks of 16 ids (each block's fp32 sum, the blocks and the
// walk inside the chosen block in double), so the draw costs a vector pass
// and one short scalar walk instead of V libm calls (session 9: records of a
// given seed differ from before where u fell within rounding of a boundary).
// T <= kGreedyTemperature picks the argmax (lowest id on ties). Logits equal
// to -inf (masked) get probability 0 and are never picked; when every logit
// is masked, SampleToken returns -1.
#pragma once

#include <cstdint>

#include "util/rng.h"

namespace ds {

inline constexpr double kGreedyTemperature = 1e-4;

// Samples one id from logits [V]. `scratch` [SampleScratchSize(V)] receives
// the unnormalised probabilities [V], then the sums of their blocks of 16
// (may alias nothing else).
int SampleToken(const float* logits, int V, double temperature, Philox& rng, float* scratch);
inline constexpr int kSampleBlock = 16;  // ids per partial sum (one AVX-512 vector)
inline constexpr int SampleScratchSize(int V) { return V + (V + kSampleBlock - 1) / kSampleBlock; }

// Hook for constrained decoding: restricts, per slot, which tokens may be
// sampled next. The generator calls, for each record in a slot:
//   Begin(slot) once when the record starts (after a reset state),
//   Accept(slot, token) for every token fed to the model for this record
//     (prefix tokens and sampled tokens, in order),
//   Mask(slot, logits) before every sampling step: set the logit of every
//     forbidden token to -INFINITY (a probability of zero).
// Implementations keep their own per-slot state. Not used yet by the CLI.
class TokenFilter {
 public:
  virtual ~TokenFilter() = default;
  virtual void Begin(int slot) = 0;
  virtual void Accept(int slot, int32_t token) = 0;
  virtual void Mask(int slot, float* logits /*[V]*/) = 0;
  // The sampling temperature the masked logits will be divided by (filters
  // that move probability between tokens need it to do so exactly).
  virtual void SetTemperature(double temperature) {}
  // Optional: [lo, hi) such that Mask(slot, .) sets every logit outside it to
  // -INFINITY (at the slot's current position); false = no such range known.
  // The sampler then asks the backend for those logits only
  // (InferBackend::StepRange) and samples within the range; the result is the
  // same token as sampling the whole masked row.
  virtual bool Range(int slot, int32_t* lo, int32_t* hi) { return false; }
};

}  // namespace ds
