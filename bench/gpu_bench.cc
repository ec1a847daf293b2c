// GPU benchmark (run by scripts/gpu_check.sh on a machine with a GPU).
//
//   gpu_bench train    [--vocab V] [--batch B] [--steps T] [--iters N] [--tf32]
//       Training tokens/s of the default network (Emb 256, LSTM 256 x 2,
//       dropout 0.2, RMSprop) on CUDA: Step(train) + ApplyOptimizer per batch.
//   gpu_bench generate [--procs P] [--slots S] [--tokens N] [--vocab V]
//                      [--preallocate] [--limit BYTES|25%]
//       P worker processes (fork+exec of this binary) share the GPU, each with
//       the per-process limit DefaultWorkerLimit(P) unless --limit is given
//       (the policy the generate command uses), grow-on-demand or
//       preallocated. Each advances S slots by N tokens (greedy, on the host
//       from the logits, as generation does). Reports aggregate tokens/s over
//       the common wall-clock window, device memory in use with all workers
//       up, and each worker's allocator statistics.
//
// Every result is one JSON line on stdout ("bench": "train" | "generate").
// Without a CUDA build or GPU it prints a "skipped" line and exits 0.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/device.h"
#include "backend/device_allocator.h"
#include "model/network.h"
#include "util/rng.h"

#ifdef DS_HAVE_CUDA
#include <sys/wait.h>
#include <unistd.h>

#include "backend/cuda/cuda_backend.h"
#endif

