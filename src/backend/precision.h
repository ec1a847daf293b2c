// Arithmetic precision of the network's GEMMs (docs/precision.md).
//
//   fp32  every operand and accumulator in fp32 (the oracle)
//   bf16  GEMM operands rounded to bfloat16 (round to nearest even), products
//         accumulated and written in fp32; everything else stays fp32: master
//         weights, gradients, optimizer state, gate arithmetic, softmax, loss,
//         DP per-example norms and clipping. On CUDA, bf16 GEMMs run on tensor
//         cores through cuBLAS (and fp32 GEMMs may use TF32 when allowed).
//   auto  bf16 where the hardware runs it natively (CPU: AVX512_BF16 or AMX;
//         CUDA: compute capability 8.0 or newer), else fp32.
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
  bool bf16() const { return avx512_bf16 || amx_bf16; }
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

}  // namespace ds
