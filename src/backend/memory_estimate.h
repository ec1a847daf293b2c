// Host memory: what the CPU backends will allocate for a network shape, what
// this process may still use, and a check that turns an allocation that
// cannot fit into a clear error BEFORE anything is allocated (instead of a
// std::bad_alloc deep inside a backend, or, with Linux overcommit, the OOM
// killer part-way through the first epoch).
//
// Estimates (bytes; 4-byte floats; the buffers listed in
// backend/cpu/train_cpu.cc and infer_cpu.cc, plus the trainer's host copies):
//   train  4 P                      params, grads, two optimizer slots
//          + 5 P                    trainer: weights, best weights, optimizer
//                                   snapshot (2 P) and a checkpoint buffer
//   P = the sizes of ParamLayout's tensors; G = 4 gates (lstm) or 3 (gru)
//          + sum_l 2 (In_l + H) G H  permuted / transposed recurrent weights
//          + V H                    transposed dense weights
//          + R (E + L (11 H + [dropout] H) + 2 max(E, H))   activations,
//                                   R = max_batch x max_steps rows
//          + [dropout] R (E + L H)  keep masks (bytes)
//          + threads (c V + H V + V + 4 T^2 + G H)   per-thread dense / Gram
//                                   scratch, c = clamp(2^20 / V, 64, 2048)
//   infer  slots (L (S H + In + H) + Z G H + 2 H + 2 V)   per process (states,
//          S = 2 (h, c) and Z = 1 for the lstm, S = 1 and Z = 2 (x Wx, h Wh) for the gru;
//          gates, logits and probabilities; the weights are a shared mapping)
// Both are lower bounds of the peak (allocator overhead, the data set and
// the libraries come on top); they are meant to catch shapes that are off by
// orders of magnitude, not to budget tightly.
//
// Available memory, per machine: the smaller of MemAvailable (/proc/meminfo)
// and the cgroup v2 limit minus its usage (memory.max - memory.current of
// this process's cgroup); per process: RLIMIT_AS / RLIMIT_DATA minus the
// current VmSize / VmData.
#pragma once

#include <cstdint>
#include <string>

#include "model/network.h"
#include "util/status.h"

namespace ds {

struct HostMemory {
  uint64_t available = UINT64_MAX;    // bytes all processes together may still allocate
  std::string limited_by;             // "MemAvailable", "the cgroup's memory.max"
  uint64_t per_process = UINT64_MAX;  // bytes one process may still allocate (ulimit)
  std::string process_limited_by;     // "ulimit -v (RLIMIT_AS)", ...
};
HostMemory AvailableHostMemory();

// What cpu/buffer.h's Buffer takes from the allocator for `bytes`: buffers of 2 MiB or
// more are rounded up to 2 MiB and 2 MiB aligned (huge pages), which may cost up to
// 2 MiB more (aligned_alloc's slack); smaller ones are taken as they are.
double CpuBufferBytes(double bytes);

// Bytes (see the file comment). Saturate at UINT64_MAX instead of overflowing.
uint64_t EstimateCpuTrainBytes(const NetworkSpec& spec, int64_t max_batch, int64_t max_steps,
                               int threads);
uint64_t EstimateCpuInferBytes(const NetworkSpec& spec, int64_t slots);

// kResourceExhausted when `need` (all processes together) exceeds
// `memory.available`, or `per_process` (the largest process) exceeds
// `memory.per_process` (sizes printed by FormatBytes,
// backend/device_allocator.h):
//   "<what> needs about 137.40 GiB of memory, more than the 20.10 GiB
//    available (MemAvailable); <hint>"
Status CheckMemory(uint64_t need, uint64_t per_process, const HostMemory& memory,
                   const std::string& what, const std::string& hint);

}  // namespace ds
