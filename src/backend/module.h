// Backend modules: a device backend built as a shared module that the process
// loads only when that device is asked for (ggml's backend registry, in
// small). The CUDA backend is one: libdatasynth_cuda.so holds src/backend/cuda
// (and the NCCL calls of src/dist/nccl.cc), linked with cudart, cuBLAS and
// NCCL, so that the datasynth binary and dscore link none of them and a
// CPU-only run never pays their start (cuBLAS's static initialisers take
// 0.6-0.8 s of wall time; docs/gpu.md).
//
// The module exports ONE C symbol, DS_BACKEND_MODULE_ENTRY, returning its
// BackendModule. The loader checks `abi` and `build_id` before it reads
// anything else: the rest of the table is C++ (std::function rows, Result,
// std::string) and only valid between a binary and a module of the same
// build, so a module of another build (or of another datasynth version) is
// refused with an error naming both builds. Then the module's rows go into
// the backend registry (backend/registry.h) and its device services
// (probe, memory, allocator statistics, NCCL) serve backend/device.h and
// src/dist/nccl.cc.
//
// Where a module is looked for (FindBackendModule), first hit wins:
//   1. $DATASYNTH_CUDA_MODULE (a file; only this when set)
//   2. the directory of the shared object holding this code (the Python
//      package's _core module; skipped inside an executable)
//   3. the directory of /proc/self/exe (the datasynth binary, a test)
//   4. <that directory>/../lib/datasynth (the install layout)
//   5. the configured install directory (DS_MODULE_INSTALL_DIR)
// Loading happens once per process (LoadBackendModule); a failure is
// remembered and returned to every later caller.
//
// Adding a backend module (docs/architecture.md): a MODULE target in
// CMakeLists.txt, a file defining DS_BACKEND_MODULE_ENTRY that fills a
// BackendModule (see src/backend/cuda/cuda_module.cc), and its DeviceKind in
// ModuleFileName/ModuleEnvVar below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/device.h"
#include "backend/device_allocator.h"
#include "backend/registry.h"
#include "util/status.h"

#define DS_BACKEND_MODULE_ENTRY datasynth_backend_module_v1
#define DS_BACKEND_MODULE_ENTRY_NAME "datasynth_backend_module_v1"

namespace ds {

// Bump when BackendModule (or NcclOps) changes shape.
inline constexpr uint32_t kBackendModuleAbi = 1;

// NCCL between the GPUs of mpirun ranks, for src/dist/nccl.cc. `comm` is the
// module's communicator handle.
struct NcclOps {
  int (*device_count)();  // cudaGetDeviceCount (0 on error)
  // A communicator of `size` ranks as `rank` on `device`; `share_id`
  // broadcasts rank 0's unique id (bytes) to every rank. `where` ("rank 1 of
  // 4") goes into error messages.
  Result<void*> (*create)(int device, int rank, int size, const std::string& where,
                          const std::function<Status(void*, size_t)>& share_id);
  void (*destroy)(void* comm);
  Status (*allreduce_device)(void* comm, int64_t* data, size_t n);  // in place, device memory
  Status (*allreduce_host)(void* comm, int64_t* host, size_t n);    // through a device buffer
};

struct BackendModule {
  // Read first and alone; keep these three plain C and in this order.
  uint32_t abi;          // kBackendModuleAbi of the build that made the module
  const char* build_id;  // BackendModuleBuildId() of that build
  const char* name;      // "cuda"
  // Valid only once abi and build_id match this binary's.
  DeviceKind device;
  void (*add_backends)(std::vector<BackendEntry>* rows);
  // True when device 0 is usable; else false with the reason.
  bool (*probe)(std::string* why);
  Result<DeviceMemory> (*memory)(int device);
  AllocatorStats (*allocator_stats)(int device);
  const NcclOps* nccl;  // nullptr when the module was built without NCCL
};

// This build's identity: "<version>-<random token of the CMake configure>".
const char* BackendModuleBuildId();

// "libdatasynth_cuda.so"; "DATASYNTH_CUDA_MODULE".
const char* ModuleFileName(DeviceKind device);
const char* ModuleEnvVar(DeviceKind device);

// The candidates of the search above, in order (existing or not).
std::vector<std::string> ModuleSearchPath(DeviceKind device);
// The first existing candidate; kUnavailable when this build has no such
// module ("this datasynth was built without CUDA") or none exists (the
// message lists where it looked). Cheap: no dlopen.
Result<std::string> FindBackendModule(DeviceKind device);

// dlopen + the entry point + the ABI and build checks; registers nothing.
// kUnavailable when the file cannot be loaded or has no entry point,
// kCorrupt when it is from another build.
Result<const BackendModule*> OpenBackendModule(const std::string& path, DeviceKind device);

// The module of `device` for this process: found, opened, checked and its
// backends registered, once; later calls return the same answer.
Result<const BackendModule*> LoadBackendModule(DeviceKind device);
// The module if LoadBackendModule succeeded already, else nullptr (no load).
const BackendModule* LoadedBackendModule(DeviceKind device);

// The cheap GPU check before any module is loaded: the CUDA driver
// (libcuda.so.1) through its own API (cuInit, cuDeviceGetCount), so that a
// machine without a driver or a GPU never loads cuBLAS. False with the reason
// in `why`. Initialises the CUDA driver (see the fork note in device.h).
bool CudaDriverHasDevice(std::string* why);

}  // namespace ds
