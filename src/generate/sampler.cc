#include "generate/sampler.h"

#include <cmath>

#include "backend/cpu/vmath.h"

namespace ds {
namespace {

constexpr int kBlock = kSampleBlock;

// e_i = exp((l_i - mx) / T) into scratch (0 for a masked -inf logit).
// In 16 lanes (-march=native keeps GCC at 256-bit vectors otherwise): the exp is
// most of a draw over a text column's chars and pieces. Lane by lane the same value.
void Weights(const float* logits, int V, float mx, float inv_t, float* scratch) {
#pragma omp simd simdlen(16)
  for (int i = 0; i < V; ++i) {
    const float e = cpu::FastExp((logits[i] - mx) * inv_t);
    scratch[i] = logits[i] == -INFINITY ? 0.0f : e;
  }
}

// The fp32 sum of block b of the weights (kBlock ids; the last block partial).
float BlockSum(const float* scratch, int V, int b) {
  const int n = V - b * kBlock < kBlock ? V - b * kBlock : kBlock;
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; ++i) s += scratch[b * kBlock + i];
  return s;
}

}  // namespace

// The draw by blocks: the first block whose running sum passes u * total,
// then the first id inside it whose running sum does. With rounding, the
// walk inside the block may end short of the target: the block's last id of
// nonzero weight is taken then (and the last one overall past the end).
int SampleToken(const float* logits, int V, double temperature, Philox& rng, float* scratch) {
  const float mx = cpu::MaxOf(logits, V);  // -inf when all are masked
  if (!(mx > -INFINITY)) return -1;  // all masked (or NaN)
  auto argmax = [&] {  // the lowest id of the largest logit
    int i = 0;
    while (!(logits[i] == mx)) ++i;
    return i;
  };
  if (temperature <= kGreedyTemperature) return argmax();
  const float inv_t = float(1.0 / temperature);
  const int nb = (V + kBlock - 1) / kBlock;
  Weights(logits, V, mx, inv_t, scratch);
  float* sums = scratch + V;  // [nb]
  double total = 0;
  for (int b = 0; b < nb; ++b) total += (sums[b] = BlockSum(scratch, V, b));
  const double target = rng.UniformDouble() * total;
  double acc = 0;
  int b = 0;
  while (b + 1 < nb && !(target < acc + sums[b])) acc += sums[b++];
  int last = -1;
  for (int i = b * kBlock; i < V && i < (b + 1) * kBlock; ++i) {
    if (scratch[i] <= 0) continue;
    acc += scratch[i];
    last = i;
    if (target < acc) return i;
  }
  if (last >= 0) return last;
  for (int i = V - 1; i >= 0; --i)  // rounding left an empty block: the last id of weight > 0
    if (scratch[i] > 0) return i;
  return argmax();  // no weight > 0: a logit of +inf (inf - inf is NaN)
}

}  // namespace ds
