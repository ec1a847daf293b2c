// Training and inference throughput of the CPU backend on the default network
// (Emb 256, 2 x LSTM 256, dropout 0.2, T = 100, B = 64, RMSprop) with random
// tokens, against the GEMM peak measured in the same run.
//
//   train_bench [--vocab 100,5000] [--steps 6] [--threads N] [--clip C] [--json]
//
// --clip C trains with PerExampleClip (the DP-SGD path) at l2 norm C.
//
// Prints per vocab: training tokens/s (Step + ApplyOptimizer), achieved
// GFLOP/s (TrainFlopsPerToken), fraction of the measured GEMM peak, and
// inference tokens/s for 64 slots (threads N) and for n = 1 / 8 slots on one
// thread (the generation worker setting).
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/buffer.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gemm.h"
#include "model/network.h"
#include "util/rng.h"

namespace {

double CpuNow() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double GemmPeak(int threads) {
  const int n = 2048;
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  double best = 0;
  for (int thr : {1, threads}) {
    ds::cpu::SgemmThreads(thr, false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                          c.data(), n);
    for (int rep = 0; rep < 3; ++rep) {
      double t0 = Now();
      ds::cpu::SgemmThreads(thr, false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                            c.data(), n);
      best = std::max(best, 2.0 * n * n * n / (Now() - t0) * 1e-9);
    }
  }
  return best;
}

struct Result {
  int vocab;
  double train_tps, train_gflops, train_cpu_tps, infer64_tps, infer8_tps, infer1_tps;
};

double InferTps(const ds::NetworkSpec& spec, const float* params, int n, int threads) {
  auto inf = ds::cpu::NewCpuInferBackend(spec, params, 64, threads);
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
  double t0 = Now(), t;
  do {
    step();
    ++iters;
    t = Now() - t0;
  } while (t < 0.5);
  return double(iters) * n / t;
}

Result Run(int vocab, int steps, int threads, float clip_norm) {
  ds::NetworkSpec spec;
  spec.vocab_size = vocab;
  const int B = 64, T = 100;
  auto be = ds::cpu::NewCpuTrainBackend(spec, B, T);
  be->SetThreads(threads);
  ds::cpu::Buffer<float> params(be->layout().total);
  ds::InitParams(spec, "glorot_uniform", 1, params.data());
  be->SetParams(params.data());
  ds::Philox rng(7, 7);
  ds::Batch batch;
  batch.batch = B;
  batch.steps = T;
  for (int i = 0; i < B * T; ++i) {
    batch.inputs.push_back(int32_t(rng.Below(vocab)));
    batch.targets.push_back(int32_t(rng.Below(vocab)));
  }
  ds::OptimizerConfig opt;
  int64_t step = 0;
  ds::PerExampleClip clip;
  clip.l2_norm_clip = clip_norm;
  auto train_step = [&] {
    be->Step(batch, true, uint64_t(step), clip_norm > 0 ? &clip : nullptr);
    be->ApplyOptimizer(opt, ++step);
  };
  train_step();
  train_step();
  double t0 = Now(), c0 = CpuNow();
  for (int i = 0; i < steps; ++i) train_step();
  double dt = Now() - t0, dc = CpuNow() - c0;
  Result r;
  r.vocab = vocab;
  r.train_tps = double(steps) * B * T / dt;
  r.train_gflops = r.train_tps * ds::TrainFlopsPerToken(spec) * 1e-9;
  // Tokens per CPU-second x threads: what the run would give with the cores to
  // itself (meaningful on a loaded machine; equals train_tps on a quiet one).
  r.train_cpu_tps = double(steps) * B * T / (dc / threads);
  be->GetParams(params.data());
  r.infer64_tps = InferTps(spec, params.data(), 64, threads);
  r.infer8_tps = InferTps(spec, params.data(), 8, 1);
  r.infer1_tps = InferTps(spec, params.data(), 1, 1);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> vocabs = {100, 5000};
  int steps = 6, threads = omp_get_max_threads();
  bool json = false;
  float clip = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--vocab" && i + 1 < argc) {
      vocabs.clear();
      for (char* p = argv[++i]; *p;) {
        vocabs.push_back(int(std::strtol(p, &p, 10)));
        if (*p == ',') ++p;
      }
    } else if (a == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--clip" && i + 1 < argc) {
      clip = float(std::atof(argv[++i]));
    } else if (a == "--json") {
      json = true;
    } else {
      std::fprintf(stderr,
                   "usage: train_bench [--vocab 100,5000] [--steps 6] [--threads N] [--clip C] "
                   "[--json]\n");
      return 2;
    }
  }
  const double peak = GemmPeak(threads);
  if (!json) {
    std::printf("datasynth cpu backend, %d threads, GEMM %s, measured GEMM peak %.1f GFLOP/s\n",
                threads, ds::cpu::GemmImplName(ds::cpu::CurrentGemmImpl()), peak);
  }
  for (int v : vocabs) {
    Result r = Run(v, steps, threads, clip);
    if (json) {
      std::printf(
          "{\"engine\": \"datasynth-cpu\", \"vocab\": %d, \"threads\": %d, "
          "\"train_tokens_per_s\": %.0f, \"train_gflops\": %.1f, \"gemm_peak_gflops\": %.1f, "
          "\"peak_fraction\": %.3f, \"train_cpu_tokens_per_s\": %.0f, "
          "\"infer64_tokens_per_s\": %.0f, "
          "\"infer8_1thr_tokens_per_s\": %.0f, \"infer1_1thr_tokens_per_s\": %.0f}\n",
          v, threads, r.train_tps, r.train_gflops, peak, r.train_gflops / peak, r.train_cpu_tps,
          r.infer64_tps, r.infer8_tps, r.infer1_tps);
    } else {
      std::printf(
          "V=%-5d train %8.0f tokens/s  %6.1f GFLOP/s  (%4.1f%% of peak; per CPU-time %8.0f "
          "tokens/s)   infer 64 slots %8.0f tokens/s, 1 thread: n=8 %7.0f, n=1 %7.0f tokens/s\n",
          v, r.train_tps, r.train_gflops, 100 * r.train_gflops / peak, r.train_cpu_tps,
          r.infer64_tps, r.infer8_tps, r.infer1_tps);
    }
    std::fflush(stdout);
  }
  return 0;
}
