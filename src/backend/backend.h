// Compute backends: where the network's forward, backward, optimizer and
// sampling steps run. The CPU backend (backend/cpu) is the oracle; the CUDA
// backend (backend/cuda) implements the same interface and is tested against it
// op by op. The trainer and the generator only ever talk to these interfaces.
//
// Buffers handed across this interface are HOST memory unless stated otherwise;
// a device backend copies what it needs (token ids in, logits/stats out) and
// keeps parameters, gradients, optimizer state and activations resident.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/device_allocator.h"
#include "backend/precision.h"
#include "model/network.h"
#include "util/status.h"

namespace ds {

// One training batch: B sequences of T steps.
struct Batch {
  int batch = 0;                // B
  int steps = 0;                // T
  std::vector<int32_t> inputs;  // [B, T] token ids
  std::vector<int32_t> targets; // [B, T] next-token ids
  std::vector<float> weights;   // [B, T] loss weight per position (1 = real, 0 = padding);
                                // empty means all ones
  // [B, T] each target's legal ids [lo, hi) (tokenize/legal_ranges.h): the
  // loss's softmax runs over them only (model/network.h). Both empty: the
  // whole vocabulary at every position (char, SentencePiece).
  std::vector<int32_t> legal_lo, legal_hi;
};

// Throws kInvalidArgument unless batch.legal_lo/hi are both empty, or both
// [B, T] with lo <= target < hi inside [0, vocab) at every position.
inline void ValidateLegalRanges(const Batch& batch, int vocab) {
  const size_t n = batch.legal_lo.size();
  if (n == 0 && batch.legal_hi.empty()) return;
  if (n != size_t(batch.batch) * batch.steps || batch.legal_hi.size() != n)
    DS_THROW(kInvalidArgument, "batch {}x{}: legal ranges have {}/{} entries", batch.batch,
             batch.steps, n, batch.legal_hi.size());
  for (size_t i = 0; i < n; ++i) {
    const int32_t lo = batch.legal_lo[i], hi = batch.legal_hi[i], t = batch.targets[i];
    if (lo < 0 || hi > vocab || t < lo || t >= hi)
      DS_THROW(kInvalidArgument, "position {}: target {} outside its legal ids [{}, {}) (vocab {})",
               i, t, lo, hi, vocab);
  }
}

// Sums over the batch (not means), so that epochs aggregate exactly.
struct StepStats {
  double loss_sum = 0;  // sum_t w_t * CE_t
  double correct = 0;   // sum_t w_t * [argmax == target]
  double count = 0;     // sum_t w_t
};

// One slice of the flat parameter buffer for ApplyOptimizer (mpirun's
// sharded optimizer, src/dist): only params [begin, end) and their optimizer
// state are updated, from the gradient given here (not the backend's), and
// the updated params of the slice are copied out. The optimizers are
// elementwise, so slices that cover [0, total) give the weights of one
// whole update bit for bit.
struct OptimizerRange {
  size_t begin = 0, end = 0;     // 0 <= begin <= end <= layout.total
  const float* grads = nullptr;  // host [end - begin]
  float* params_out = nullptr;   // host [end - begin]
};

struct OptimizerConfig {
  std::string name = "rmsprop";  // "rmsprop" (Keras semantics) or "adam"
  float learning_rate = 0.01f;
  float rho = 0.9f;       // RMSprop decay
  float beta1 = 0.9f;     // Adam
  float beta2 = 0.999f;   // Adam
  float epsilon = 1e-7f;  // Keras default
  const OptimizerRange* range = nullptr;  // nullptr: every parameter, the backend's gradient
};

// Per-example gradient clipping for DP-SGD (privacy/). When set on a training
// step, each sequence b of the batch is one example: its whole gradient g_b
// (over every parameter) is scaled by min(1, clip / ||g_b||) before summing.
// grads() then holds sum_b clip(g_b) (NOT divided by B), and norms receives
// ||g_b|| before clipping.
struct PerExampleClip {
  float l2_norm_clip = 1.0f;
  std::vector<float>* norms = nullptr;  // out: [B]
};

// Training-side backend: owns parameters, gradients, optimizer state and
// activation workspaces for one network.
class TrainBackend {
 public:
  virtual ~TrainBackend() = default;
  virtual std::string name() const = 0;  // "cpu", "cuda"
  virtual const NetworkSpec& spec() const = 0;
  virtual const ParamLayout& layout() const = 0;
  // The GEMM precision this backend runs (backend/precision.h).
  virtual Precision precision() const { return Precision::kFp32; }

