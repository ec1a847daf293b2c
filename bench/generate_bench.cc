// Generation speed and worker memory on the default network (random weights:
// speed does not depend on them). Prints sampling tokens/s and records/s with
// 1 and 2 worker processes (RunGeneration: the full path with continuous
// batching, validation, IPC and output), the in-process sampler on one thread,
// and each worker's memory from /proc/<pid>/status and smaps_rollup.
//
//   generate_bench [--records 10000] [--slots 64] [--workers 1,2] [--vocab 100]
//                  [--repeat 3] [--peer-tokens-per-s X]   (prints the ratios to the peer)
//
// Each worker count runs --repeat times; the median tokens/s is reported (and
// used for the ratios), beside the slowest and fastest run: shared or
// virtualised machines vary by 20% and more from run to run.
//
// bench/run_generate_bench.sh runs the PyTorch peer first and passes its
// figure. Memory: the weights are written to a tensor file and memory-mapped
// (as LoadModel does), so workers share them through the page cache; a
// worker's own memory is its Private_Clean + Private_Dirty (smaps_rollup),
// RssAnon/RssFile are shown beside it.
#include <dirent.h>
#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "generate/batch_sampler.h"
#include "generate/workers.h"
#include "model/network.h"
#include "model/tensor_file.h"
#include "tokenize/tokenizer.h"

namespace ds {
namespace {

// V ids: 0 <n>, 1 <d>, the rest one printable character each.
class BenchTokenizer : public Tokenizer {
 public:
  explicit BenchTokenizer(int V) {
    for (int i = 0; i + 2 < V; ++i) chars_.push_back(std::string(1, char(33 + i % 94)));
  }
  std::string type() const override { return "char"; }
  int vocab_size() const override { return 2 + int(chars_.size()); }
  TokenKind kind(int id) const override {
    return id == 0 ? TokenKind::kEndOfRecord : id == 1 ? TokenKind::kDelimiter : TokenKind::kText;
  }
  const std::string& text(int id) const override {
    static const std::string empty;
    return id >= 2 ? chars_[size_t(id - 2)] : empty;
  }
  int column(int) const override { return -1; }
  int end_id() const override { return 0; }
  int delimiter_id() const override { return 1; }
  int column_id(int) const override { return -1; }
  bool column_markers() const override { return false; }
  int num_columns() const override { return 0; }
  Status EncodeField(std::string_view f, std::vector<int32_t>* out) const override {
    for (char c : f) out->push_back(2 + (c - 33));
    return Status::Ok();
  }
  Status Save(const std::string&) const override {
    return DS_ERR(kInternal, "bench tokenizer is not saved");
  }

