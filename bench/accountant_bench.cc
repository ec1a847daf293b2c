// Speed of the privacy pieces: SecureGaussian noise (samples/s, 1 thread and
// all OpenMP threads) and the RDP accountant (ComputeEpsilon,
// NoiseForTargetEpsilon, MaxStepsWithinBudget).
//   ./build/accountant_bench [n_samples=1048576] [reps=200]
#include <omp.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "privacy/rdp_accountant.h"
#include "privacy/secure_noise.h"

namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// CPU time of the calling thread: on a shared, loaded machine this gives the
// single-thread speed without waiting time.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

void BenchNoise(size_t n, int reps, int threads) {
  omp_set_num_threads(threads);
  ds::SecureGaussian g = ds::SecureGaussian::FromOsEntropy();
  std::vector<float> buf(n);   // [n]
  g.Fill(buf.data(), n, 1.0);  // warm up
  auto t0 = std::chrono::steady_clock::now();
  const double c0 = ThreadCpuSeconds();
  for (int r = 0; r < reps; ++r) g.Fill(buf.data(), n, 1.0);
  const double fill = Seconds(t0), fill_cpu = ThreadCpuSeconds() - c0;
  t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) g.Add(buf.data(), n, 1e-3);
  const double add = Seconds(t0);
  std::printf(
      "SecureGaussian %d thread(s), n=%zu: Fill %.1f M samples/s (wall), Add %.1f M samples/s "
      "(wall)",
      threads, n, double(n) * reps / fill * 1e-6, double(n) * reps / add * 1e-6);
  if (threads == 1) {
    std::printf(", Fill %.1f M samples/s per CPU-second", double(n) * reps / fill_cpu * 1e-6);
  }
  std::printf("\n");
}

template <typename Fn>
void Time(const char* name, int reps, Fn&& fn) {
  fn();
  auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) fn();
  std::printf("%-60s %9.3f ms\n", name, Seconds(t0) / reps * 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? size_t(std::atoll(argv[1])) : size_t(1) << 20;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 200;
  BenchNoise(n, reps, 1);
  if (omp_get_num_procs() > 1) BenchNoise(n, reps, omp_get_num_procs());
  volatile double sink = 0;
  Time("ComputeEpsilon(q=0.01, sigma=1.1, 10000 steps)", 20, [&] {
    sink = ds::ComputeEpsilon({0.01, 1.1, 10000, 1e-5}).epsilon;
  });
  Time("ComputeEpsilon(q=0.2, sigma=0.8, 10000 steps) (slow series)", 20, [&] {
    sink = ds::ComputeEpsilon({0.2, 0.8, 10000, 1e-5}).epsilon;
  });
  Time("NoiseForTargetEpsilon(3, q=256/60000, 14063 steps)", 3,
       [&] { sink = ds::NoiseForTargetEpsilon(3.0, 256.0 / 60000, 14063, 1e-5).value(); });
  Time("MaxStepsWithinBudget(3, q=0.01, sigma=1.1)", 5,
       [&] { sink = double(ds::MaxStepsWithinBudget(3.0, 0.01, 1.1, 1e-5)); });
  (void)sink;
  return 0;
}
