// Host memory estimates (backend/memory_estimate.h) against what the CPU
// backends really allocate (heap bytes, mallinfo2), the available-memory
// probe under a ulimit, and the error text.
#include "backend/memory_estimate.h"

#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "backend/backend.h"

namespace ds {
namespace {

size_t HeapBytes() {
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

NetworkSpec Spec(int V, int E, int H, int L, float dropout) {
  NetworkSpec s;
  s.vocab_size = V;
  s.embedding_dim = E;
  s.rnn_units = H;
  s.num_layers = L;
  s.dropout_rate = dropout;
  return s;
}

TEST(MemoryEstimate, CoversTheCpuTrainBackend) {
  for (Architecture a : kAllArchitectures)
  for (auto [spec, B, T] : {std::tuple{Spec(97, 64, 128, 2, 0.2f), 32, 50},
                            std::tuple{Spec(300, 32, 200, 1, 0.0f), 16, 100},
                            std::tuple{Spec(50, 16, 64, 3, 0.5f), 64, 20}}) {
    spec.architecture = a;
    const size_t before = HeapBytes();
    auto backend = MakeCpuTrainBackend(spec, B, T);
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    const double allocated = double(HeapBytes() - before);
    const double estimate = double(EstimateCpuTrainBytes(spec, B, T, 1));
    // The estimate adds the trainer's host copies (5 P floats) and the
    // per-thread scratch allocated at the first step (c V + H V + V + 4 T^2 + G H).
    const double P = double(ParamLayout::For(spec).total);
    const double V = spec.vocab_size, H = spec.rnn_units, GH = GateCount(a) * H;
    const double chunk = std::clamp(std::floor(double(1 << 20) / V), 64.0, 2048.0);
    double extra = 4 * (5 * P + chunk * V + H * V + V + 4.0 * T * T + GH);
    // Huge-page buffers (cpu/buffer.h): the estimate counts aligned_alloc's worst-case
    // slack of 2 MiB for each activation buffer of 2 MiB or more.
    const double R = double(B) * T;
    for (double w : {double(spec.embedding_dim), std::max<double>(spec.embedding_dim, H),
                     std::max<double>(spec.embedding_dim, H)})
      extra += CpuBufferBytes(4 * R * w) - 4 * R * w;
    for (int l = 0; l < spec.num_layers; ++l)
      for (double w : {GH, H, H, GH, GH, H}) extra += CpuBufferBytes(4 * R * w) - 4 * R * w;
    EXPECT_GE(estimate, allocated) << "the backend allocates more than estimated "
                                   << ArchitectureName(a);
    EXPECT_LE(estimate, allocated + extra + 64 * 1024)
        << "the estimate lists buffers that are gone " << ArchitectureName(a);
  }
}

TEST(MemoryEstimate, CoversTheCpuInferBackend) {
  for (Architecture a : kAllArchitectures)
  for (int slots : {1, 64, 1000}) {
    NetworkSpec spec = Spec(120, 32, 96, 2, 0.2f);
    spec.architecture = a;
    std::vector<float> params(ParamLayout::For(spec).total, 0.01f);
    // oneDNN generates its GEMM kernels once per process (the fast path's
    // table is a GEMM at construction): not the backend's memory.
    ASSERT_TRUE(MakeCpuInferBackend(spec, params.data(), 1).ok());
    const size_t before = HeapBytes();
    auto backend = MakeCpuInferBackend(spec, params.data(), slots);
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    const double allocated = double(HeapBytes() - before);
    const double estimate = double(EstimateCpuInferBytes(spec, slots));
    // The estimate adds the sampler's logits and probabilities (2 V per slot).
    EXPECT_GE(estimate + 16 * 1024, allocated) << slots;
    EXPECT_LE(estimate, allocated + 4.0 * 2 * spec.vocab_size * slots + 16 * 1024) << slots;
  }
}

TEST(MemoryEstimate, GrowsWithEveryDimensionAndSaturates) {
  NetworkSpec s = Spec(100, 64, 128, 2, 0.2f);
  const uint64_t base = EstimateCpuTrainBytes(s, 32, 50, 2);
  EXPECT_GT(EstimateCpuTrainBytes(s, 64, 50, 2), base);
  EXPECT_GT(EstimateCpuTrainBytes(s, 32, 100, 2), base);
  EXPECT_GT(EstimateCpuTrainBytes(s, 32, 50, 4), base);
  for (int NetworkSpec::*dim : {&NetworkSpec::vocab_size, &NetworkSpec::embedding_dim,
                                &NetworkSpec::rnn_units, &NetworkSpec::num_layers}) {
    NetworkSpec t = s;
    t.*dim *= 2;
    EXPECT_GT(EstimateCpuTrainBytes(t, 32, 50, 2), base);
    EXPECT_GT(EstimateCpuInferBytes(t, 64), EstimateCpuInferBytes(s, 64));
  }
  // The largest shapes the configuration accepts: no overflow.
  NetworkSpec huge = Spec(1000000, 65536, 65536, 16, 0.2f);
  uint64_t h = EstimateCpuTrainBytes(huge, 65536, 100000, 4096);
  EXPECT_GT(h, uint64_t(1) << 50);
  EXPECT_GE(EstimateCpuInferBytes(huge, 65536), uint64_t(1) << 40);
}

TEST(MemoryEstimate, AvailableMemoryAndTheError) {
  HostMemory m = AvailableHostMemory();
  EXPECT_GT(m.available, uint64_t(16) << 20);  // a test machine has more than 16 MiB free
  EXPECT_FALSE(m.limited_by.empty());
  // Under ulimit -v (in a child: the limit stays there).
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    struct rlimit rl;
    getrlimit(RLIMIT_AS, &rl);
    rl.rlim_cur = rlim_t(64) << 30;
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
    HostMemory c = AvailableHostMemory();
    bool ok = c.per_process < (uint64_t(64) << 30) && c.per_process > 0 &&
              c.process_limited_by == "ulimit -v (RLIMIT_AS)";
    Status st = CheckMemory(1, uint64_t(65) << 30, c, "this", "try less");
    ok = ok && st.code() == Code::kResourceExhausted &&
         st.message().find("a process may still use (ulimit -v (RLIMIT_AS)); try less") !=
             std::string::npos;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);

  HostMemory fake;
  fake.available = uint64_t(2) << 30;
  fake.limited_by = "MemAvailable";
  EXPECT_TRUE(CheckMemory(uint64_t(1) << 30, uint64_t(1) << 30, fake, "x", "y").ok());
  Status st = CheckMemory(uint64_t(3) << 30, uint64_t(3) << 30, fake, "training this", "reduce it");
  EXPECT_EQ(st.code(), Code::kResourceExhausted);
  EXPECT_EQ(st.message(),
            "training this needs about 3.00 GiB of memory, more than the 2.00 GiB available "
            "(MemAvailable); reduce it");
  st = CheckMemory(UINT64_MAX, 1, fake, "a", "b");
  EXPECT_NE(st.message().find("more than an EiB"), std::string::npos);
}

}  // namespace
}  // namespace ds