 private:
  std::vector<std::string> chars_;
};

struct Mem {
  double vm_rss = 0, rss_anon = 0, rss_file = 0, priv = 0;  // MiB
};

double KbField(const std::string& text, const std::string& key) {
  size_t p = text.find(key);
  if (p == std::string::npos) return 0;
  return std::atof(text.c_str() + p + key.size()) / 1024.0;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Mem ReadMem(int pid) {
  Mem m;
  std::string st = Slurp(fmt::format("/proc/{}/status", pid));
  m.vm_rss = KbField(st, "VmRSS:");
  m.rss_anon = KbField(st, "RssAnon:");
  m.rss_file = KbField(st, "RssFile:");
  std::string sm = Slurp(fmt::format("/proc/{}/smaps_rollup", pid));
  m.priv = KbField(sm, "Private_Clean:") + KbField(sm, "Private_Dirty:");
  return m;
}

// Child processes of this one: /proc/self/task/<pid>/children, or (where
// that file is missing, e.g. under gVisor) a scan of /proc/<pid>/stat.
std::vector<int> ChildPids() {
  std::vector<int> out;
  std::string s = Slurp(fmt::format("/proc/self/task/{}/children", getpid()));
  std::istringstream in(s);
  int pid;
  while (in >> pid) out.push_back(pid);
  if (!out.empty()) return out;
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    int p = std::atoi(e->d_name);
    if (p <= 0) continue;
    std::string st = Slurp(fmt::format("/proc/{}/stat", p));
    size_t rp = st.rfind(')');  // "pid (comm) state ppid ..."
    if (rp == std::string::npos) continue;
    char state;
    int ppid = 0;
    if (std::sscanf(st.c_str() + rp + 1, " %c %d", &state, &ppid) == 2 && ppid == getpid())
      out.push_back(p);
  }
  closedir(d);
  return out;
}

struct Args {
  int64_t records = 10000;
  int slots = 64;
  int vocab = 100;
  std::vector<int> workers = {1, 2};
  int repeat = 3;
  double peer = 0;
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        fmt::print(stderr, "{} needs a value\n", k);
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--records") {
      a.records = std::atoll(next().c_str());
    } else if (k == "--slots") {
      a.slots = std::atoi(next().c_str());
    } else if (k == "--vocab") {
      a.vocab = std::atoi(next().c_str());
    } else if (k == "--repeat") {
      a.repeat = std::max(1, std::atoi(next().c_str()));
    } else if (k == "--peer-tokens-per-s") {
      a.peer = std::atof(next().c_str());
    } else if (k == "--workers") {
      a.workers.clear();
      std::stringstream ss(next());
      std::string w;
      while (std::getline(ss, w, ',')) a.workers.push_back(std::atoi(w.c_str()));
    } else {
      fmt::print(stderr,
                 "usage: generate_bench [--records N] [--slots S] [--vocab V] [--workers 1,2] "
                 "[--repeat R] [--peer-tokens-per-s X]\n");
      std::exit(2);
    }
  }
  return a;
}

