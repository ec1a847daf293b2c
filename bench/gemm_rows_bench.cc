// Does row i of a fp32 GEMM (SgemmSerial: oneDNN's dnnl_sgemm on one thread)
// depend on how many rows are computed with it? The precondition of one
// batched pass over an mpirun rank's shards (docs/scale.md, "one batched pass"):
// the forward and backward-data GEMMs over all of a rank's rows give each
// shard's rows the bits they get alone only if every row is computed the same
// whatever M and its position. For each N, K of the field network's fp32 step
// (1 x LSTM 128, embedding 64, the dense stage's legal ranges of 7 to 73 ids),
// C for M rows in one call is compared with C computed in blocks of `blk` rows
// (one call per block, the same K, N and strides), for M from 15 to 1984.
//
//   gemm_rows_bench [--n-k N K]...    (default: the field network's shapes)
//
// Prints, per shape and block size, "same" or "DIFFER" with how many M
// differed, then the CPU time of one call at M = 8, 16 and 32 rows (the
// median of 5 rounds of 400 calls; pin it: taskset -c N): what a shard step of
// 8 rows pays per GEMM call against a step of 32. Exit status 0 (a report, not a test: the answer depends on the
// CPU and oneDNN's kernel choice, e.g. 8-row blocks differed on the AMD EPYC
// of session 10 for K = 512).
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/gemm.h"
#include "util/rng.h"

namespace {

struct Shape {
  std::string what;
  int n, k;
  float beta;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape> shapes;
  for (int i = 1; i + 2 < argc && std::string(argv[i]) == "--n-k"; i += 3)
    shapes.push_back({"N " + std::string(argv[i + 1]) + ", K " + argv[i + 2],
                      std::atoi(argv[i + 1]), std::atoi(argv[i + 2]), 0.0f});
  if (shapes.empty())
    shapes = {{"x Wx (N 512, K 64)", 512, 64, 0},
              {"h Wh, beta 1 (N 512, K 128)", 512, 128, 1},
              {"dz Wh^T (N 128, K 512)", 128, 512, 0},
              {"dX = dz Wx^T (N 64, K 512)", 64, 512, 0},
              {"dense logits (N 7, K 128)", 7, 128, 0},
              {"dense logits (N 40, K 128)", 40, 128, 0},
              {"dense logits (N 73, K 128)", 73, 128, 0},
              {"dense dX (N 128, K 7)", 128, 7, 0},
              {"dense dX (N 128, K 40)", 128, 40, 0},
              {"dense dX (N 128, K 73)", 128, 73, 0}};
  const int ms[] = {15, 16, 24, 30, 32, 45, 64, 120, 248, 496, 744, 992, 1984};
  ds::Philox rng(1, 0);
  auto fill = [&](std::vector<float>& v) {
    for (float& x : v) x = float(rng.Below(2001)) / 1000.0f - 1.0f;
  };
  std::printf("%-30s %s\n", "GEMM (row-major C = A B)", "rows computed in blocks of 1 2 3 5 8 16 against all M at once");
  for (const Shape& s : shapes) {
    std::printf("%-30s", s.what.c_str());
    for (int blk : {1, 2, 3, 5, 8, 16}) {
      int bad = 0, tried = 0;
      for (int m : ms) {
        if (m % blk) continue;
        std::vector<float> a(size_t(m) * s.k), b(size_t(s.k) * s.n), c0(size_t(m) * s.n);
        fill(a);
        fill(b);
        fill(c0);
        std::vector<float> c1 = c0;
        ds::cpu::SgemmSerial(false, false, m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.n,
                             s.beta, c0.data(), s.n);
        for (int r = 0; r < m; r += blk)
          ds::cpu::SgemmSerial(false, false, blk, s.n, s.k, 1.0f, a.data() + size_t(r) * s.k, s.k,
                               b.data(), s.n, s.beta, c1.data() + size_t(r) * s.n, s.n);
        ++tried;
        if (std::memcmp(c0.data(), c1.data(), c0.size() * sizeof(float)) != 0) ++bad;
      }
      std::printf("  %2d: %s", blk, bad ? ("DIFFER " + std::to_string(bad) + "/" + std::to_string(tried)).c_str() : "same");
    }
    std::printf("\n");
  }
  auto cpu = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
  };
  std::printf("\n%-30s %s\n", "GEMM", "CPU us per call at M = 8, 16, 32 rows (and per row)");
  for (const Shape& s : shapes) {
    std::printf("%-30s", s.what.c_str());
    for (int m : {8, 16, 32}) {
      std::vector<float> a(size_t(m) * s.k), b(size_t(s.k) * s.n), c(size_t(m) * s.n);
      fill(a);
      fill(b);
      fill(c);
      std::vector<double> rounds;
      for (int r = 0; r < 5; ++r) {
        const double t0 = cpu();
        for (int i = 0; i < 400; ++i)
          ds::cpu::SgemmSerial(false, false, m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.n,
                               0.0f, c.data(), s.n);
        rounds.push_back((cpu() - t0) / 400 * 1e6);
      }
      std::sort(rounds.begin(), rounds.end());
      std::printf("  %2d: %6.2f (%5.3f)", m, rounds[2], rounds[2] / m);
    }
    std::printf("\n");
  }
  return 0;
}
