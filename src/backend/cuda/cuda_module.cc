// The CUDA backend module's entry point (backend/module.h): the table that
// registers the CUDA rows of the backend registry and serves the device
// services of backend/device.h and src/dist/nccl.cc. Linked only into
// libdatasynth_cuda.so, whose only exported symbol is DS_BACKEND_MODULE_ENTRY
// (cuda_module.map).
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/nccl_ops.h"
#include "backend/module.h"

#ifndef DS_BUILD_ID
#error "DS_BUILD_ID must be defined for backend/cuda/cuda_module.cc (CMakeLists.txt)"
#endif

namespace ds {
namespace {

CudaOptions ToCuda(const BackendOptions& o) {
  CudaOptions c;
  c.device = o.device;
  c.memory = o.memory;
  c.allow_tf32 = o.allow_tf32;
  c.precision = o.precision;
  return c;
}

BackendEntry Cuda(Architecture a) {
  return {a, DeviceKind::kCuda,
          [](const NetworkSpec& spec, int max_batch, int max_steps, const BackendOptions& o) {
            return MakeCudaTrainBackend(spec, max_batch, max_steps, ToCuda(o));
          },
          [](const NetworkSpec& spec, const float* params, int slots, const BackendOptions& o) {
            return MakeCudaInferBackend(spec, params, slots, ToCuda(o));
          }};
}

// The CUDA backend implements every architecture.
void AddBackends(std::vector<BackendEntry>* rows) {
  rows->push_back(Cuda(Architecture::kLstm));
  rows->push_back(Cuda(Architecture::kGru));
}

Result<DeviceMemory> Memory(int device) {
  DS_ASSIGN_OR_RETURN(auto fm, cuda::MemoryInfo(device));
  return DeviceMemory{fm.first, fm.second};
}

const BackendModule kModule = {
    .abi = kBackendModuleAbi,
    .build_id = DS_BUILD_ID,
    .name = "cuda",
    .device = DeviceKind::kCuda,
    .add_backends = AddBackends,
    .probe = cuda::ProbeDevice,
    .memory = Memory,
    .allocator_stats = CudaAllocatorStats,
    .nccl = cuda::NcclOpsOrNull(),
};

}  // namespace
}  // namespace ds

extern "C" __attribute__((visibility("default"))) const ds::BackendModule*
DS_BACKEND_MODULE_ENTRY() {
  return &ds::kModule;
}
