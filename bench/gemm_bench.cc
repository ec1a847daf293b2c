// GEMM throughput at the shapes the LSTM uses, for each implementation
// (oneDNN, OpenBLAS) and thread count (1, 2). Prints GFLOP/s; the best figure
// at the big square-ish shape is the "measured GEMM peak" that train_bench
// compares against.
//
//   gemm_bench [--quick] [--cpu-time] [--bf16]
//
// --bf16: one thread (pin it: taskset -c N), fp32 (Sgemm) against bf16
// operands with fp32 accumulation (BgemmSerial on pre-rounded operands, the
// oneDNN matmul primitive), alternating per shape; the bf16 figure at the
// 2048^3 shape is the "measured bf16 peak" (docs/precision.md).
#include <omp.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "backend/cpu/gemm.h"
#include "util/rng.h"

namespace {

struct Shape {
  const char* what;
  bool ta, tb;
  int m, n, k;
};

// With --cpu-time, "seconds" are process CPU seconds / threads: a figure that
// ignores time the threads spent descheduled on a shared, loaded machine (for
// comparing variants there; wall time is the real figure on a quiet machine).
bool g_cpu_time = false;
int g_threads = 1;
double Seconds() {
  if (g_cpu_time) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (ts.tv_sec + 1e-9 * ts.tv_nsec) / g_threads;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// GFLOP/s of C[m,n] = op(A) op(B) with `threads` threads, timed for >= min_s.
// split: 0 = the library's threading, 'm' / 'n' = SgemmSplit.
double Measure(const Shape& s, int threads, double min_s, char split = 0) {
  std::vector<float> a(size_t(s.m) * s.k), b(size_t(s.k) * s.n), c(size_t(s.m) * s.n);
  ds::Philox rng(1, 2);
  for (auto& x : a) x = rng.Uniform() - 0.5f;
  for (auto& x : b) x = rng.Uniform() - 0.5f;
  int lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
  auto run = [&] {
    if (split) {
      ds::cpu::SgemmSplit(threads, split, s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(),
                          ldb, 0.0f, c.data(), s.n);
    } else {
      ds::cpu::SgemmThreads(threads, s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb,
                            0.0f, c.data(), s.n);
    }
  };
  run();
  run();
  g_threads = threads;
  int iters = 0;
  double t0 = Seconds(), t;
  do {
    run();
    ++iters;
    t = Seconds() - t0;
  } while (t < min_s);
  return 2.0 * s.m * s.n * s.k * iters / t * 1e-9;
}

// Per-step recurrent GEMM as the network runs it: each of `threads` threads
// computes its own column block with a single-threaded call inside one
// parallel region (C[m, n/threads] per thread).
double MeasureSplit(const Shape& s, int threads, double min_s) {
  std::vector<float> a(size_t(s.m) * s.k), b(size_t(s.k) * s.n), c(size_t(s.m) * s.n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i % 7) * 0.1f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(i % 5) * 0.1f;
  int nb = s.n / threads;
  g_threads = threads;
  int iters = 0;
  double t0 = Seconds(), t;
  do {
#pragma omp parallel num_threads(threads)
    {
      int j = omp_get_thread_num();
      for (int r = 0; r < 10; ++r) {
        ds::cpu::SgemmSerial(false, false, s.m, nb, s.k, 1.0f, a.data(), s.k, b.data() + j * nb,
                             s.n, 0.0f, c.data() + j * nb, s.n);
#pragma omp barrier
      }
    }
    iters += 10;
    t = Seconds() - t0;
  } while (t < min_s);
  return 2.0 * s.m * s.n * s.k * iters / t * 1e-9;
}

// One thread, bf16 operands (rounded once, outside the timing).
double MeasureBf16(const Shape& s, double min_s) {
  std::vector<float> a(size_t(s.m) * s.k), b(size_t(s.k) * s.n), c(size_t(s.m) * s.n);
  ds::Philox rng(1, 2);
  for (auto& x : a) x = rng.Uniform() - 0.5f;
  for (auto& x : b) x = rng.Uniform() - 0.5f;
  std::vector<uint16_t> a16(a.size()), b16(b.size());
  ds::cpu::ToBf16(a.data(), a.size(), a16.data());
  ds::cpu::ToBf16(b.data(), b.size(), b16.data());
  const int lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
  auto run = [&] {
    ds::cpu::BgemmSerial(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a16.data(), lda, b16.data(), ldb, 0.0f,
                         c.data(), s.n);
  };
  run();
  run();
  g_threads = 1;
  int iters = 0;
  double t0 = Seconds(), t;
  do {
    run();
    ++iters;
    t = Seconds() - t0;
  } while (t < min_s);
  return 2.0 * s.m * s.n * s.k * iters / t * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, bf16 = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--cpu-time") == 0) g_cpu_time = true;
    if (std::strcmp(argv[i], "--bf16") == 0) bf16 = true;
  }
  double min_s = quick ? 0.1 : 0.4;
  const Shape shapes[] = {
      {"peak (square-ish)", false, false, 2048, 2048, 2048},
      {"x Wx (fwd big)", false, false, 6400, 1024, 256},
      {"h Wh (fwd step)", false, false, 64, 1024, 256},
      {"h Wh (step, 1 of 2)", false, false, 64, 512, 256},
      {"dz Wh^T (bwd step)", false, true, 64, 256, 1024},
      {"dz WhT (bwd step NN)", false, false, 64, 256, 1024},
      {"dz Wh^T (1 of 2)", false, true, 64, 128, 1024},
      {"dz WhT (1 of 2, NN)", false, false, 64, 128, 1024},
      {"dZ Wx^T (bwd dX)", false, true, 6400, 256, 1024},
      {"dZ WxT (bwd dX NN)", false, false, 6400, 256, 1024},
      {"X^T dZ (bwd dW)", true, false, 256, 1024, 6400},
      {"dense V=100 fwd", false, false, 6400, 100, 256},
      {"dense V=5000 fwd", false, false, 6400, 5000, 256},
      {"dense V=5000 dX", false, true, 6400, 256, 5000},
      {"dense V=5000 dW", true, false, 256, 5000, 6400},
      {"dense chunk dX tB", false, true, 256, 256, 5000},
      {"dense chunk dX NN", false, false, 256, 256, 5000},
      {"dense chunk fwd", false, false, 256, 5000, 256},
      {"dense chunk dW", true, false, 256, 5000, 256},
      {"infer step n=64", false, false, 64, 1024, 512},
      {"infer step n=8", false, false, 8, 1024, 512},
      {"infer step n=1", false, false, 1, 1024, 512},
  };
  if (bf16) {
    std::printf("GFLOP/s on one thread: fp32 (oneDNN sgemm) vs bf16 operands, fp32 accumulation\n");
    std::printf("%-22s %6s %6s %6s       %8s %8s %6s  %s\n", "shape", "M", "N", "K", "fp32",
                "bf16", "ratio", "bf16 impl");
    double peak32 = 0, peak16 = 0;
    for (const auto& s : shapes) {
      const double g32 = Measure(s, 1, min_s), g16 = MeasureBf16(s, min_s);
      std::printf("%-22s %6d %6d %6d%s%s %8.1f %8.1f %6.2f  %s\n", s.what, s.m, s.n, s.k,
                  s.ta ? " tA" : "   ", s.tb ? " tB" : "   ", g32, g16, g16 / g32,
                  ds::cpu::BgemmImplName(s.ta, s.tb, s.m, s.n, s.k).c_str());
      std::fflush(stdout);
      if (&s == &shapes[0]) {
        peak32 = g32;
        peak16 = g16;
      }
    }
    std::printf("measured peak (2048^3, one thread): fp32 %.1f GFLOP/s, bf16 %.1f GFLOP/s\n",
                peak32, peak16);
    return 0;
  }
  std::vector<ds::cpu::GemmImpl> impls = {ds::cpu::GemmImpl::kOneDnn};
  if (ds::cpu::HaveOpenBlas()) impls.push_back(ds::cpu::GemmImpl::kOpenBlas);
  std::printf("GFLOP/s; 2 thr = the library's threading, split-n / split-m = SgemmSplit\n");
  std::printf("%-22s %6s %6s %6s        %-9s %7s %7s %8s %8s\n", "shape", "M", "N", "K", "impl",
              "1 thr", "2 thr", "split-n", "split-m");
  double peak = 0;
  for (const auto& s : shapes) {
    for (auto impl : impls) {
      ds::cpu::SetGemmImpl(impl);
      double g1 = Measure(s, 1, min_s), g2 = Measure(s, 2, min_s);
      double gn = Measure(s, 2, min_s, 'n'), gm = Measure(s, 2, min_s, 'm');
      std::printf("%-22s %6d %6d %6d%s%s %-9s %7.1f %7.1f %8.1f %8.1f\n", s.what, s.m, s.n, s.k,
                  s.ta ? " tA" : "   ", s.tb ? " tB" : "   ", ds::cpu::GemmImplName(impl), g1, g2,
                  gn, gm);
      std::fflush(stdout);
      if (&s == &shapes[0] && impl == ds::cpu::GemmImpl::kOneDnn)
        peak = std::max(std::max(g1, g2), std::max(gn, gm));
    }
  }
  ds::cpu::SetGemmImpl(ds::cpu::GemmImpl::kOneDnn);
  Shape step{"h Wh split 2 thr x10", false, false, 64, 1024, 256};
  std::printf("%-22s %6d %6d %6d        %-9s %7s %7.1f  (10 steps per parallel region)\n",
              step.what, step.m, step.n, step.k, "onednn", "-", MeasureSplit(step, 2, min_s));
  std::printf("measured GEMM peak (oneDNN, 2048^3): %.1f GFLOP/s\n", peak);
  return 0;
}