namespace ds {
namespace {

struct Args {
  std::string mode;
  int vocab = 100, batch = 64, steps = 100, iters = 20;
  bool tf32 = false;
  int procs = 1, slots = 64, tokens = 300;
  bool preallocate = false;
  std::string limit;       // empty: DefaultWorkerLimit(procs)
  size_t limit_bytes = 0;  // worker: resolved limit
};

int Usage() {
  std::fprintf(stderr,
               "usage: gpu_bench train [--vocab V] [--batch B] [--steps T] [--iters N] [--tf32]\n"
               "       gpu_bench generate [--procs P] [--slots S] [--tokens N] [--vocab V]\n"
               "                          [--preallocate] [--limit BYTES|PCT%%]\n");
  return 2;
}

bool Parse(int argc, char** argv, Args* a) {
  if (argc < 2) return false;
  a->mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    auto num = [&](int* out) {
      const char* v = next();
      if (v == nullptr) return false;
      *out = std::atoi(v);
      return *out > 0;
    };
    if (k == "--vocab") {
      if (!num(&a->vocab)) return false;
    } else if (k == "--batch") {
      if (!num(&a->batch)) return false;
    } else if (k == "--steps") {
      if (!num(&a->steps)) return false;
    } else if (k == "--iters") {
      if (!num(&a->iters)) return false;
    } else if (k == "--procs") {
      if (!num(&a->procs)) return false;
    } else if (k == "--slots") {
      if (!num(&a->slots)) return false;
    } else if (k == "--tokens") {
      if (!num(&a->tokens)) return false;
    } else if (k == "--tf32")
      a->tf32 = true;
    else if (k == "--preallocate")
      a->preallocate = true;
    else if (k == "--limit") {
      const char* v = next();
      if (v == nullptr) return false;
      a->limit = v;
    } else if (k == "--limit-bytes") {
      const char* v = next();
      if (v == nullptr) return false;
      a->limit_bytes = std::strtoull(v, nullptr, 10);
    } else {
      return false;
    }
  }
  return true;
}

#ifdef DS_HAVE_CUDA

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
int64_t Nanos(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::string StatsJson(const AllocatorStats& s) {
  return fmt::format(
      "{{\"allocated\": {}, \"peak_allocated\": {}, \"reserved\": {}, \"peak_reserved\": {}, "
      "\"limit\": {}, \"segments\": {}, \"segment_allocs\": {}, \"oom_retries\": {}, "
      "\"oom_failures\": {}}}",
      s.allocated_bytes, s.peak_allocated_bytes, s.reserved_bytes, s.peak_reserved_bytes,
      s.limit_bytes, s.num_segments, s.num_segment_allocs, s.num_oom_retries, s.num_oom_failures);
}

NetworkSpec DefaultSpec(int vocab) {
  NetworkSpec spec;  // Emb 256, H 256, L 2, dropout 0.2
  spec.vocab_size = vocab;
  return spec;
}

int RunTrain(const Args& a) {
  NetworkSpec spec = DefaultSpec(a.vocab);
  CudaOptions opt;
  opt.allow_tf32 = a.tf32;
  auto t0 = Clock::now();
  auto r = MakeCudaTrainBackend(spec, a.batch, a.steps, opt);
  if (!r.ok()) {
    std::fprintf(stderr, "gpu_bench train: %s\n", r.status().ToString(true).c_str());
    return 1;
  }
  auto be = std::move(r).value();
  auto t1 = Clock::now();
  std::vector<float> p(be->layout().total);
  InitParams(spec, "glorot_uniform", 1, p.data());
  be->SetParams(p.data());
  Batch batch;
  batch.batch = a.batch;
  batch.steps = a.steps;
  Philox rng(2, 0);
  for (int i = 0; i < a.batch * a.steps; ++i) {
    batch.inputs.push_back(int32_t(rng.Below(a.vocab)));
    batch.targets.push_back(int32_t(rng.Below(a.vocab)));
  }
  OptimizerConfig oc;
  for (int i = 1; i <= 3; ++i) {  // warm-up: cuBLAS heuristics, allocator
    be->Step(batch, true, i);
    be->ApplyOptimizer(oc, i);
  }
  auto t2 = Clock::now();
  double loss = 0;
  for (int i = 0; i < a.iters; ++i) {
    StepStats st = be->Step(batch, true, 100 + i);
    be->ApplyOptimizer(oc, 4 + i);
    loss = st.loss_sum / st.count;
  }
  auto t3 = Clock::now();
  double secs = Seconds(t2, t3);
  double tps = double(a.iters) * a.batch * a.steps / secs;
  std::printf(
      "{\"bench\": \"train\", \"backend\": \"cuda\", \"vocab\": %d, \"batch\": %d, \"steps\": %d, "
      "\"tf32\": %s, \"iters\": %d, \"tokens_per_s\": %.0f, \"gflops\": %.1f, \"ms_per_batch\": "
      "%.3f, \"create_ms\": %.1f, \"last_loss\": %.4f, \"allocator\": %s}\n",
      a.vocab, a.batch, a.steps, a.tf32 ? "true" : "false", a.iters, tps,
      tps * TrainFlopsPerToken(spec) / 1e9, 1e3 * secs / a.iters, 1e3 * Seconds(t0, t1), loss,
      StatsJson(CudaAllocatorStats()).c_str());
  return 0;
}

// One generation worker: set up, report "ready", wait for "go" on stdin, run,
// report "done".
int RunWorker(const Args& a) {
  NetworkSpec spec = DefaultSpec(a.vocab);
  std::vector<float> p(ParamLayout::For(spec).total);
  InitParams(spec, "glorot_uniform", 1, p.data());
  CudaOptions opt;
  opt.memory.limit_bytes = a.limit_bytes;
  opt.memory.preallocate = a.preallocate;
  auto t0 = Clock::now();
  auto r = MakeCudaInferBackend(spec, p.data(), a.slots, opt);
  if (!r.ok()) {
    std::printf("error %s\n", r.status().message().c_str());
    std::fflush(stdout);
    return 1;
  }
  auto be = std::move(r).value();
  double create_ms = 1e3 * Seconds(t0, Clock::now());
  const int S = a.slots, V = a.vocab;
  std::vector<int> ids(S);
  std::vector<int32_t> tok(S, 0);
  std::vector<float> logits(size_t(S) * V);
  for (int s = 0; s < S; ++s) ids[s] = s;
  auto step = [&] {
    be->Step(ids.data(), tok.data(), S, logits.data());
    for (int s = 0; s < S; ++s) {
      const float* l = logits.data() + size_t(s) * V;
      tok[s] = int32_t(std::max_element(l, l + V) - l);
    }
  };
  for (int i = 0; i < 5; ++i) step();
  std::printf("ready %.1f\n", create_ms);
  std::fflush(stdout);
  char line[64];
  if (std::fgets(line, sizeof line, stdin) == nullptr) return 1;
  auto t1 = Clock::now();
  for (int i = 0; i < a.tokens; ++i) step();
  auto t2 = Clock::now();
  std::printf("done %lld %lld %lld %s\n", static_cast<long long>(int64_t(a.tokens) * S),
              static_cast<long long>(Nanos(t1)), static_cast<long long>(Nanos(t2)),
              StatsJson(CudaAllocatorStats()).c_str());
  std::fflush(stdout);
  return 0;
}

struct Worker {
  pid_t pid = -1;
  bool ok = true;
  FILE* out = nullptr;  // worker's stdout
  FILE* in = nullptr;   // worker's stdin
};

int RunGenerate(const Args& a, const char* self) {
  size_t limit = 0;
  std::string limit_src;
  if (!a.limit.empty()) {
    auto mem = CudaMemory(0);
    auto l = ParseMemoryLimit(a.limit, mem.ok() ? mem->total_bytes : 0);
    if (!l.ok()) {
      std::fprintf(stderr, "gpu_bench: %s\n", l.status().message().c_str());
      return 2;
    }
    limit = *l;
    limit_src = "flag";
  } else {
    auto l = DefaultWorkerLimit(a.procs);
    if (!l.ok()) {
      std::fprintf(stderr, "gpu_bench: %s\n", l.status().message().c_str());
      return 1;
    }
    limit = *l;
    limit_src = "DefaultWorkerLimit";
  }
  std::signal(SIGPIPE, SIG_IGN);  // a worker that died must not kill the parent
  auto before = CudaMemory(0);
  std::vector<Worker> ws(a.procs);
  std::string limit_arg = std::to_string(limit);
  for (auto& w : ws) {
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) return 1;
    w.pid = fork();
    if (w.pid == 0) {
      dup2(to_child[0], 0);
      dup2(from_child[1], 1);
      close(to_child[1]);
      close(from_child[0]);
      std::vector<std::string> args = {self,
                                       "worker",
                                       "--vocab",
                                       std::to_string(a.vocab),
                                       "--slots",
                                       std::to_string(a.slots),
                                       "--tokens",
                                       std::to_string(a.tokens),
                                       "--limit-bytes",
                                       limit_arg};
      if (a.preallocate) args.push_back("--preallocate");
      std::vector<char*> argv;
      for (auto& s : args) argv.push_back(s.data());
      argv.push_back(nullptr);
      execv(self, argv.data());  // a fresh process: CUDA must not be inherited through fork
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    w.out = fdopen(from_child[0], "r");
    w.in = fdopen(to_child[1], "w");
  }
  // All workers up (contexts created, memory taken): measure the device.
  int failed = 0;
  double create_ms_max = 0;
  char buf[4096];
  for (auto& w : ws) {
    if (std::fgets(buf, sizeof buf, w.out) == nullptr || std::strncmp(buf, "ready", 5) != 0) {
      std::fprintf(stderr, "gpu_bench: worker %d failed to start: %s", int(w.pid),
                   std::feof(w.out) ? "(exited)\n" : buf);
      w.ok = false;
      continue;
    }
    create_ms_max = std::max(create_ms_max, std::atof(buf + 6));
  }
  auto up = CudaMemory(0);
  for (auto& w : ws) {
    if (!w.ok) continue;
    std::fputs("go\n", w.in);
    std::fflush(w.in);
  }
  int64_t tokens = 0, start = INT64_MAX, end = 0;
  size_t reserved_sum = 0, peak_alloc_max = 0;
  int64_t oom_failures = 0;
  for (auto& w : ws) {
    if (!w.ok) continue;
    if (std::fgets(buf, sizeof buf, w.out) == nullptr || std::strncmp(buf, "done", 4) != 0) {
      if (!std::feof(w.out)) std::fprintf(stderr, "gpu_bench: worker %d: %s", int(w.pid), buf);
      w.ok = false;
      continue;
    }
    long long n = 0, t1 = 0, t2 = 0;
    int off = 0;
    if (std::sscanf(buf, "done %lld %lld %lld %n", &n, &t1, &t2, &off) < 3) {
      w.ok = false;
      continue;
    }
    tokens += n;
    start = std::min<int64_t>(start, t1);
    end = std::max<int64_t>(end, t2);
    std::string js(buf + off);
    auto field = [&](const char* name) -> size_t {
      auto p = js.find(std::string("\"") + name + "\": ");
      return p == std::string::npos
                 ? 0
                 : std::strtoull(js.c_str() + p + std::strlen(name) + 4, nullptr, 10);
    };
    reserved_sum += field("reserved");
    peak_alloc_max = std::max(peak_alloc_max, field("peak_allocated"));
    oom_failures += int64_t(field("oom_failures"));
  }
  for (auto& w : ws) {
    std::fclose(w.in);
    std::fclose(w.out);
    int status = 0;
    waitpid(w.pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) w.ok = false;
    failed += !w.ok;
  }
  double secs = end > start ? double(end - start) * 1e-9 : 0;
  size_t used_before = before.ok() ? before->total_bytes - before->free_bytes : 0;
  size_t used_up = up.ok() ? up->total_bytes - up->free_bytes : 0;
  std::printf(
      "{\"bench\": \"generate\", \"backend\": \"cuda\", \"procs\": %d, \"slots\": %d, \"vocab\": "
      "%d, \"tokens_per_proc\": %d, \"mode\": \"%s\", \"limit_per_proc\": %zu, \"limit_from\": "
      "\"%s\", \"failed_workers\": %d, \"tokens_per_s\": %.0f, \"window_s\": %.3f, "
      "\"worker_create_ms_max\": %.1f, \"device_used_before\": %zu, \"device_used_workers_up\": "
      "%zu, \"reserved_sum\": %zu, \"peak_allocated_max\": %zu, \"oom_failures\": %lld}\n",
      a.procs, a.slots, a.vocab, a.tokens, a.preallocate ? "preallocate" : "grow", limit,
      limit_src.c_str(), failed, secs > 0 ? double(tokens) / secs : 0.0, secs, create_ms_max,
      used_before, used_up, reserved_sum, peak_alloc_max, static_cast<long long>(oom_failures));
  std::fflush(stdout);
  return failed == 0 ? 0 : 1;
}

#endif  // DS_HAVE_CUDA

}  // namespace
}  // namespace ds

int main(int argc, char** argv) {
  ds::Args a;
  if (!ds::Parse(argc, argv, &a)) return ds::Usage();
#ifdef DS_HAVE_CUDA
  if (a.mode == "worker") return ds::RunWorker(a);
  std::string why;
  if (!ds::CudaAvailable(&why)) {
    std::printf("{\"bench\": \"%s\", \"skipped\": \"no GPU: %s\"}\n", a.mode.c_str(), why.c_str());
    return 0;
  }
  if (a.mode == "train") return ds::RunTrain(a);
  if (a.mode == "generate") {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 1;
    self[n] = 0;
    return ds::RunGenerate(a, self);
  }
  return ds::Usage();
#else
  std::printf("{\"bench\": \"%s\", \"skipped\": \"no GPU: built without CUDA\"}\n", a.mode.c_str());
  return 0;
#endif
}
