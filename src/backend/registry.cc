#include "backend/registry.h"

#include <deque>
#include <mutex>

#include "backend/device.h"
#include "backend/module.h"

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

// THE built-in table: one row per architecture of the CPU backend. Device
// backends are modules and add their rows when loaded (AddBackends).
struct Table {
  std::mutex mu;
  std::deque<BackendEntry> rows;  // a deque: pointers survive push_back
  Table() {
    rows.push_back(Cpu(Architecture::kLstm));
    rows.push_back(Cpu(Architecture::kGru));
  }
};

Table& TheTable() {
  static Table table;
  return table;
}

const BackendEntry* Find(Architecture architecture, DeviceKind device) {
  Table& t = TheTable();
  std::lock_guard<std::mutex> lock(t.mu);
  for (const auto& e : t.rows)
    if (e.architecture == architecture && e.device == device) return &e;
  return nullptr;
}

}  // namespace

void AddBackends(std::vector<BackendEntry> rows) {
  Table& t = TheTable();
  std::lock_guard<std::mutex> lock(t.mu);
  for (auto& r : rows) t.rows.push_back(std::move(r));
}

Status BackendAvailable(Architecture a, DeviceKind d) {
  if (FindBackend(a, d) != nullptr) return Status::Ok();
  if (d != DeviceKind::kCpu) {
    Result<const BackendModule*> m = LoadBackendModule(d);
    if (!m.ok())
      return DS_ERR(kUnavailable, "no {} backend: {}", DeviceKindName(d), m.status().message());
  }
  return DS_ERR(kUnavailable, "architecture '{}' has no {} backend in this build",
                ArchitectureName(a), DeviceKindName(d));
}

std::vector<BackendEntry> BackendRegistry() {
  Table& t = TheTable();
  std::lock_guard<std::mutex> lock(t.mu);
  return std::vector<BackendEntry>(t.rows.begin(), t.rows.end());
}

const BackendEntry* FindBackend(Architecture architecture, DeviceKind device) {
  if (device != DeviceKind::kCpu)
    (void)LoadBackendModule(device);  // once; errors: BackendAvailable
  return Find(architecture, device);
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
  return req == PrecisionRequest::kBf16 ? Precision::kBf16 : Precision::kFp32;
}

Result<Precision> ResolveInferPrecision(std::string_view request, std::string_view model,
                                        DeviceKind device, std::string* info) {
  if (info) info->clear();
  DS_ASSIGN_OR_RETURN(Precision trained, ParsePrecision(model));
  if (device != DeviceKind::kCpu) return ResolvePrecision(request, device, info);
  DS_ASSIGN_OR_RETURN(PrecisionRequest req, ParsePrecisionRequest(request));
  return ResolveCpuInferPrecision(req, trained, info);
}

}  // namespace ds
