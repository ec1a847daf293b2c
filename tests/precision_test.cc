// Precision bf16 (backend/precision.h, docs/precision.md): the resolution of
// fp32 | bf16 | auto with injected CPU features, bf16 rounding and GEMMs, the
// bf16 training step against the fp32 oracle tensor by tensor, and the CPU
// inference fast path (layer-0 table, ranged logits) against the plain path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "batch_fixtures.h"
#include "backend/cpu/buffer.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gemm.h"
#include "backend/precision.h"
#include "backend/registry.h"
#include "model/network.h"
#include "util/rng.h"

namespace ds {
namespace {

bool HaveBf16() { return DetectCpuFeatures().bf16(); }

// Restores detection when a test injected features.
struct InjectFeatures {
  explicit InjectFeatures(CpuFeatures f) { SetCpuFeaturesForTesting(&f); }
  ~InjectFeatures() { SetCpuFeaturesForTesting(nullptr); }
};

TEST(Precision, ParsesNames) {
  EXPECT_EQ(ParsePrecisionRequest("auto").value(), PrecisionRequest::kAuto);
  EXPECT_EQ(ParsePrecisionRequest("bf16").value(), PrecisionRequest::kBf16);
  EXPECT_EQ(ParsePrecisionRequest("fp32").value(), PrecisionRequest::kFp32);
  EXPECT_FALSE(ParsePrecisionRequest("fp16").ok());
  EXPECT_EQ(ParsePrecision("bf16").value(), Precision::kBf16);
  EXPECT_FALSE(ParsePrecision("auto").ok());
  EXPECT_STREQ(PrecisionName(Precision::kBf16), "bf16");
}

TEST(Precision, CpuWithoutBf16FallsBackToFp32WithOneLine) {
  InjectFeatures none(CpuFeatures{});
  std::string info;
  EXPECT_EQ(ResolveCpuPrecision(PrecisionRequest::kAuto, &info), Precision::kFp32);
  EXPECT_NE(info.find("running fp32"), std::string::npos) << info;
  EXPECT_EQ(info.find('\n'), std::string::npos) << "one line";
  EXPECT_EQ(ResolveCpuPrecision(PrecisionRequest::kBf16, &info), Precision::kFp32);
  EXPECT_NE(info.find("precision bf16"), std::string::npos) << info;
  EXPECT_EQ(ResolveCpuPrecision(PrecisionRequest::kFp32, &info), Precision::kFp32);
  EXPECT_TRUE(info.empty());
  // Through the registry's resolution, as the trainer and generate call it.
  auto r = ResolvePrecision("auto", DeviceKind::kCpu, &info);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), Precision::kFp32);
  EXPECT_FALSE(info.empty());
  EXPECT_FALSE(ResolvePrecision("half", DeviceKind::kCpu, &info).ok());
}

TEST(Precision, CpuWithBf16RunsBf16) {
  CpuFeatures f;
  f.avx512_bf16 = true;
  InjectFeatures with(f);
  std::string info = "stale";
  EXPECT_EQ(ResolveCpuPrecision(PrecisionRequest::kAuto, &info), Precision::kBf16);
  EXPECT_TRUE(info.empty());
  CpuFeatures amx;
  amx.amx_bf16 = true;
  InjectFeatures with_amx(amx);
  EXPECT_EQ(ResolveCpuPrecision(PrecisionRequest::kBf16, &info), Precision::kBf16);
}

