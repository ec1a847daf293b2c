// The backend registry: which code trains and runs a network of a given
// architecture on a given device. Callers (the trainer, the generator and its
// workers, tabular) ask here and never #ifdef on CUDA or name a backend's
// factory; a build without CUDA simply has no kCuda entries.
//
//   (architecture, device) -> TrainFactory, InferFactory
//
// The built-in (CPU) entries live in one table in registry.cc (not static
// self-registration, which a static library's linker may drop). A device
// backend built as a module (backend/module.h; the CUDA backend) adds its
// rows when the module is loaded, which FindBackend does on the first query
// for that device. Adding a backend or an architecture = adding its rows
// (docs/architecture.md).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/device_allocator.h"
#include "model/network.h"
#include "util/status.h"

namespace ds {

// Options a device backend may use; host backends ignore them.
struct BackendOptions {
  int device = 0;           // device index (CUDA)
  AllocatorConfig memory;   // the process allocator's configuration (CUDA)
  bool allow_tf32 = false;  // TF32 tensor-core GEMMs (CUDA)
  // GEMM precision, already resolved for the device (ResolveCpuPrecision, or
  // the CUDA backend's own check); backends run exactly this.
  Precision precision = Precision::kFp32;
};

using TrainFactory = std::function<Result<std::unique_ptr<TrainBackend>>(
    const NetworkSpec& spec, int max_batch, int max_steps, const BackendOptions& options)>;
// `params` ([ParamLayout::For(spec).total], host); host backends read it in
// place (it must outlive them), device backends copy it.
using InferFactory = std::function<Result<std::unique_ptr<InferBackend>>(
    const NetworkSpec& spec, const float* params, int slots, const BackendOptions& options)>;

struct BackendEntry {
  Architecture architecture;
  DeviceKind device;
  TrainFactory train;
  InferFactory infer;
};

// The entries registered so far (the built-in ones, plus those of the
// modules loaded), a snapshot.
std::vector<BackendEntry> BackendRegistry();
// The entry for (spec.architecture, device), or nullptr. For a device other
// than the CPU this loads its module first (once per process).
const BackendEntry* FindBackend(Architecture architecture, DeviceKind device);
// For the module loader: a module's rows. Entries are never removed, and
// pointers returned by FindBackend stay valid.
void AddBackends(std::vector<BackendEntry> rows);

// Ok, or kUnavailable naming the architecture and device (or why the device's
// module is not there: no CUDA in this build, not installed, another build's)
// when there is no such entry.
Status BackendAvailable(Architecture architecture, DeviceKind device);

// Constructs through the registry; kUnavailable naming the architecture and
// device when this build has no such backend.
Result<std::unique_ptr<TrainBackend>> MakeTrainBackend(DeviceKind device, const NetworkSpec& spec,
                                                       int max_batch, int max_steps,
                                                       const BackendOptions& options = {});
Result<std::unique_ptr<InferBackend>> MakeInferBackend(DeviceKind device, const NetworkSpec& spec,
                                                       const float* params, int slots,
                                                       const BackendOptions& options = {});

// The precision `request` (config key `precision`: "auto", "fp32", "bf16")
// runs at on `device` (backend/precision.h): on the CPU per
// ResolveCpuPrecision (*info: one line when bf16 is not available and fp32
// runs instead), on CUDA as requested with auto = fp32 (the cuBLAS bf16 path
// is opt-in until it has run on a GPU). kInvalidArgument for another value.
Result<Precision> ResolvePrecision(std::string_view request, DeviceKind device, std::string* info);
// generate's precision: `request` as above, except that "auto" starts from
// the model's recorded precision `model` ("fp32" / "bf16") and, on the CPU,
// keeps bf16 only where it pays (ResolveCpuInferPrecision).
Result<Precision> ResolveInferPrecision(std::string_view request, std::string_view model,
                                        DeviceKind device, std::string* info);

}  // namespace ds
