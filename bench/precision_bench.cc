// fp32 vs bf16 (docs/precision.md) on ONE thread (pin it: taskset -c N), the
// two sides alternating in one run:
//   1. the GEMM peak of each precision (2048^3);
//   2. every GEMM shape of one training step of the network, standalone,
//      as GFLOP/s and fraction of its precision's peak, and the FLOP-weighted
//      mean over the step ("the step's GEMMs at X% of the bf16 peak");
//   3. whole training steps (Step + ApplyOptimizer): tokens/s by wall and by
//      CPU time, GFLOP/s and fraction of the peak;
//   4. inference tokens/s for 64 slots, plain path and fast path (layer-0
//      table; all logits computed, as for a model without id ranges).
//
//   precision_bench [--vocab 69] [--embedding 256] [--units 256] [--layers 2]
//                   [--batch 64] [--steps 100] [--iters 6] [--rounds 2]
//                   [--only 0|1|2|3]  (0: all; else one part: 1 GEMMs, 2 training,
//                                      3 inference; a part that needs the peaks measures them)
//                   [--train-precision 0|1|2]  (0: both; 1: fp32 only; 2: bf16 only;
//                                      for profiling one side: DATASYNTH_CPU_PROFILE)
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cpu/buffer.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gemm.h"
#include "backend/precision.h"
#include "model/network.h"
#include "util/rng.h"

namespace {

using ds::Precision;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double CpuNow() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

struct Shape {
  const char* what;
  bool ta;
  int m, n, k;
  double count;  // calls per training step
};

// GFLOP/s of one shape on one thread by CPU time (robust on a shared machine).
double GemmRate(const Shape& s, Precision p, double min_s = 0.15) {
  std::vector<float> a(size_t(s.m) * s.k), b(size_t(s.k) * s.n), c(size_t(s.m) * s.n);
  ds::Philox rng(1, 2);
  for (auto& x : a) x = rng.Uniform() - 0.5f;
  for (auto& x : b) x = rng.Uniform() - 0.5f;
  std::vector<uint16_t> a16(a.size()), b16(b.size());
  ds::cpu::ToBf16(a.data(), a.size(), a16.data());
  ds::cpu::ToBf16(b.data(), b.size(), b16.data());
  const int lda = s.ta ? s.m : s.k;
  auto run = [&] {
    if (p == Precision::kBf16) {
      ds::cpu::BgemmSerial(s.ta, false, s.m, s.n, s.k, 1.0f, a16.data(), lda, b16.data(), s.n,
                           0.0f, c.data(), s.n);
    } else {
      ds::cpu::SgemmSerial(s.ta, false, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), s.n, 0.0f,
                           c.data(), s.n);
    }
  };
  run();
  int iters = 0;
  const double t0 = CpuNow();
  double t;
  do {
    run();
    ++iters;
    t = CpuNow() - t0;
  } while (t < min_s);
  return 2.0 * s.m * s.n * s.k * iters / t * 1e-9;
}

// The GEMMs of one CPU training step (train_cpu.cc) for one thread.
std::vector<Shape> StepShapes(const ds::NetworkSpec& sp, int B, int T) {
  const int R = B * T, H = sp.rnn_units, G = 4 * H, V = sp.vocab_size;
  const int chunk = std::clamp((1 << 20) / std::max(V, 1), 64, 2048);
  const double chunks = double(R) / std::min(chunk, R);
  std::vector<Shape> s;
  for (int l = 0; l < sp.num_layers; ++l) {
    const int in = l == 0 ? sp.embedding_dim : H;
    s.push_back({"fwd X Wx", false, R, G, in, 1});
    s.push_back({"fwd h Wh (per t)", false, B, G, H, double(T - 1)});
    s.push_back({"bwd dz WhT (per t)", false, B, H, G, double(T - 1)});
    s.push_back({"bwd dX = dZ WxT", false, R, in, G, 1});
    s.push_back({"bwd dWx = X^T dZ", true, in, G, R, 1});
    s.push_back({"bwd dWh = H^T dZ", true, H, G, R - B, 1});
  }
  const int rows = std::min(chunk, R);
  s.push_back({"dense fwd (chunk)", false, rows, V, H, chunks});
  s.push_back({"dense dW (chunk)", true, H, V, rows, chunks});
  s.push_back({"dense dX (chunk)", false, rows, H, V, chunks});
  return s;
}

