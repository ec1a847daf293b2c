#include "backend/device.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "backend/device_allocator.h"
#include "backend/module.h"
#include "util/subprocess.h"

namespace ds {

Result<DeviceRequest> ParseDevice(std::string_view text) {
  std::string s;
  for (char c : text) s += char(std::tolower(static_cast<unsigned char>(c)));
  if (s == "auto") return DeviceRequest::kAuto;
  if (s == "cpu") return DeviceRequest::kCpu;
  if (s == "cuda" || s == "gpu") return DeviceRequest::kCuda;
  return DS_ERR(kInvalidArgument, "unknown device '{}' (expected auto, cpu or cuda)", text);
}

namespace {
std::atomic<bool> g_fallback_warnings{true};
}  // namespace

void SetDeviceFallbackWarnings(bool on) { g_fallback_warnings = on; }
bool DeviceFallbackWarnings() { return g_fallback_warnings; }

const char* DeviceKindName(DeviceKind kind) { return kind == DeviceKind::kCuda ? "cuda" : "cpu"; }

bool CudaAvailable(std::string* why) {
  static std::once_flag once;
  static bool ok = false;
  static std::string reason;
  std::call_once(once, [] {
    // Cheapest first: the module file, then the driver (no cuBLAS), and only
    // then the module itself (cudart, cuBLAS) and its own check of the GPU.
    Result<std::string> path = FindBackendModule(DeviceKind::kCuda);
    if (!path.ok()) {
      reason = path.status().message();
      return;
    }
    if (!CudaDriverHasDevice(&reason)) return;
    Result<const BackendModule*> m = LoadBackendModule(DeviceKind::kCuda);
    if (!m.ok()) {
      reason = m.status().message();
      return;
    }
    ok = (*m)->probe(&reason);
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
      if (warning != nullptr && DeviceFallbackWarnings())
        *warning = fmt::format("no usable GPU ({}); running on the CPU", why);
      return DeviceKind::kCpu;
    }
  }
}

Result<DeviceMemory> CudaMemory(int device) {
  std::string why;
  if (!CudaAvailable(&why)) return DS_ERR(kUnavailable, "no usable GPU: {}", why);
  DS_ASSIGN_OR_RETURN(const BackendModule* m, LoadBackendModule(DeviceKind::kCuda));
  return m->memory(device);
}

AllocatorStats CudaModuleAllocatorStats(int device) {
  const BackendModule* m = LoadedBackendModule(DeviceKind::kCuda);
  return m ? m->allocator_stats(device) : AllocatorStats{};
}

Result<size_t> DefaultWorkerLimit(int workers) {
  DS_ASSIGN_OR_RETURN(DeviceMemory m, CudaMemory(0));
  return WorkerShare(m.free_bytes, workers, kCudaContextReserve);
}

Result<CudaProbe> ProbeCudaInChild() {
  CudaProbe probe;
  // No module: answered here, without a child.
  if (Result<std::string> path = FindBackendModule(DeviceKind::kCuda); !path.ok()) {
    probe.why = path.status().message();
    return probe;
  }
  // The child's answer: [u8 usable][u64 free][u64 total][why...] through a pipe.
  auto child = [](int fd) {
    std::string why;
    uint8_t ok = CudaAvailable(&why) ? 1 : 0;
    uint64_t mem[2] = {0, 0};
    if (ok) {
      auto m = CudaMemory(0);
      if (m.ok()) {
        mem[0] = m.value().free_bytes;
        mem[1] = m.value().total_bytes;
      } else {
        ok = 0;
        why = m.status().message();
      }
    }
    std::string msg(1, char(ok));
    msg.append(reinterpret_cast<const char*>(mem), sizeof(mem));
    msg += why.substr(0, 4000);
    (void)WriteAll(fd, msg);
    ::_exit(0);
  };
  Result<Subprocess> proc = Subprocess::Spawn(Subprocess::Channel::kPipe, child);
  if (!proc.ok()) {
    if (proc.status().code() == Code::kIo)
      return DS_ERR(kIo, "cannot probe the GPU: pipe: {}", proc.status().message());
    return DS_ERR(kResourceExhausted, "cannot probe the GPU: fork: {}", proc.status().message());
  }
  std::string msg;
  proc->ReadToEnd(&msg);
  proc->CloseChannel();
  const int status = proc->Wait();
  if (msg.size() < 1 + 2 * sizeof(uint64_t)) {
    probe.why = TermSignal(status) ? fmt::format("the GPU probe process was killed by signal {}",
                                                 TermSignal(status))
                                   : "the GPU probe process gave no answer";
    return probe;
  }
  probe.usable = msg[0] != 0;
  uint64_t mem[2];
  std::memcpy(mem, msg.data() + 1, sizeof(mem));
  probe.memory = DeviceMemory{size_t(mem[0]), size_t(mem[1])};
  probe.why = msg.substr(1 + sizeof(mem));
  return probe;
}

}  // namespace ds
