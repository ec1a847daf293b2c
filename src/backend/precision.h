// Arithmetic precision of the network's GEMMs (docs/precision.md).
//
//   fp32  every operand and accumulator in fp32 (the oracle)
//   bf16  GEMM operands rounded to bfloat16 (round to nearest even), products
//         accumulated and written in fp32; everything else stays fp32: master
//         weights, gradients, optimizer state, gate arithmetic, softmax, loss,
//         DP per-example norms and clipping. On CUDA, bf16 GEMMs run on tensor
//         cores through cuBLAS (and fp32 GEMMs may use TF32 when allowed).
//   auto  training (the default): bf16 where the CPU runs it natively
//         (AVX512_BF16 or AMX), else fp32; on CUDA fp32 (its bf16 path has
//         not yet run on a GPU: docs/precision.md). generate: the model's
//         precision where bf16 inference pays on this CPU
//         (CpuFeatures::bf16_infer_pays), else fp32; on CUDA fp32.
//
// Which CPU features count is decided by CurrentCpuFeatures(): CPUID, unless a
// test injected other features (SetCpuFeaturesForTesting) or the environment
// says DATASYNTH_CPU_BF16=0 (treat the CPU as one without bf16: for tests and
// diagnostics of the fallback).
#pragma once

#include <string>
#include <string_view>

#include "util/status.h"

namespace ds {

enum class Precision { kFp32, kBf16 };
enum class PrecisionRequest { kAuto, kFp32, kBf16 };

// "fp32", "bf16".
const char* PrecisionName(Precision p);
// "auto", "fp32", "bf16" -> the request; kInvalidArgument naming the value otherwise.
Result<PrecisionRequest> ParsePrecisionRequest(std::string_view name);
// "fp32" / "bf16" only (a model's recorded precision).
Result<Precision> ParsePrecision(std::string_view name);

struct CpuFeatures {
  bool avx512_bf16 = false;  // AVX512_BF16 (vdpbf16ps)
  bool amx_bf16 = false;     // AMX-BF16 tiles
  bool avx512_vnni = false;  // for reports
  bool intel = false;        // vendor GenuineIntel
  bool bf16() const { return avx512_bf16 || amx_bf16; }
  // Whether bf16 generation is faster than fp32 here. Measured (docs/precision.md):
  // 1.33-1.38x faster on an AMD EPYC with AVX512_BF16, 1.3-1.4x slower on an
  // Intel Xeon with AVX512_BF16 but no AMX; AMX is taken to pay.
  bool bf16_infer_pays() const { return amx_bf16 || (avx512_bf16 && !intel); }
};

// CPUID of this machine (no override).
CpuFeatures DetectCpuFeatures();
// What the backends and ResolveCpuPrecision use: an injected set, else
// DetectCpuFeatures() with DATASYNTH_CPU_BF16=0 clearing the bf16 bits.
CpuFeatures CurrentCpuFeatures();
// Test hook: `f` replaces detection until called again with nullptr.
void SetCpuFeaturesForTesting(const CpuFeatures* f);

// The precision a CPU backend runs for `req`. kAuto and kBf16 on a CPU without
// bf16 give kFp32 and set *info (when not null) to one line saying so;
// otherwise *info is cleared.
Precision ResolveCpuPrecision(PrecisionRequest req, std::string* info);

// generate's precision on the CPU for a model trained in `model`: kAuto gives
// bf16 for a bf16 model where bf16_infer_pays(), else fp32 (a bf16 model on a
// CPU whose bf16 does not pay sets *info to one line saying so); kFp32 / kBf16
// as ResolveCpuPrecision.
Precision ResolveCpuInferPrecision(PrecisionRequest req, Precision model, std::string* info);

}  // namespace ds
