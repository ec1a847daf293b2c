// Cost of constrained decoding (generate/constraints.h).
//
//   constraints_bench [--data DIR] [--dataset telco_churn] [--model-dir M]
//                     [--records 2000] [--slots 64] [--repeat 3]
//
// 1. Mask cost per sampling step, per tokenizer (char and SentencePiece, with
//    and without column markers), on the real records of the dataset: every
//    record is replayed token by token through the filter (Mask then Accept,
//    i.e. the states a real run visits), beside the two other per-token costs
//    of a step: SampleToken (softmax + draw over V) and the network's share of
//    one batched InferBackend::Step (default network: embedding 256,
//    2 x LSTM 256, random weights: speed does not depend on them; `slots`
//    rows, one thread). share = mask / (network + sample + mask).
// 2. With --model-dir (a trained model): end-to-end generation in-process
//    (RecordGenerator, one thread, `slots` slots) at each constraint level:
//    tokens/s, valid records/s, valid share, and the time spent in Mask.
//    Each level runs --repeat times; the median is reported.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "generate/constraints.h"
#include "generate/generate.h"
#include "generate/generator.h"
#include "generate/sampler.h"
#include "model/network.h"
#include "schema/column_rules.h"
#include "tokenize/tokenizer.h"
#include "util/rng.h"

namespace ds {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

// Simple CSV: split on ',', surrounding quotes stripped (right for the
// shared tables used here: no quoted commas).
std::vector<std::string> SplitLine(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  std::string x;
  while (std::getline(ss, x, ',')) {
    if (x.size() >= 2 && x.front() == '"' && x.back() == '"') x = x.substr(1, x.size() - 2);
    f.push_back(x);
  }
  if (!line.empty() && line.back() == ',') f.emplace_back();
  return f;
}

Table ReadTable(const std::string& path) {
  Table t;
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(1);
  }
  t.header = SplitLine(line);
  while (std::getline(in, line)) {
    auto f = SplitLine(line);
    if (f.size() == t.header.size()) t.rows.push_back(std::move(f));
  }
  return t;
}

// Per-token network cost of the default network on `slots` rows, 1 thread.
double NetworkNsPerRow(int V, int slots) {
  NetworkSpec spec;
  spec.vocab_size = V;
  ParamLayout layout = ParamLayout::For(spec);
  float* params = static_cast<float*>(std::aligned_alloc(64, (layout.total * 4 + 63) / 64 * 64));
  InitParams(spec, "glorot_uniform", 1, params);
  auto be = MakeCpuInferBackend(spec, params, slots);
  if (!be.ok()) {
    std::fprintf(stderr, "%s\n", be.status().ToString().c_str());
    std::exit(1);
  }
  std::vector<int> ids(static_cast<size_t>(slots));
  std::vector<int32_t> toks(size_t(slots), 0);
  std::vector<float> logits(size_t(slots) * V);
  for (int s = 0; s < slots; ++s) {
    ids[size_t(s)] = s;
    (*be)->ResetSlot(s);
  }
  for (int i = 0; i < 5; ++i) (*be)->Step(ids.data(), toks.data(), slots, logits.data());
  int steps = 0;
  auto t0 = Clock::now();
  while (Since(t0) < 1.0) {
    (*be)->Step(ids.data(), toks.data(), slots, logits.data());
    ++steps;
  }
  double ns = Since(t0) * 1e9 / (double(steps) * slots);
  be.value().reset();
  std::free(params);
  return ns;
}

void MaskCost(const Table& t, const std::string& type, bool markers, int slots) {
  TokenizerConfig c;
  c.type = type;
  c.column_markers = markers;
  c.num_columns = markers ? int(t.header.size()) : 0;
  c.seed = 1;
  auto t0 = Clock::now();
  auto tok = TrainTokenizer(c, t.rows);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    std::exit(1);
  }
  double train_s = Since(t0);
  const int V = (*tok)->vocab_size();
  ColumnRules rules = LearnColumnRules(t.header, t.rows);
  std::vector<std::vector<int32_t>> recs;
  for (const auto& r : t.rows) {
    std::vector<int32_t> ids;
    if ((*tok)->EncodeRecord(r, &ids).ok()) recs.push_back(std::move(ids));
  }
  Philox rng(7, 0);
  std::vector<float> base(static_cast<size_t>(V)), lg(static_cast<size_t>(V)),
      scratch(static_cast<size_t>(V));
  for (auto& x : base) x = float(rng.Uniform() * 6 - 3);

  // SampleToken per token (plus the copy of the logits, also in the mask loop).
  int64_t n = 0;
  t0 = Clock::now();
  volatile int sink = 0;
  for (const auto& r : recs)
    for (size_t i = 0; i < r.size(); ++i, ++n) {
      std::memcpy(lg.data(), base.data(), sizeof(float) * size_t(V));
      sink = sink + SampleToken(lg.data(), V, 1.0, rng, scratch.data());
    }
  const double sample_ns = Since(t0) * 1e9 / double(n);
  t0 = Clock::now();
  for (const auto& r : recs)
    for (size_t i = 0; i < r.size(); ++i) std::memcpy(lg.data(), base.data(), sizeof(float) * V);
  const double copy_ns = Since(t0) * 1e9 / double(n);
  const double net_ns = NetworkNsPerRow(V, slots);

  for (ConstraintLevel level : {ConstraintLevel::kStructure, ConstraintLevel::kValues}) {
    t0 = Clock::now();
    auto tables = RecordConstraints::Build(**tok, rules, level);
    if (!tables.ok()) {
      std::fprintf(stderr, "%s\n", tables.status().ToString().c_str());
      std::exit(1);
    }
    const double build_ms = Since(t0) * 1e3;
    auto f = NewConstraintFilter(*tables, 1);
    int64_t masked_out = 0, steps = 0;
    t0 = Clock::now();
    for (const auto& r : recs) {
      f->Begin(0);
      for (int32_t id : r) {
        std::memcpy(lg.data(), base.data(), sizeof(float) * size_t(V));
        f->Mask(0, lg.data());
        if (!std::isfinite(lg[size_t(id)])) ++masked_out;  // a real record was forbidden
        f->Accept(0, id);
        ++steps;
      }
    }
    const double mask_ns = Since(t0) * 1e9 / double(steps) - copy_ns;
    std::printf(
        "%-13s %-10s V=%-5d %-9s build %6.1f ms  mask %7.0f ns/token  sample %6.0f  network %7.0f"
        "  share %5.2f%%  (tokenizer %.1fs; real tokens forbidden: %lld)\n",
        type.c_str(), markers ? "markers" : "no-markers", V, ConstraintLevelName(level), build_ms,
        mask_ns, sample_ns, net_ns, 100 * mask_ns / (net_ns + sample_ns + mask_ns), train_s,
        (long long)masked_out);
  }
}

