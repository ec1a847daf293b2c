#include "dist/profile.h"

#include <time.h>

#include <array>

#include "dist/comm.h"

namespace ds::dist {
namespace {

constexpr int kPhases = int(Phase::kCount);
std::array<double, kPhases> g_wall{}, g_cpu{};
constexpr const char* kNames[kPhases] = {"setup",     "validation", "shard steps", "fixed point",
                                         "wait",      "allreduce",  "optimizer",   "save",
                                         "calibration"};

double Clock(clockid_t id) {
  timespec ts;
  ::clock_gettime(id, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace

double WallNow() { return Clock(CLOCK_MONOTONIC); }
double CpuNow() { return Clock(CLOCK_PROCESS_CPUTIME_ID); }

void AddTime(Phase p, double wall, double cpu) {
  g_wall[size_t(p)] += wall;
  g_cpu[size_t(p)] += cpu;
}

Result<std::vector<std::string>> ProfileLines(double total_wall) {
  // Every rank's numbers in its own slots (zeros elsewhere: the sum is exact).
  const size_t per = 2 * kPhases + 2, n = size_t(Size());
  std::vector<double> all(per * n, 0.0);
  double* mine = all.data() + per * size_t(Rank());
  for (int p = 0; p < kPhases; ++p) {
    mine[2 * p] = g_wall[size_t(p)];
    mine[2 * p + 1] = g_cpu[size_t(p)];
  }
  mine[2 * kPhases] = total_wall;
  mine[2 * kPhases + 1] = CpuNow();  // the process's CPU from its start (exec, MPI_Init)
  DS_RETURN_IF_ERROR(AllreduceSum(all.data(), all.size()));
  std::vector<std::string> lines;
  for (size_t r = 0; r < n; ++r) {
    const double* v = all.data() + per * r;
    std::string line = fmt::format("mpi profile rank {}:", r);
    double accounted = 0, accounted_cpu = 0;
    for (int p = 0; p < kPhases; ++p) {
      accounted += v[2 * p];
      accounted_cpu += v[2 * p + 1];
      line += fmt::format(" {} {:.2f}s (cpu {:.2f}s){}", kNames[p], v[2 * p], v[2 * p + 1],
                          p + 1 < kPhases ? "," : "");
    }
    line += fmt::format("; other {:.2f}s of {:.2f}s; process cpu {:.2f}s ({:.2f}s outside the phases)",
                        v[2 * kPhases] - accounted, v[2 * kPhases], v[2 * kPhases + 1],
                        v[2 * kPhases + 1] - accounted_cpu);
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace ds::dist