// generate's auto: the model's precision where bf16 inference pays on this CPU
// (AMD with AVX512_BF16, any CPU with AMX), fp32 on an Intel CPU with
// AVX512_BF16 but no AMX (measured slower there) and on CUDA.
TEST(Precision, GenerateAutoKeepsBf16OnlyWhereItPays) {
  std::string info = "stale";
  CpuFeatures amd;
  amd.avx512_bf16 = true;
  {
    InjectFeatures with(amd);
    EXPECT_EQ(ResolveInferPrecision("auto", "bf16", DeviceKind::kCpu, &info).value(),
              Precision::kBf16);
    EXPECT_TRUE(info.empty());
    EXPECT_EQ(ResolveInferPrecision("auto", "fp32", DeviceKind::kCpu, &info).value(),
              Precision::kFp32);
    EXPECT_TRUE(info.empty()) << "an fp32 model on auto says nothing";
  }
  CpuFeatures xeon = amd;
  xeon.intel = true;
  {
    InjectFeatures with(xeon);
    EXPECT_EQ(ResolveInferPrecision("auto", "bf16", DeviceKind::kCpu, &info).value(),
              Precision::kFp32);
    EXPECT_NE(info.find("slower than fp32"), std::string::npos) << info;
    EXPECT_EQ(info.find('\n'), std::string::npos) << "one line";
    EXPECT_EQ(ResolveInferPrecision("bf16", "fp32", DeviceKind::kCpu, &info).value(),
              Precision::kBf16) << "an explicit bf16 is kept";
    // Training's auto still trains bf16 there (the measured slowdown is generation's).
    EXPECT_EQ(ResolvePrecision("auto", DeviceKind::kCpu, &info).value(), Precision::kBf16);
  }
  CpuFeatures spr = xeon;
  spr.amx_bf16 = true;
  {
    InjectFeatures with(spr);
    EXPECT_EQ(ResolveInferPrecision("auto", "bf16", DeviceKind::kCpu, &info).value(),
              Precision::kBf16);
  }
  {
    InjectFeatures none(CpuFeatures{});
    EXPECT_EQ(ResolveInferPrecision("auto", "bf16", DeviceKind::kCpu, &info).value(),
              Precision::kFp32);
    EXPECT_NE(info.find("running fp32"), std::string::npos) << info;
  }
  EXPECT_FALSE(ResolveInferPrecision("auto", "half", DeviceKind::kCpu, &info).ok())
      << "a model's recorded precision is checked";
  // CUDA: auto is fp32 for training and generation; bf16 only when asked.
  EXPECT_EQ(ResolvePrecision("auto", DeviceKind::kCuda, &info).value(), Precision::kFp32);
  EXPECT_EQ(ResolvePrecision("bf16", DeviceKind::kCuda, &info).value(), Precision::kBf16);
  EXPECT_EQ(ResolveInferPrecision("auto", "bf16", DeviceKind::kCuda, &info).value(),
            Precision::kFp32);
  EXPECT_EQ(ResolveInferPrecision("bf16", "fp32", DeviceKind::kCuda, &info).value(),
            Precision::kBf16);
}

TEST(Precision, DetectsVendor) {
  // This machine's CPUID vendor string agrees with /proc/cpuinfo.
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (f == nullptr) GTEST_SKIP() << "no /proc/cpuinfo";
  char line[512];
  bool intel = false, found = false;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "vendor_id", 9) == 0) {
      intel = std::strstr(line, "GenuineIntel") != nullptr;
      found = true;
      break;
    }
  std::fclose(f);
  if (!found) GTEST_SKIP() << "no vendor_id in /proc/cpuinfo";
  EXPECT_EQ(DetectCpuFeatures().intel, intel);
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(cpu::ToBf16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(cpu::FromBf16(cpu::ToBf16(1.0f + 1.0f / 256)), 1.0f);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even (1 + 2^-6).
  EXPECT_EQ(cpu::FromBf16(cpu::ToBf16(1.0f + 3.0f / 256)), 1.0f + 1.0f / 64);
  EXPECT_TRUE(std::isnan(cpu::FromBf16(cpu::ToBf16(NAN))));
  EXPECT_EQ(cpu::FromBf16(cpu::ToBf16(INFINITY)), INFINITY);
  // The vector form (AVX512_BF16 where present) rounds as the scalar one.
  std::vector<float> x(1000);
  Philox rng(3, 4);
  for (auto& v : x) v = (rng.Uniform() - 0.5f) * 1e3f;
  std::vector<uint16_t> h(x.size());
  cpu::ToBf16(x.data(), x.size(), h.data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(h[i], cpu::ToBf16(x[i])) << i;
}

// bf16 GEMM = the exact product of the rounded operands, summed in fp32:
// against a double reference of the ROUNDED operands the error is fp32
// accumulation only (|err| <= K * 2^-23 * sum |a||b|, far below bf16's 2^-9).
TEST(Bf16, GemmIsExactProductsWithFp32Accumulation) {
  if (!HaveBf16()) GTEST_SKIP() << "no AVX512_BF16 / AMX";
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const int m = 37, n = 45, k = 70;
      std::vector<float> a(m * k), b(k * n), c(m * n, 0.5f);
      Philox rng(ta * 2 + tb, 1);
      for (auto& v : a) v = rng.Uniform() - 0.5f;
      for (auto& v : b) v = rng.Uniform() - 0.5f;
      const int lda = ta ? m : k, ldb = tb ? k : n;
      cpu::MixedGemmSerial(ta, tb, m, n, k, 1.0f, a.data(), lda, b.data(), nullptr, ldb, 1.0f,
                           c.data(), n);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double ref = 0.5, mag = 0;
          for (int p = 0; p < k; ++p) {
            const double x = cpu::FromBf16(cpu::ToBf16(ta ? a[p * lda + i] : a[i * lda + p]));
            const double y = cpu::FromBf16(cpu::ToBf16(tb ? b[j * ldb + p] : b[p * ldb + j]));
            ref += x * y;
            mag += std::fabs(x * y);
          }
          ASSERT_NEAR(c[i * n + j], ref, 1e-6 * (mag + 1)) << ta << tb << " " << i << "," << j;
        }
    }
}