// Times Mask calls of the wrapped filter.
class TimedFilter : public TokenFilter {
 public:
  explicit TimedFilter(std::unique_ptr<TokenFilter> f) : f_(std::move(f)) {}
  void Begin(int s) override { f_->Begin(s); }
  void Accept(int s, int32_t t) override { f_->Accept(s, t); }
  void Mask(int s, float* logits) override {
    auto t0 = Clock::now();
    f_->Mask(s, logits);
    seconds += Since(t0);
  }
  double seconds = 0;

 private:
  std::unique_ptr<TokenFilter> f_;
};

void EndToEnd(const std::string& dir, int64_t records, int slots, int repeat) {
  auto model = LoadModel(dir);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    std::exit(1);
  }
  std::printf("\nend to end: %s (%s tokenizer, V=%d%s), %lld valid records, %d slots, 1 thread\n",
              dir.c_str(), (*model)->tokenizer->type().c_str(), (*model)->tokenizer->vocab_size(),
              (*model)->tokenizer->column_markers() ? ", markers" : "", (long long)records, slots);
  double base_tps = 0;
  for (ConstraintLevel level :
       {ConstraintLevel::kNone, ConstraintLevel::kStructure, ConstraintLevel::kValues}) {
    auto gm = MakeGenerationModel(**model, RuleChecks{}, level);
    if (!gm.ok()) {
      std::fprintf(stderr, "%s\n", gm.status().ToString().c_str());
      std::exit(1);
    }
    struct Run {
      double s, tps, rps, valid_share, mask_share;
    };
    std::vector<Run> runs;
    for (int rep = 0; rep < repeat; ++rep) {
      GenerateOptions o;
      o.num_lines = records;
      o.seed = 1;
      o.predict_batch_size = slots;
      o.max_invalid = 100 * records;
      std::unique_ptr<TimedFilter> timed;
      if (gm->make_filter) {
        auto f = gm->make_filter(slots);
        timed = std::make_unique<TimedFilter>(std::move(f).value());
        o.filter = timed.get();
      }
      auto t0 = Clock::now();
      auto gen = RecordGenerator::Create(*gm, o);
      if (!gen.ok()) {
        std::fprintf(stderr, "%s\n", gen.status().ToString().c_str());
        std::exit(1);
      }
      GeneratedRecord r;
      while (true) {
        auto more = (*gen)->Next(&r);
        if (!more.ok()) {
          std::fprintf(stderr, "%s\n", more.status().ToString().c_str());
          break;
        }
        if (!*more) break;
      }
      double s = Since(t0);
      double v = double((*gen)->valid()), inv = double((*gen)->invalid());
      runs.push_back({s, double((*gen)->tokens_sampled()) / s, v / s, v / std::max(1.0, v + inv),
                      timed ? timed->seconds / s : 0.0});
    }
    std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.tps < b.tps; });
    const Run& m = runs[runs.size() / 2];
    if (level == ConstraintLevel::kNone) base_tps = m.tps;
    std::printf(
        "  %-9s %7.0f tokens/s (%5.1f%% of none; runs %.0f..%.0f)  %6.1f valid records/s  valid "
        "%5.1f%%  mask %4.1f%% of the time\n",
        ConstraintLevelName(level), m.tps, 100 * m.tps / base_tps, runs.front().tps,
        runs.back().tps, m.rps, 100 * m.valid_share, 100 * m.mask_share);
  }
}

}  // namespace
}  // namespace ds

int main(int argc, char** argv) {
  std::string data = "/work/shared/datasets", dataset = "telco_churn", model_dir;
  int64_t records = 2000;
  int slots = 64, repeat = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--data")
      data = v;
    else if (k == "--dataset")
      dataset = v;
    else if (k == "--model-dir")
      model_dir = v;
    else if (k == "--records")
      records = std::atoll(v.c_str());
    else if (k == "--slots")
      slots = std::atoi(v.c_str());
    else if (k == "--repeat")
      repeat = std::max(1, std::atoi(v.c_str()));
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  omp_set_num_threads(1);
  ds::Table t = ds::ReadTable(data + "/" + dataset + ".csv");
  std::printf("mask cost on %s (%zu records, %zu columns), network on %d rows, 1 thread\n",
              dataset.c_str(), t.rows.size(), t.header.size(), slots);
  ds::MaskCost(t, "char", true, slots);
  ds::MaskCost(t, "char", false, slots);
  ds::MaskCost(t, "sentencepiece", true, slots);
  ds::MaskCost(t, "sentencepiece", false, slots);
  if (!model_dir.empty()) ds::EndToEnd(model_dir, records, slots, repeat);
  return 0;
}
