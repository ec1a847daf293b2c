#include "backend/registry.h"

#ifdef DS_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "backend/device.h"

namespace ds {
namespace {

BackendEntry Cpu(Architecture a) {
  return {a, DeviceKind::kCpu,
          [](const NetworkSpec& spec, int max_batch, int max_steps, const BackendOptions& o) {
            return MakeCpuTrainBackend(spec, max_batch, max_steps, o.precision);
          },
          [](const NetworkSpec& spec, const float* params, int slots, const BackendOptions& o) {
            return MakeCpuInferBackend(spec, params, slots, o.precision);
          }};
}

#ifdef DS_HAVE_CUDA
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
#endif

// THE table: one row per (architecture, device) this build can run. A backend
// that implements an architecture gets a row; nothing else needs to know.
std::vector<BackendEntry> MakeRegistry() {
  std::vector<BackendEntry> r = {
      Cpu(Architecture::kLstm),
      Cpu(Architecture::kGru),
  };
#ifdef DS_HAVE_CUDA
  r.push_back(Cuda(Architecture::kLstm));
  r.push_back(Cuda(Architecture::kGru));
#endif
  return r;
}

}  // namespace

Status BackendAvailable(Architecture a, DeviceKind d) {
  if (FindBackend(a, d) != nullptr) return Status::Ok();
  bool any = false;
  for (const auto& e : BackendRegistry()) any = any || e.device == d;
  if (!any)
    return DS_ERR(kUnavailable, "this build of datasynth has no {} backend", DeviceKindName(d));
  return DS_ERR(kUnavailable, "architecture '{}' has no {} backend in this build",
                ArchitectureName(a), DeviceKindName(d));
}

const std::vector<BackendEntry>& BackendRegistry() {
  static const std::vector<BackendEntry> registry = MakeRegistry();
  return registry;
}

const BackendEntry* FindBackend(Architecture architecture, DeviceKind device) {
  for (const auto& e : BackendRegistry())
    if (e.architecture == architecture && e.device == device) return &e;
  return nullptr;
}

Result<std::unique_ptr<TrainBackend>> MakeTrainBackend(DeviceKind device, const NetworkSpec& spec,
                                                       int max_batch, int max_steps,
                                                       const BackendOptions& options) {
  DS_RETURN_IF_ERROR(BackendAvailable(spec.architecture, device));
  return FindBackend(spec.architecture, device)->train(spec, max_batch, max_steps, options);
}

Result<std::unique_ptr<InferBackend>> MakeInferBackend(DeviceKind device, const NetworkSpec& spec,
                                                       const float* params, int slots,
                                                       const BackendOptions& options) {
  DS_RETURN_IF_ERROR(BackendAvailable(spec.architecture, device));
  return FindBackend(spec.architecture, device)->infer(spec, params, slots, options);
}

Result<Precision> ResolvePrecision(std::string_view request, DeviceKind device, std::string* info) {
  if (info) info->clear();
  DS_ASSIGN_OR_RETURN(PrecisionRequest req, ParsePrecisionRequest(request));
  if (device == DeviceKind::kCpu) return ResolveCpuPrecision(req, info);
  return req == PrecisionRequest::kFp32 ? Precision::kFp32 : Precision::kBf16;
}

}  // namespace ds