Batch RandomBatch(int B, int T, int V, uint64_t seed) {
  return testing::RandomBatch(B, T, V, seed, 99);
}

NetworkSpec Spec(Architecture a, int H) {
  NetworkSpec s;
  s.architecture = a;
  s.vocab_size = 29;
  s.embedding_dim = 24;
  s.rnn_units = H;
  s.num_layers = 2;
  s.dropout_rate = 0.2f;
  return s;
}

// Glorot init plus random biases (so that every bias path carries signal).
void RandomParams(const NetworkSpec& spec, uint64_t seed, float* w) {
  InitParams(spec, "glorot_uniform", seed, w);
  Philox rng(seed, 5);
  for (const auto& t : ParamLayout::For(spec).tensors) {
    if (t.name.find(".b") == std::string::npos) continue;  // dense.b, <arch>N.b
    for (size_t i = 0; i < t.size(); ++i) w[t.offset + i] += 0.5f * (rng.Uniform() - 0.5f);
  }
}

double RelErr(const float* x, const float* ref, size_t n) {
  double d = 0, r = 0;
  for (size_t i = 0; i < n; ++i) {
    d += double(x[i] - ref[i]) * (x[i] - ref[i]);
    r += double(ref[i]) * ref[i];
  }
  return std::sqrt(d / std::max(r, 1e-30));
}

class Bf16Step : public ::testing::TestWithParam<Architecture> {};

// One training step in bf16 against the fp32 oracle on the same weights,
// batch and dropout masks, op by op: the forward logits, the loss, and the
// gradient of every parameter tensor (embedding, each layer's Wx, Wh, b,
// dense). bf16 rounds each GEMM operand to 8 significant bits (relative error
// <= 2^-9 = 0.2%); the stated tolerances (relative RMS error over the
// tensor): logits 1.5%, each gradient tensor 2%, the mean loss 1e-4.
// Measured on Zen 4: logits 0.37-0.46%, gradient tensors 0.29-0.47% (dense.b
// 1e-5), loss 2e-7..1e-6.
TEST_P(Bf16Step, MatchesFp32OracleOpByOp) {
  if (!HaveBf16()) GTEST_SKIP() << "no AVX512_BF16 / AMX";
  // 32: 16-unit blocks (the lstm's streaming step); 20: one block of 20 units;
  // without dropout the layer inputs are the layers' h (no dropout pass).
  for (auto [H, dropout] : {std::pair{32, 0.2f}, {20, 0.2f}, {32, 0.0f}}) {
    NetworkSpec spec = Spec(GetParam(), H);
    spec.dropout_rate = dropout;
    const int B = 6, T = 12, V = spec.vocab_size;
    auto f32 = cpu::NewCpuTrainBackend(spec, B, T, Precision::kFp32);
    auto b16 = cpu::NewCpuTrainBackend(spec, B, T, Precision::kBf16);
    EXPECT_EQ(b16->precision(), Precision::kBf16);
    const ParamLayout& lay = f32->layout();
    std::vector<float> w(lay.total);
    RandomParams(spec, 5, w.data());
    f32->SetParams(w.data());
    b16->SetParams(w.data());
    const Batch batch = RandomBatch(B, T, V, 7);
    std::vector<float> l32(size_t(B) * T * V), l16(l32.size());
    f32->ForwardLogits(batch, l32.data());
    b16->ForwardLogits(batch, l16.data());
    EXPECT_LT(RelErr(l16.data(), l32.data(), l32.size()), 1.5e-2) << "logits H=" << H;
    for (int threads : {1, 2}) {
      f32->SetThreads(threads);
      b16->SetThreads(threads);
      const StepStats s32 = f32->Step(batch, true, 11);
      const StepStats s16 = b16->Step(batch, true, 11);
      EXPECT_NEAR(s16.loss_sum / s16.count, s32.loss_sum / s32.count,
                  1e-4 * s32.loss_sum / s32.count);
      std::vector<float> g32(lay.total), g16(lay.total);
      f32->GetGrads(g32.data());
      b16->GetGrads(g16.data());
      for (const auto& t : lay.tensors) {
        const double e = RelErr(g16.data() + t.offset, g32.data() + t.offset, t.size());
        EXPECT_LT(e, 2e-2) << t.name << " H=" << H << " threads=" << threads;
      }
    }
  }
}