  virtual void SetParams(const float* host /*[layout.total]*/) = 0;
  virtual void GetParams(float* host /*[layout.total]*/) const = 0;
  virtual void GetGrads(float* host /*[layout.total]*/) const = 0;
  virtual void SetGrads(const float* host /*[layout.total]*/) = 0;
  // mpirun's sharded optimizer (src/dist): every parameter but [begin, end)
  // from host; the caller guarantees host[begin, end) equals this backend's
  // own (its slice, just updated by ApplyOptimizer with an OptimizerRange), so
  // the default, one whole SetParams, is the same.
  virtual void SetParamsExcept(const float* host /*[layout.total]*/, size_t begin, size_t end) {
    (void)begin;
    (void)end;
    SetParams(host);
  }

  // Forward (and backward when `train`) over one batch. With train = true,
  // dropout is active (masks drawn from Philox(dropout_seed, ...)) and grads
  // receive d(loss_sum / count)/d(params), or the clipped per-example sum when
  // `clip` is set. With train = false, no dropout and grads are untouched.
  virtual StepStats Step(const Batch& batch, bool train, uint64_t dropout_seed,
                         const PerExampleClip* clip = nullptr) = 0;
  // A training step (train = true, no clip) whose gradient goes into
  // `grads` ([layout.total]), as Step then GetGrads(grads) give it; a backend
  // that can writes it there directly (the CPU backend: no copy) and then
  // leaves its own gradient buffer as it was (GetGrads does not see it).
  virtual StepStats StepInto(const Batch& batch, uint64_t dropout_seed, float* grads) {
    StepStats s = Step(batch, /*train=*/true, dropout_seed);
    GetGrads(grads);
    return s;
  }

  // params -= update(grads) for the configured optimizer; `step` counts from 1.
  // With opt.range: that slice only (OptimizerRange).
  virtual void ApplyOptimizer(const OptimizerConfig& opt, int64_t step) = 0;
  // Optimizer state (for checkpoints / resume), host copy, any length.
  virtual std::vector<float> GetOptimizerState() const = 0;
  virtual Status SetOptimizerState(const std::vector<float>& state) = 0;

  // Device memory of this process's allocator (current and peak, allocated
  // and reserved, the limit); nullopt for host backends.
  virtual std::optional<AllocatorStats> memory_stats() const { return std::nullopt; }
};

// Inference-side: `slots` independent sequences advanced one token at a time,
// each with its own recurrent state. Parameters are read-only and may live in
// a memory-mapped model file shared by worker processes.
class InferBackend {
 public:
  virtual ~InferBackend() = default;
  virtual const NetworkSpec& spec() const = 0;
  virtual int slots() const = 0;
  virtual Precision precision() const { return Precision::kFp32; }
  // Zeroes the recurrent state (every layer's h, and c for the LSTM) of one slot.
  virtual void ResetSlot(int slot) = 0;
  // Advances the `n` slots listed in `slot_ids` by one token each and writes
  // their logits: tokens [n], logits [n, V] (host). Slots not listed keep
  // their state.
  virtual void Step(const int* slot_ids, const int32_t* tokens, int n, float* logits) = 0;
  // As Step, but the caller reads row i's logits only at ids [lo[i], hi[i])
  // (0 <= lo <= hi <= V; lo == hi: none, e.g. a forced prefix token or an
  // idle row), so a backend may compute just those; the rest of the row is
  // unspecified. A row's values do not depend on the other rows' ranges.
  virtual void StepRange(const int* slot_ids, const int32_t* tokens, int n, const int32_t* lo,
                         const int32_t* hi, float* logits) {
    (void)lo;
    (void)hi;
    Step(slot_ids, tokens, n, logits);
  }
  // As TrainBackend::memory_stats.
  virtual std::optional<AllocatorStats> memory_stats() const { return std::nullopt; }
};

enum class DeviceKind { kCpu, kCuda };

// The CPU backend's factories (every architecture). Callers outside backend/
// construct through backend/registry.h instead.
// `precision` kBf16 needs a CPU with bf16 (ResolveCpuPrecision decides).
Result<std::unique_ptr<TrainBackend>> MakeCpuTrainBackend(const NetworkSpec& spec, int max_batch,
                                                          int max_steps,
                                                          Precision precision = Precision::kFp32);
// `params` must outlive the backend ([layout.total] floats, 64-byte aligned).
Result<std::unique_ptr<InferBackend>> MakeCpuInferBackend(const NetworkSpec& spec,
                                                          const float* params, int slots,
                                                          Precision precision = Precision::kFp32);

}  // namespace ds
