// Random training batches for the backend tests (one generator for every test file).
#pragma once

#include <cstdint>
#include <functional>

#include "backend/backend.h"
#include "util/rng.h"

namespace ds::testing {

// B x T tokens and targets below V drawn from Philox(seed, stream), row-major as Batch
// stores them. With `weight`, position i's weight is weight(i, rng), drawn right after
// its token and target (so a test's draws stay in one stream).
inline Batch RandomBatch(int B, int T, int V, uint64_t seed, uint64_t stream,
                         const std::function<float(int, Philox&)>& weight = {}) {
  Philox rng(seed, stream);
  Batch b;
  b.batch = B;
  b.steps = T;
  for (int i = 0; i < B * T; ++i) {
    b.inputs.push_back(int32_t(rng.Below(V)));
    b.targets.push_back(int32_t(rng.Below(V)));
    if (weight) b.weights.push_back(weight(i, rng));
  }
  return b;
}

}  // namespace ds::testing
