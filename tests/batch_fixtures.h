// Fixtures for the backend tests: random training batches and the finite-difference
// gradient check (one of each for every test file).
#pragma once

#include <cstdint>
#include <cmath>
#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "backend/backend.h"
#include "model/network.h"
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

// Central differences (eps 1e-2) of loss() -- which reads the weights w -- against the
// analytic grad, for every element of every tensor of `layout`: each element within
// 3e-4 + 2e-2 |fd|; per tensor, the error norm below 1e-2 of the fd norm (+ floor), and
// the fd norm not ~0 (else the check would be vacuous). w is restored.
inline void ExpectFiniteDifferences(const ParamLayout& layout, std::vector<float>& w,
                                    const std::vector<float>& grad,
                                    const std::function<double()>& loss, double floor = 0) {
  const float eps = 1e-2f;
  for (const auto& t : layout.tensors) {
    double num2 = 0, diff2 = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      const size_t k = t.offset + i;
      const float orig = w[k];
      w[k] = orig + eps;
      const double lp = loss();
      w[k] = orig - eps;
      const double lm = loss();
      w[k] = orig;
      const double fd = (lp - lm) / (2 * eps);
      EXPECT_NEAR(grad[k], fd, 3e-4 + 2e-2 * std::abs(fd)) << t.name << "[" << i << "]";
      num2 += fd * fd;
      diff2 += (fd - grad[k]) * (fd - grad[k]);
    }
    EXPECT_GT(num2, 1e-8) << t.name << ": gradient is ~0, the check would be vacuous";
    EXPECT_LT(std::sqrt(diff2), 1e-2 * std::sqrt(num2) + floor)
        << t.name << " |fd| " << std::sqrt(num2);
  }
}

}  // namespace ds::testing