// The same at the bench's layer shapes (embedding and units 256: 16 unit
// blocks, several K blocks of the weight-gradient GEMMs' blocked dZ), one
// thread, an even and an odd batch (the odd one takes the plain dZ path).
TEST_P(Bf16Step, MatchesFp32OracleAtBenchShapes) {
  if (!HaveBf16()) GTEST_SKIP() << "no AVX512_BF16 / AMX";
  NetworkSpec spec = Spec(GetParam(), 256);
  spec.embedding_dim = 256;
  spec.vocab_size = 69;
  for (const int B : {64, 33}) {
    const int T = 40;
    auto f32 = cpu::NewCpuTrainBackend(spec, B, T, Precision::kFp32);
    auto b16 = cpu::NewCpuTrainBackend(spec, B, T, Precision::kBf16);
    const ParamLayout& lay = f32->layout();
    std::vector<float> w(lay.total);
    RandomParams(spec, 5, w.data());
    f32->SetParams(w.data());
    b16->SetParams(w.data());
    f32->SetThreads(1);
    b16->SetThreads(1);
    const Batch batch = RandomBatch(B, T, spec.vocab_size, 7);
    f32->Step(batch, true, 11);
    b16->Step(batch, true, 11);
    std::vector<float> g32(lay.total), g16(lay.total);
    f32->GetGrads(g32.data());
    b16->GetGrads(g16.data());
    for (const auto& t : lay.tensors) {
      const double e = RelErr(g16.data() + t.offset, g32.data() + t.offset, t.size());
      EXPECT_LT(e, 2e-2) << t.name << " B=" << B;
    }
  }
}

// DP's per-example clipping in bf16: norms within 2% of fp32's, and the
// clipped sum within the gradient tolerance.
TEST_P(Bf16Step, PerExampleClipNormsMatchFp32) {
  if (!HaveBf16()) GTEST_SKIP() << "no AVX512_BF16 / AMX";
  NetworkSpec spec = Spec(GetParam(), 32);
  spec.dropout_rate = 0;
  // B = 5 and 6 (R = 45 and 54): the lstm's blocked (VNNI) dZ copy with an odd
  // and an even row count.
  for (const int B : {5, 6}) {
    const int T = 9;
    auto f32 = cpu::NewCpuTrainBackend(spec, B, T, Precision::kFp32);
    auto b16 = cpu::NewCpuTrainBackend(spec, B, T, Precision::kBf16);
    std::vector<float> w(f32->layout().total);
    RandomParams(spec, 9, w.data());
    f32->SetParams(w.data());
    b16->SetParams(w.data());
    const Batch batch = RandomBatch(B, T, spec.vocab_size, 3);
    std::vector<float> n32, n16;
    PerExampleClip c32{0.05f, &n32}, c16{0.05f, &n16};
    f32->Step(batch, true, 1, &c32);
    b16->Step(batch, true, 1, &c16);
    ASSERT_EQ(n16.size(), size_t(B));
    for (int b = 0; b < B; ++b) EXPECT_NEAR(n16[b], n32[b], 2e-2 * n32[b]) << b;
    std::vector<float> g32(w.size()), g16(w.size());
    f32->GetGrads(g32.data());
    b16->GetGrads(g16.data());
    EXPECT_LT(RelErr(g16.data(), g32.data(), w.size()), 5e-2) << "B=" << B;
  }
}

