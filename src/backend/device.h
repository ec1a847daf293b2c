// Device selection: which backend (CPU or CUDA) a command runs on.
//
//   --device auto   CUDA when this build has it and a usable GPU is present,
//                   else the CPU with ONE warning line (ResolveDevice's
//                   `warning`), never an error.
//   --device cuda   CUDA or a clear error saying why not (no CUDA build, no
//                   GPU, driver too old, GPU older than the build's sm_90).
//   --device cpu    the CPU.
//
// GPU memory of generation workers (see docs/gpu.md): the generate command
// with N worker processes on one GPU gives each worker the per-process limit
// DefaultWorkerLimit(N) (unless the user sets one), an equal share of the
// memory free when generation starts. Each worker's caching allocator then
// grows on demand up to that limit, so N workers can never take more than
// what was free, and a worker that needs less leaves the rest unused instead
// of reserving it (TensorFlow's default reserves it all). CUDA cannot be used
// in a child forked after the parent initialised CUDA: the parent computes
// the limit (this initialises CUDA in the parent) and must then start workers
// with fork+exec (posix_spawn) passing the limit on the command line or
// environment, or fork the workers before touching CUDA and let each worker
// call DefaultWorkerLimit itself (then they race on the free memory; avoid).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "backend/backend.h"
#include "backend/device_allocator.h"
#include "util/status.h"

namespace ds {

enum class DeviceRequest { kAuto, kCpu, kCuda };

// Whether a fallback of `auto` to the CPU is reported in ResolveDevice's (and
// ResolveInferDevice's) `warning` (default: yes). The CLI reports it only when
// a device was asked for or with --verbose; forked workers and batch
// processes inherit the setting.
void SetDeviceFallbackWarnings(bool on);
bool DeviceFallbackWarnings();

// "auto", "cpu", "cuda" (also "gpu"), case-insensitive.
Result<DeviceRequest> ParseDevice(std::string_view text);
const char* DeviceKindName(DeviceKind kind);  // "cpu", "cuda"

// True when this build has CUDA and device 0 is usable; else false with the
// reason in `why`. The CUDA backend is a module (backend/module.h) and the
// probe pays for it only when a GPU is likely: (1) the module file exists
// ("this datasynth was built without CUDA", "... is not installed (looked
// for ...)"), (2) the CUDA driver sees a GPU through its own API, without
// cuBLAS ("no CUDA driver (libcuda.so.1: cannot open shared object file
// ...)", "the CUDA driver sees no GPU"), (3) the module loads and is of this
// build, (4) its own check (e.g. "CUDA driver version is insufficient for
// CUDA runtime version (cudaErrorInsufficientDriver)", a GPU older than the
// build's sm_90). The probe runs once per process; it initialises the CUDA
// driver when step 1 passes (see the fork note above).
bool CudaAvailable(std::string* why = nullptr);

// kCuda, kCpu (with `warning` set for auto without a GPU), or kUnavailable
// for an explicit cuda request that cannot be met.
Result<DeviceKind> ResolveDevice(DeviceRequest request, std::string* warning);

struct DeviceMemory {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};
// cudaMemGetInfo of `device` (creates the CUDA context of this process).
Result<DeviceMemory> CudaMemory(int device = 0);

// Statistics of the CUDA module's caching allocator on `device` (zeros before
// the first CUDA backend, or when the module is not loaded).
AllocatorStats CudaModuleAllocatorStats(int device = 0);

// What one CUDA context takes outside our allocator (the runtime, cuBLAS
// kernels' code, cuBLAS/driver bookkeeping), kept out of each worker's share.
inline constexpr size_t kCudaContextReserve = size_t(512) << 20;

// The per-process memory limit for `workers` processes sharing device 0:
// WorkerShare(free memory now, workers, kCudaContextReserve).
Result<size_t> DefaultWorkerLimit(int workers);

// CudaAvailable and CudaMemory answered by a short-lived forked child, so that
// the calling process never initialises CUDA and can still fork workers that
// use the GPU (the generate command's parent does this). Without a CUDA
// module (a build without CUDA, or none installed) it answers at once
// without forking. Errors only when the child cannot be run.
struct CudaProbe {
  bool usable = false;
  std::string why;      // why not usable
  DeviceMemory memory;  // device 0, when usable
};
Result<CudaProbe> ProbeCudaInChild();

}  // namespace ds