struct StepRate {
  double wall_tps, cpu_tps;
};

StepRate TrainRate(const ds::NetworkSpec& spec, int B, int T, int iters, Precision p) {
  auto be = ds::cpu::NewCpuTrainBackend(spec, B, T, p);
  be->SetThreads(1);
  ds::cpu::Buffer<float> w(be->layout().total);
  ds::InitParams(spec, "glorot_uniform", 1, w.data());
  be->SetParams(w.data());
  ds::Philox rng(7, 7);
  ds::Batch batch;
  batch.batch = B;
  batch.steps = T;
  for (int i = 0; i < B * T; ++i) {
    batch.inputs.push_back(int32_t(rng.Below(spec.vocab_size)));
    batch.targets.push_back(int32_t(rng.Below(spec.vocab_size)));
  }
  ds::OptimizerConfig opt;
  int64_t step = 0;
  auto one = [&] {
    be->Step(batch, true, uint64_t(step), nullptr);
    be->ApplyOptimizer(opt, ++step);
  };
  one();
  one();
  const double t0 = Now(), c0 = CpuNow();
  for (int i = 0; i < iters; ++i) one();
  const double tokens = double(iters) * B * T;
  return {tokens / (Now() - t0), tokens / (CpuNow() - c0)};
}

double InferRate(const ds::NetworkSpec& spec, const float* params, Precision p, bool fast) {
  const int n = 64;
  ds::cpu::InferOptions o{p, fast};
  auto inf = ds::cpu::NewCpuInferBackend(spec, params, n, 1, o);
  std::vector<int> ids(n);
  std::vector<int32_t> tok(n);
  std::vector<float> logits(size_t(n) * spec.vocab_size);
  for (int i = 0; i < n; ++i) ids[i] = i;
  ds::Philox rng(3, 3);
  auto step = [&] {
    for (int i = 0; i < n; ++i) tok[i] = int32_t(rng.Below(spec.vocab_size));
    inf->Step(ids.data(), tok.data(), n, logits.data());
  };
  for (int i = 0; i < 20; ++i) step();
  int iters = 0;
  const double t0 = CpuNow();
  double t;
  do {
    step();
    ++iters;
    t = CpuNow() - t0;
  } while (t < 0.4);
  return double(iters) * n / t;
}

int Arg(int argc, char** argv, const char* name, int def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == name) return std::atoi(argv[i + 1]);
  return def;
}


void GemmTable(const ds::NetworkSpec& spec, int B, int T, const double* peak,
               const Precision* sides) {
  std::printf("\n%-20s %5s %5s %5s %6s   %8s %6s   %8s %6s\n", "step GEMM", "M", "N", "K", "calls",
              "fp32", "%peak", "bf16", "%peak");
  double flops = 0, sec[2] = {0, 0};
  for (const Shape& s : StepShapes(spec, B, T)) {
    double g[2];
    for (int i = 0; i < 2; ++i) g[i] = GemmRate(s, sides[i]);
    const double fl = 2.0 * s.m * s.n * s.k * s.count;
    flops += fl;
    for (int i = 0; i < 2; ++i) sec[i] += fl / (g[i] * 1e9);
    std::printf("%-20s %5d %5d %5d %6.0f   %8.1f %5.0f%%   %8.1f %5.0f%%\n", s.what, s.m, s.n, s.k,
                s.count, g[0], 100 * g[0] / peak[0], g[1], 100 * g[1] / peak[1]);
  }
  for (int i = 0; i < 2; ++i)
    std::printf("step GEMMs, FLOP-weighted, %s: %.1f GFLOP/s = %.0f%% of the %s peak\n",
                ds::PrecisionName(sides[i]), flops / sec[i] * 1e-9,
                100 * flops / sec[i] * 1e-9 / peak[i], ds::PrecisionName(sides[i]));
  std::printf("\n");
}

