// Error checks around every CUDA runtime and cuBLAS call. A failure becomes a
// ds::Error (thrown; DS_CUDA_RETURN_IF_ERROR returns a Status instead) whose
// message names the call and carries the library's own error string:
//   "cudaMalloc(&p, bytes) failed: out of memory (cudaErrorMemoryAllocation)"
// Codes: out of memory -> kResourceExhausted; no device / driver too old ->
// kUnavailable; anything else -> kInternal.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "util/status.h"

namespace ds::cuda {

inline Code CodeFor(cudaError_t e) {
  switch (e) {
    case cudaErrorMemoryAllocation:
      return Code::kResourceExhausted;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      return Code::kUnavailable;
    default:
      return Code::kInternal;
  }
}

inline Status CudaStatus(cudaError_t e, const char* what, const char* file, int line) {
  return Status(CodeFor(e),
                fmt::format("{} failed: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e)),
                file, line);
}

inline Status CublasStatus(cublasStatus_t s, const char* what, const char* file, int line) {
  Code c = s == CUBLAS_STATUS_ALLOC_FAILED ? Code::kResourceExhausted
           : s == CUBLAS_STATUS_NOT_INITIALIZED || s == CUBLAS_STATUS_ARCH_MISMATCH
               ? Code::kUnavailable
               : Code::kInternal;
  return Status(c, fmt::format("{} failed: {} ({})", what, cublasGetStatusString(s), int(s)), file,
                line);
}

}  // namespace ds::cuda

#define DS_CUDA_CHECK(expr)                                                        \
  do {                                                                             \
    cudaError_t _ds_e = (expr);                                                    \
    if (_ds_e != cudaSuccess) {                                                    \
      cudaGetLastError(); /* clear a sticky non-fatal error */                     \
      throw ::ds::Error(::ds::cuda::CudaStatus(_ds_e, #expr, __FILE__, __LINE__)); \
    }                                                                              \
  } while (0)

#define DS_CUDA_RETURN_IF_ERROR(expr)                                  \
  do {                                                                 \
    cudaError_t _ds_e = (expr);                                        \
    if (_ds_e != cudaSuccess) {                                        \
      cudaGetLastError();                                              \
      return ::ds::cuda::CudaStatus(_ds_e, #expr, __FILE__, __LINE__); \
    }                                                                  \
  } while (0)

#define DS_CUBLAS_CHECK(expr)                                                        \
  do {                                                                               \
    cublasStatus_t _ds_s = (expr);                                                   \
    if (_ds_s != CUBLAS_STATUS_SUCCESS)                                              \
      throw ::ds::Error(::ds::cuda::CublasStatus(_ds_s, #expr, __FILE__, __LINE__)); \
  } while (0)

// After a kernel launch: launch-configuration errors surface here.
#define DS_CUDA_CHECK_LAUNCH() DS_CUDA_CHECK(cudaGetLastError())
