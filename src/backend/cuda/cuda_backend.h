// The CUDA backend: TrainBackend and InferBackend on one NVIDIA GPU. Only
// compiled (and only to be included) when DS_HAVE_CUDA is defined; callers go
// through backend/device.h to decide whether to use it and construct it
// through backend/registry.h; the module entry (cuda_module.cc) is its only
// includer outside the backend, gpu_bench and the tests. It lives in the
// module libdatasynth_cuda.so (backend/module.h).
// Both architectures (model/network.h): the GRU replaces the fused LSTM cell
// kernels by GruCellForward/Backward/Infer (kernels.h) and keeps h_{t-1} Wh of
// every step apart ([N, 3H], the reset gate multiplies its n part).
//
// Design (docs/gpu.md has the long form):
// * Parameters, gradients and optimizer state are single device buffers laid
//   out by ParamLayout, so the optimizer is one fused kernel over `total`
//   floats and SetParams/GetParams are one copy.
// * GEMMs run in cuBLAS (row-major through the usual transposition trick:
//   C = A B row-major is C^T = B^T A^T column-major). Per layer, the input
//   projection of all T steps is ONE GEMM ([T*B, In] x [In, 4H]); each step
//   then adds h_{t-1} Wh (a [B, H] x [H, 4H] GEMM) and runs a fused cell kernel
//   (bias, gates, c, h). Backward mirrors it: a fused cell-backward kernel per
//   step, the recurrent dh by GEMM, and dWx, dWh, db, dX as single GEMMs over
//   all steps. Activations are time-major (row t * B + b).
// * Softmax cross-entropy (+ weighted loss and accuracy, the gradient written
//   in place of the logits), dropout (Philox masks recomputed in backward; the
//   scheme is in kernels.h), embedding gather and a deterministic,
//   atomic-free embedding scatter-add are fused kernels.
// * All device memory comes from the process's caching allocator (grow on
//   demand, optional per-process cap; backend/device_allocator.h), including
//   cuBLAS's workspace. Each backend owns one CUDA stream and cuBLAS handle.
// * FP32 throughout; CudaOptions::allow_tf32 lets cuBLAS use TF32 tensor cores
//   (faster, ~1e-3 relative error in GEMMs). CudaOptions::precision kBf16
//   (--precision bf16) runs every GEMM with bf16 operands and fp32
//   accumulation and output (cublasGemmEx, CUBLAS_COMPUTE_32F, tensor cores on
//   compute capability 8.0+): both operands are rounded on the device into
//   scratch buffers per call (RoundToBf16); weights, gradients, optimizer
//   state, cell math and softmax stay fp32, and TF32 math is enabled for what
//   else cuBLAS runs. Untested on a GPU in this tree (no GPU was lent).
// * Per-example gradient clipping (DP-SGD) is not implemented on CUDA yet:
//   Step() with `clip` throws ds::Error(kUnavailable).
//
// Errors inside Step()/ApplyOptimizer() (a CUDA failure, bad token ids) throw
// ds::Error, as the interface has no Status return; factories return Result.
#pragma once

#ifndef DS_HAVE_CUDA
#error "backend/cuda/cuda_backend.h needs a CUDA build (DS_HAVE_CUDA)"
#endif

#include <memory>

#include "backend/backend.h"
#include "backend/device_allocator.h"

namespace ds {

struct CudaOptions {
  int device = 0;
  // Configures the process's allocator for `device` when this is the first
  // CUDA backend of the process (the limit is per process; later backends
  // share the allocator and their `memory` is ignored).
  AllocatorConfig memory;
  bool allow_tf32 = false;  // TF32 tensor-core GEMMs
  Precision precision = Precision::kFp32;  // kBf16: bf16 GEMM operands (see above)
};

Result<std::unique_ptr<TrainBackend>> MakeCudaTrainBackend(const NetworkSpec& spec, int max_batch,
                                                           int max_steps,
                                                           const CudaOptions& options);
// Copies `host_params` ([layout.total]) to the device; it need not outlive the
// backend.
Result<std::unique_ptr<InferBackend>> MakeCudaInferBackend(const NetworkSpec& spec,
                                                           const float* host_params, int slots,
                                                           const CudaOptions& options);

// Statistics of the process's allocator on `device` (zeros before the first
// CUDA backend).
AllocatorStats CudaAllocatorStats(int device = 0);

}  // namespace ds
