#include "generate/sampler.h"

#include <cmath>

namespace ds {

int SampleToken(const float* logits, int V, double temperature, Philox& rng, float* scratch) {
  int best = -1;
  float mx = -INFINITY;
  for (int i = 0; i < V; ++i) {
    if (logits[i] > mx) {
      mx = logits[i];
      best = i;
    }
  }
  if (best < 0) return -1;  // all masked (or NaN)
  if (temperature <= kGreedyTemperature) return best;
  const float inv_t = float(1.0 / temperature);
  double sum = 0;
  for (int i = 0; i < V; ++i) {
    float e = std::exp((logits[i] - mx) * inv_t);  // -inf -> 0
    scratch[i] = e;
    sum += e;
  }
  double target = rng.UniformDouble() * sum;
  double acc = 0;
  int last = best;
  for (int i = 0; i < V; ++i) {
    if (scratch[i] <= 0) continue;
    acc += scratch[i];
    last = i;
    if (target < acc) return i;
  }
  return last;  // rounding: the last token with probability > 0
}

}  // namespace ds