// which: 0 both sides (alternating), 1 fp32 only, 2 bf16 only.
void TrainTable(const ds::NetworkSpec& spec, int B, int T, int iters, int rounds,
                const double* peak, const Precision* sides, int which) {
  StepRate best[2] = {};
  for (int r = 0; r < rounds; ++r)
    for (int i = 0; i < 2; ++i) {
      if (which != 0 && which != i + 1) continue;
      const StepRate x = TrainRate(spec, B, T, iters, sides[i]);
      best[i].wall_tps = std::max(best[i].wall_tps, x.wall_tps);
      best[i].cpu_tps = std::max(best[i].cpu_tps, x.cpu_tps);
    }
  const double fpt = ds::TrainFlopsPerToken(spec);
  for (int i = 0; i < 2; ++i) {
    if (which != 0 && which != i + 1) continue;
    std::printf("train %s: %8.0f tokens/s wall, %8.0f tokens per CPU-second, %6.1f GFLOP/s "
                "(CPU time) = %.0f%% of the %s peak\n",
                ds::PrecisionName(sides[i]), best[i].wall_tps, best[i].cpu_tps,
                best[i].cpu_tps * fpt * 1e-9, 100 * best[i].cpu_tps * fpt * 1e-9 / peak[i],
                ds::PrecisionName(sides[i]));
  }
  if (which == 0)
    std::printf("train bf16 / fp32: %.2fx (CPU time)\n\n", best[1].cpu_tps / best[0].cpu_tps);
}

void InferTable(const ds::NetworkSpec& spec, int rounds, const Precision* sides) {
  ds::cpu::Buffer<float> w(ds::ParamLayout::For(spec).total);
  ds::InitParams(spec, "glorot_uniform", 2, w.data());
  for (bool fast : {false, true}) {
    double t[2] = {0, 0};
    for (int r = 0; r < rounds; ++r)
      for (int i = 0; i < 2; ++i) t[i] = std::max(t[i], InferRate(spec, w.data(), sides[i], fast));
    std::printf("infer 64 slots, %s path: fp32 %8.0f tokens per CPU-second, bf16 %8.0f (%.2fx)\n",
                fast ? "fast " : "plain", t[0], t[1], t[1] / t[0]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (i + 1 >= argc || a.rfind("--", 0) != 0) {
      std::fprintf(stderr,
                   "usage: precision_bench [--vocab 69] [--embedding 256] [--units 256] "
                   "[--layers 2] [--batch 64] [--steps 100] [--iters 6] [--rounds 2] "
                   "[--only 0|1|2|3] [--train-precision 0|1|2]\n");
      return 2;
    }
  }
  omp_set_num_threads(1);
  ds::NetworkSpec spec;
  spec.vocab_size = Arg(argc, argv, "--vocab", 69);
  spec.embedding_dim = Arg(argc, argv, "--embedding", 256);
  spec.rnn_units = Arg(argc, argv, "--units", 256);
  spec.num_layers = Arg(argc, argv, "--layers", 2);
  const int B = Arg(argc, argv, "--batch", 64), T = Arg(argc, argv, "--steps", 100);
  const int iters = Arg(argc, argv, "--iters", 6), rounds = Arg(argc, argv, "--rounds", 2);
  const int only = Arg(argc, argv, "--only", 0), which = Arg(argc, argv, "--train-precision", 0);
  const ds::CpuFeatures f = ds::DetectCpuFeatures();
  std::printf("one thread; CPU avx512_bf16=%d amx_bf16=%d; network V=%d E=%d %d x LSTM %d, B=%d T=%d\n",
              f.avx512_bf16, f.amx_bf16, spec.vocab_size, spec.embedding_dim, spec.num_layers,
              spec.rnn_units, B, T);
  const Precision sides[2] = {Precision::kFp32, Precision::kBf16};
  double peak[2] = {0, 0};
  if (only != 3) {
    const Shape big{"peak", false, 2048, 2048, 2048, 1};
    for (int r = 0; r < rounds; ++r)
      for (int i = 0; i < 2; ++i) peak[i] = std::max(peak[i], GemmRate(big, sides[i], 0.4));
    std::printf("GEMM peak (2048^3, CPU time): fp32 %.1f GFLOP/s, bf16 %.1f GFLOP/s (%.2fx)\n",
                peak[0], peak[1], peak[1] / peak[0]);
  }
  if (only == 0 || only == 1) GemmTable(spec, B, T, peak, sides);
  if (only == 0 || only == 2) TrainTable(spec, B, T, iters, rounds, peak, sides, which);
  if (only == 0 || only == 3) InferTable(spec, rounds, sides);
  return 0;
}
