#include "backend/device.h"

#include <cctype>
#include <mutex>

#include "backend/device_allocator.h"
#ifdef DS_HAVE_CUDA
#include "backend/cuda/cuda_memory.h"
#endif

namespace ds {

Result<DeviceRequest> ParseDevice(std::string_view text) {
  std::string s;
  for (char c : text) s += char(std::tolower(static_cast<unsigned char>(c)));
  if (s == "auto") return DeviceRequest::kAuto;
  if (s == "cpu") return DeviceRequest::kCpu;
  if (s == "cuda" || s == "gpu") return DeviceRequest::kCuda;
  return DS_ERR(kInvalidArgument, "unknown device '{}' (expected auto, cpu or cuda)", text);
}

const char* DeviceKindName(DeviceKind kind) { return kind == DeviceKind::kCuda ? "cuda" : "cpu"; }

bool CudaAvailable(std::string* why) {
  static std::once_flag once;
  static bool ok = false;
  static std::string reason;
  std::call_once(once, [] {
#ifdef DS_HAVE_CUDA
    ok = cuda::ProbeDevice(&reason);
#else
    reason = "this datasynth was built without CUDA";
#endif
  });
  if (why != nullptr) *why = reason;
  return ok;
}

Result<DeviceKind> ResolveDevice(DeviceRequest request, std::string* warning) {
  if (warning != nullptr) warning->clear();
  switch (request) {
    case DeviceRequest::kCpu:
      return DeviceKind::kCpu;
    case DeviceRequest::kCuda: {
      std::string why;
      if (!CudaAvailable(&why)) {
        return DS_ERR(kUnavailable, "--device cuda: no usable GPU: {}", why);
      }
      return DeviceKind::kCuda;
    }
    case DeviceRequest::kAuto:
    default: {
      std::string why;
      if (CudaAvailable(&why)) return DeviceKind::kCuda;
      if (warning != nullptr) *warning = fmt::format("no usable GPU ({}); running on the CPU", why);
      return DeviceKind::kCpu;
    }
  }
}

Result<DeviceMemory> CudaMemory(int device) {
#ifdef DS_HAVE_CUDA
  std::string why;
  if (!CudaAvailable(&why)) return DS_ERR(kUnavailable, "no usable GPU: {}", why);
  DS_ASSIGN_OR_RETURN(auto fm, cuda::MemoryInfo(device));
  return DeviceMemory{fm.first, fm.second};
#else
  return DS_ERR(kUnavailable, "this datasynth was built without CUDA");
#endif
}

Result<size_t> DefaultWorkerLimit(int workers) {
  DS_ASSIGN_OR_RETURN(DeviceMemory m, CudaMemory(0));
  return WorkerShare(m.free_bytes, workers, kCudaContextReserve);
}

}  // namespace ds