// bf16 clip path with no example clipped (s = 1) against the plain bf16 path:
// both round the same dZ and layer inputs for their weight-gradient GEMMs, so
// with unit weights (each example's mean over T tokens, against the batch
// mean) the clip path's gradient is B times the plain one, to the dense
// layer's fp32-vs-bf16 difference. Odd and even R: every row of the blocked
// dZ copy counts.
TEST_P(Bf16Step, UnclippedClipPathIsBTimesThePlainPath) {
  if (!HaveBf16()) GTEST_SKIP() << "no AVX512_BF16 / AMX";
  NetworkSpec spec = Spec(GetParam(), 32);
  spec.dropout_rate = 0;
  for (const int B : {5, 6}) {
    const int T = 9;
    auto plain = cpu::NewCpuTrainBackend(spec, B, T, Precision::kBf16);
    auto clipped = cpu::NewCpuTrainBackend(spec, B, T, Precision::kBf16);
    std::vector<float> w(plain->layout().total);
    RandomParams(spec, 9, w.data());
    plain->SetParams(w.data());
    clipped->SetParams(w.data());
    const Batch batch = RandomBatch(B, T, spec.vocab_size, 3);
    PerExampleClip clip{1e9f, nullptr};
    plain->Step(batch, true, 1);
    clipped->Step(batch, true, 1, &clip);
    std::vector<float> gp(w.size()), gc(w.size());
    plain->GetGrads(gp.data());
    clipped->GetGrads(gc.data());
    for (float& v : gp) v *= float(B);
    for (const auto& t : plain->layout().tensors) {
      const double e = RelErr(gc.data() + t.offset, gp.data() + t.offset, t.size());
      EXPECT_LT(e, 1e-2) << t.name << " B=" << B;
    }
  }
}

// The DP sensitivity bound: one example clipped to C gives a gradient of norm
// at most C. fp32: exactly C (to fp32 rounding). bf16: the weight-gradient
// GEMMs round their operands, and the clip factor covers the rounding bound,
// so the norm is at most C and a little below it (docs/privacy.md). A batch
// of B copies of one example (B = 1 and 2: odd and even rows in the blocked dZ) sums B
// equal clipped gradients, so the bound is B C.
TEST_P(Bf16Step, ClippedExampleHasAtMostTheClipNorm) {
  if (!HaveBf16()) GTEST_SKIP() << "no AVX512_BF16 / AMX";
  NetworkSpec spec = Spec(GetParam(), 32);
  spec.dropout_rate = 0;
  const int T = 9;
  const float C = 0.05f;
  for (const int B : {1, 2}) {
    for (Precision p : {Precision::kFp32, Precision::kBf16}) {
      auto be = cpu::NewCpuTrainBackend(spec, B, T, p);
      std::vector<float> w(be->layout().total);
      RandomParams(spec, 9, w.data());
      be->SetParams(w.data());
      for (uint64_t seed : {3, 4, 5}) {
        const Batch one = RandomBatch(1, T, spec.vocab_size, seed);
        Batch batch = one;
        batch.batch = B;
        for (int b = 1; b < B; ++b) {
          batch.inputs.insert(batch.inputs.end(), one.inputs.begin(), one.inputs.end());
          batch.targets.insert(batch.targets.end(), one.targets.begin(), one.targets.end());
        }
        std::vector<float> norms;
        PerExampleClip clip{C, &norms};
        be->Step(batch, true, 1, &clip);
        ASSERT_EQ(norms.size(), size_t(B));
        ASSERT_GT(norms[0], C) << "the example must be clipped";
        std::vector<float> g(w.size());
        be->GetGrads(g.data());
        double n2 = 0;
        for (float v : g) n2 += double(v) * v;
        const double n = std::sqrt(n2), bound = double(B) * C;
        if (p == Precision::kFp32) {
          EXPECT_NEAR(n, bound, bound * 2e-5) << "seed " << seed << " B=" << B;
        } else {
          EXPECT_LE(n, bound * (1 + 2e-6)) << "seed " << seed << " B=" << B;
          EXPECT_GT(n, bound * 0.9) << "seed " << seed << " B=" << B;
        }
      }
    }
  }
}