int Main(int argc, char** argv) {
  Args a = Parse(argc, argv);
  NetworkSpec spec;
  spec.vocab_size = a.vocab;
  BenchTokenizer tok(a.vocab);
  ParamLayout layout = ParamLayout::For(spec);
  std::vector<float> init(layout.total);
  InitParams(spec, "glorot_uniform", 1, init.data());
  std::string wpath = fmt::format("/tmp/generate_bench_{}.bin", getpid());
  Status st = WriteTensorFile(wpath, {TensorSection{"params", init.data(), init.size()}});
  if (!st.ok()) {
    fmt::print(stderr, "{}\n", st.ToString());
    return 1;
  }
  init = {};
  auto mapped = MappedTensorFile::Open(wpath);
  if (!mapped.ok()) {
    fmt::print(stderr, "{}\n", mapped.status().ToString());
    return 1;
  }
  std::unique_ptr<MappedTensorFile> file = std::move(mapped).value();
  ::unlink(wpath.c_str());  // the mapping stays valid
  const float* params = file->Section("params", layout.total).value();
  const double weights_mib = double(layout.total) * 4 / (1 << 20);

  GenerationModel model;
  model.tokenizer = &tok;
  model.make_backend = [&](int slots) { return MakeCpuInferBackend(spec, params, slots); };

  fmt::print(
      "generate_bench: V={} Emb={} H={}x{}, {} slots per worker, {} records, weights "
      "{:.1f} MiB (mapped), {} CPUs\n",
      spec.vocab_size, spec.embedding_dim, spec.rnn_units, spec.num_layers, a.slots, a.records,
      weights_mib, AvailableCpus());

  // In-process sampler, one thread: the compute ceiling of one worker.
  {
    omp_set_num_threads(1);
    auto backend = MakeCpuInferBackend(spec, params, a.slots);
    SamplerOptions so;
    so.seed = 1;
    BatchSampler s(tok, **backend, so, {});
    std::vector<GeneratedRecord> done;
    for (int i = 0; i < a.slots * 4; ++i) s.Submit(GenTask{uint64_t(i), -1});
    for (int i = 0; i < 20; ++i) s.Step(&done);  // warm up
    auto t0 = std::chrono::steady_clock::now();
    int64_t tok0 = s.tokens_sampled();
    int steps = 0;
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2)) {
      if (s.queued() < size_t(a.slots))
        for (int i = 0; i < a.slots; ++i) s.Submit(GenTask{uint64_t(1000000 + steps * 64 + i), -1});
      s.Step(&done);
      ++steps;
    }
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double tps = double(s.tokens_sampled() - tok0) / sec;
    fmt::print(
        "in-process sampler, 1 thread: {:.0f} tokens/s ({:.1f} us per {}-row step, "
        "{:.1f} GFLOP/s)\n",
        tps, 1e6 * sec / steps, a.slots, tps * InferFlopsPerToken(spec) * 1e-9);
  }

  std::map<int, double> tokens_per_s;  // median over the repeats
  for (int w : a.workers) {
    std::vector<double> tps, rps;
    GenerateSummary sum;
    std::map<int, Mem> peak;  // pid -> largest VmRSS sample (last repeat)
    for (int rep = 0; rep < a.repeat; ++rep) {
      RunOptions ro;
      ro.gen.num_lines = a.records;
      ro.gen.seed = 7;
      ro.gen.predict_batch_size = a.slots;
      ro.parallelism = w;
      ro.format = OutputFormat::kText;
      ro.output = fmt::format("/tmp/generate_bench_out_{}.txt", getpid());
      ro.output_policy.overwrite = true;  // every repetition writes the same file
      peak.clear();
      GenerateEvents ev;
      ev.progress_interval_s = 0.25;
      ev.progress = [&](const GenerateProgress&) {
        for (int pid : ChildPids()) {
          Mem m = ReadMem(pid);
          if (m.vm_rss > peak[pid].vm_rss) peak[pid] = m;
        }
      };
      ev.warning = [](const std::string& s) { fmt::print(stderr, "warning: {}\n", s); };
      Status rs = RunGeneration(model, ro, ev, &sum);
      ::unlink(ro.output.c_str());
      if (!rs.ok()) {
        fmt::print(stderr, "workers={}: {}\n", w, rs.ToString());
        return 1;
      }
      tps.push_back(double(sum.tokens) / sum.seconds);
      rps.push_back(double(sum.valid) / sum.seconds);
    }
    std::vector<double> sorted = tps;
    std::sort(sorted.begin(), sorted.end());
    std::sort(rps.begin(), rps.end());
    const double med = sorted[sorted.size() / 2];
    tokens_per_s[w] = med;
    fmt::print(
        "workers={}: {:.0f} tokens/s, {:.0f} records/s (median of {}; tokens/s {:.0f} .. "
        "{:.0f}; {} records, {:.1f} tokens per record)\n",
        w, med, rps[rps.size() / 2], a.repeat, sorted.front(), sorted.back(), sum.valid,
        double(sum.tokens) / double(std::max<int64_t>(1, sum.valid + sum.invalid)));
    for (auto& [pid, m] : peak)
      fmt::print(
          "  worker pid {}: VmRSS {:.1f} MiB (RssFile {:.1f}, RssAnon {:.1f}), private "
          "{:.1f} MiB\n",
          pid, m.vm_rss, m.rss_file, m.rss_anon, m.priv);
  }
  Mem self = ReadMem(getpid());
  fmt::print("parent: VmRSS {:.1f} MiB (RssFile {:.1f}, RssAnon {:.1f})\n", self.vm_rss,
             self.rss_file, self.rss_anon);
  if (tokens_per_s.count(1) && tokens_per_s.count(2))
    fmt::print("scaling 1 -> 2 workers: {:.2f}x (target >= 1.8x)\n",
               tokens_per_s[2] / tokens_per_s[1]);
  if (a.peer > 0) {
    for (auto& [w, t] : tokens_per_s)
      fmt::print("vs PyTorch peer ({:.0f} tokens/s): workers={} {:.2f}x{}\n", a.peer, w, t / a.peer,
                 w == 2 ? " (target >= 3x)" : "");
  }
  return 0;
}

}  // namespace
}  // namespace ds

int main(int argc, char** argv) { return ds::Main(argc, argv); }
