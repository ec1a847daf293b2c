#include "backend/precision.h"

#include <cpuid.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace ds {

const char* PrecisionName(Precision p) { return p == Precision::kBf16 ? "bf16" : "fp32"; }

Result<PrecisionRequest> ParsePrecisionRequest(std::string_view name) {
  if (name == "auto") return PrecisionRequest::kAuto;
  if (name == "fp32") return PrecisionRequest::kFp32;
  if (name == "bf16") return PrecisionRequest::kBf16;
  return DS_ERR(kInvalidArgument, "precision '{}': expected fp32, bf16 or auto", name);
}

Result<Precision> ParsePrecision(std::string_view name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  return DS_ERR(kInvalidArgument, "precision '{}': expected fp32 or bf16", name);
}

CpuFeatures DetectCpuFeatures() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  const bool avx512f = (b >> 16) & 1;
  f.avx512_vnni = avx512f && ((c >> 11) & 1);
  f.amx_bf16 = (d >> 22) & 1;
  __cpuid_count(7, 1, a, b, c, d);
  f.avx512_bf16 = avx512f && ((a >> 5) & 1);
  __cpuid(0, a, b, c, d);
  f.intel = b == 0x756e6547 && d == 0x49656e69 && c == 0x6c65746e;  // "GenuineIntel"
  return f;
}

namespace {
std::atomic<const CpuFeatures*> g_injected{nullptr};
CpuFeatures g_injected_copy;
}  // namespace

void SetCpuFeaturesForTesting(const CpuFeatures* f) {
  if (f == nullptr) {
    g_injected.store(nullptr);
    return;
  }
  g_injected_copy = *f;
  g_injected.store(&g_injected_copy);
}

CpuFeatures CurrentCpuFeatures() {
  if (const CpuFeatures* f = g_injected.load()) return *f;
  static const CpuFeatures detected = DetectCpuFeatures();
  CpuFeatures f = detected;
  const char* e = std::getenv("DATASYNTH_CPU_BF16");
  if (e && std::strcmp(e, "0") == 0) f.avx512_bf16 = f.amx_bf16 = false;
  return f;
}

Precision ResolveCpuPrecision(PrecisionRequest req, std::string* info) {
  if (info) info->clear();
  if (req == PrecisionRequest::kFp32) return Precision::kFp32;
  if (CurrentCpuFeatures().bf16()) return Precision::kBf16;
  if (info)
    *info = fmt::format("precision {}: this CPU has neither AVX512_BF16 nor AMX; running fp32",
                        req == PrecisionRequest::kAuto ? "auto" : "bf16");
  return Precision::kFp32;
}

Precision ResolveCpuInferPrecision(PrecisionRequest req, Precision model, std::string* info) {
  if (req != PrecisionRequest::kAuto) return ResolveCpuPrecision(req, info);
  if (info) info->clear();
  if (model == Precision::kFp32) return Precision::kFp32;
  const CpuFeatures f = CurrentCpuFeatures();
  if (f.bf16_infer_pays()) return Precision::kBf16;
  if (info)
    *info = f.bf16() ? "precision auto: bf16 generation is slower than fp32 on this CPU (AVX512_BF16 "
                       "without AMX); running fp32 (--precision bf16 forces bf16)"
                     : "precision auto: this CPU has neither AVX512_BF16 nor AMX; running fp32";
  return Precision::kFp32;
}

}  // namespace ds