// Each example's own clip factor in bf16, in batches of B = 5 and 6 (2
// layers: layer 0's weight gradients scale the GEMMs' A side, layer 1's the dz
// rows): the clipped sum against sum_b min(1, C / n_b) g_b of per-example fp32
// runs, with C the smallest norm, so that the factors spread over (0, 1]. bf16
// rounds the operands (~1%) and its factors are a little smaller (the rounding
// bound, ClipStep): 3% per tensor (measured < 2.7%), where a factor applied to
// another example's rows is off by the factors' spread (30-40%).
TEST_P(Bf16Step, ClippedSumUsesEachExamplesFactor) {
  if (!HaveBf16()) GTEST_SKIP() << "no AVX512_BF16 / AMX";
  NetworkSpec spec = Spec(GetParam(), 32);
  spec.dropout_rate = 0;
  const int T = 9;
  for (const int B : {5, 6}) {
    auto be = cpu::NewCpuTrainBackend(spec, B, T, Precision::kBf16);
    auto f32 = cpu::NewCpuTrainBackend(spec, 1, T, Precision::kFp32);
    const auto& L = be->layout();
    std::vector<float> w(L.total);
    RandomParams(spec, 9, w.data());
    be->SetParams(w.data());
    f32->SetParams(w.data());
    // Lengths 1, 3, 5, ... (weight 0 after): the shorter, the larger the norm.
    const Batch batch = testing::RandomBatch(B, T, spec.vocab_size, 7, 99, [T](int i, Philox&) {
      return i % T < 1 + 2 * (i / T) ? 1.0f : 0.0f;
    });
    std::vector<std::vector<float>> per(B, std::vector<float>(L.total));
    std::vector<double> n32(B);
    for (int b = 0; b < B; ++b) {
      Batch one;
      one.batch = 1;
      one.steps = T;
      one.inputs.assign(batch.inputs.begin() + b * T, batch.inputs.begin() + (b + 1) * T);
      one.targets.assign(batch.targets.begin() + b * T, batch.targets.begin() + (b + 1) * T);
      one.weights.assign(batch.weights.begin() + b * T, batch.weights.begin() + (b + 1) * T);
      f32->Step(one, true, 1);
      f32->GetGrads(per[b].data());
      double q = 0;
      for (float v : per[b]) q += double(v) * v;
      n32[b] = std::sqrt(q);
    }
    const double lo = *std::min_element(n32.begin(), n32.end());
    const double hi = *std::max_element(n32.begin(), n32.end());
    ASSERT_GT(hi, 1.5 * lo) << "the factors do not spread";
    std::vector<float> expect(L.total, 0.0f);
    for (int b = 0; b < B; ++b) {
      const double s = std::min(1.0, lo / n32[b]);
      for (size_t i = 0; i < L.total; ++i) expect[i] += float(s * per[b][i]);
    }
    // Two threads: the recurrence's unit blocks (H = 32: two) split between them.
    for (int threads : {1, 2}) {
      be->SetThreads(threads);
      PerExampleClip clip{float(lo), nullptr};
      be->Step(batch, true, 1, &clip);
      std::vector<float> got(L.total);
      be->GetGrads(got.data());
      for (const auto& t : L.tensors) {
        const double e = RelErr(got.data() + t.offset, expect.data() + t.offset, t.size());
        EXPECT_LT(e, 3e-2) << t.name << " B=" << B << " threads=" << threads;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, Bf16Step, ::testing::ValuesIn(kAllArchitectures),
                         [](const auto& i) { return std::string(ArchitectureName(i.param)); });

// ---- inference fast path ----

struct InferCase {
  Architecture arch;
  Precision precision;
};

class FastInfer : public ::testing::TestWithParam<InferCase> {};

// Steps `fast` and `plain` backends (same weights) through the same tokens
// with rows restricted to random id ranges (some rows full, some none) and
// checks the ranged logits of the fast path against the plain path's.
TEST_P(FastInfer, MatchesPlainPathWithinTolerance) {
  const InferCase c = GetParam();
  if (c.precision == Precision::kBf16 && !HaveBf16()) GTEST_SKIP() << "no AVX512_BF16 / AMX";
  for (int layers : {1, 2}) {
    NetworkSpec spec = Spec(c.arch, 48);
    spec.num_layers = layers;
    const int V = spec.vocab_size, slots = 16;
    const ParamLayout lay = ParamLayout::For(spec);
    cpu::Buffer<float> params(lay.total);
    RandomParams(spec, 21, params.data());
    cpu::InferOptions fast{c.precision, true}, plain{c.precision, false};
    auto f = cpu::NewCpuInferBackend(spec, params.data(), slots, 1, fast);
    auto p = cpu::NewCpuInferBackend(spec, params.data(), slots, 1, plain);
    std::vector<int> ids(slots);
    std::vector<int32_t> tok(slots), lo(slots), hi(slots);
    std::vector<float> lf(size_t(slots) * V), lp(lf.size());
    Philox rng(layers, 17);
    // bf16: both paths round the same operands except layer 0's x side (the
    // table is fp32), so they agree to bf16 rounding; fp32: to fp32 rounding.
    const double tol = c.precision == Precision::kBf16 ? 2e-2 : 1e-5;
    for (int step = 0; step < 12; ++step) {
      for (int i = 0; i < slots; ++i) {
        ids[i] = i;
        tok[i] = int32_t(rng.Below(V));
        const int kind = int(rng.Below(4));  // 0: full, 1: none, else a range
        lo[i] = kind == 0 ? 0 : int32_t(rng.Below(V));
        hi[i] = kind == 0 ? V : kind == 1 ? lo[i] : lo[i] + int32_t(rng.Below(V - lo[i] + 1));
      }
      f->StepRange(ids.data(), tok.data(), slots, lo.data(), hi.data(), lf.data());
      p->Step(ids.data(), tok.data(), slots, lp.data());
      for (int i = 0; i < slots; ++i)
        for (int v = lo[i]; v < hi[i]; ++v)
          ASSERT_NEAR(lf[size_t(i) * V + v], lp[size_t(i) * V + v], tol)
              << "layers " << layers << " step " << step << " row " << i << " id " << v;
    }
  }
}

// A row's logits do not depend on the other rows' ranges or on its position
// in the batch (what keeps generation independent of the worker count), bit
// for bit, in either precision.
TEST_P(FastInfer, RowIndependentOfOtherRowsAndPosition) {
  const InferCase c = GetParam();
  if (c.precision == Precision::kBf16 && !HaveBf16()) GTEST_SKIP() << "no AVX512_BF16 / AMX";
  const NetworkSpec spec = Spec(c.arch, 32);
  const int V = spec.vocab_size, slots = 24;
  const ParamLayout lay = ParamLayout::For(spec);
  cpu::Buffer<float> params(lay.total);
  RandomParams(spec, 4, params.data());
  cpu::InferOptions o{c.precision, true};
  auto a = cpu::NewCpuInferBackend(spec, params.data(), slots, 1, o);
  auto b = cpu::NewCpuInferBackend(spec, params.data(), slots, 1, o);
  std::vector<int> ia(slots), ib(slots);
  std::vector<int32_t> ta(slots), tb(slots), la(slots), ha(slots), lb(slots), hb(slots);
  std::vector<float> xa(size_t(slots) * V), xb(xa.size());
  for (int step = 0; step < 6; ++step) {
    for (int i = 0; i < slots; ++i) {
      // Backend a: slot i at row i; b: slot i at row slots-1-i. Slot 5 keeps
      // the range [3, 9) in both; the other rows' ranges differ between a, b.
      ia[i] = i;
      ib[slots - 1 - i] = i;
      ta[i] = tb[slots - 1 - i] = int32_t((i * 7 + step) % V);
      la[i] = i == 5 ? 3 : 0;
      ha[i] = i == 5 ? 9 : (i % 2 ? V : 0);
      lb[slots - 1 - i] = i == 5 ? 3 : 0;
      hb[slots - 1 - i] = i == 5 ? 9 : V;
    }
    a->StepRange(ia.data(), ta.data(), slots, la.data(), ha.data(), xa.data());
    b->StepRange(ib.data(), tb.data(), slots, lb.data(), hb.data(), xb.data());
    for (int v = 3; v < 9; ++v)
      ASSERT_EQ(xa[size_t(5) * V + v], xb[size_t(slots - 1 - 5) * V + v]) << step << " " << v;
    for (int v = 0; v < V; ++v)  // a full row (slot 1 in a, row slots-2 in b)
      ASSERT_EQ(xa[size_t(1) * V + v], xb[size_t(slots - 2) * V + v]) << step << " " << v;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FastInfer,
    ::testing::Values(InferCase{Architecture::kLstm, Precision::kFp32},
                      InferCase{Architecture::kLstm, Precision::kBf16},
                      InferCase{Architecture::kGru, Precision::kFp32},
                      InferCase{Architecture::kGru, Precision::kBf16}),
    [](const auto& i) {
      return std::string(ArchitectureName(i.param.arch)) + "_" + PrecisionName(i.param.precision);
    });

}  // namespace
}  // namespace ds
