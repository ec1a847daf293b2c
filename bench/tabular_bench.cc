// Tabular benchmark driver: trains a tabular model on a CSV table and
// generates a synthetic table, timing both; writes a JSON result (used by
// bench/tabular_bench.sh together with bench/tabular_quality.py).
//
//   tabular_bench --input train.csv --model-dir m/ --output synth.csv
//                 [--config cfg.json] [--condition-columns 3] [--batch-size-columns 15]
//                 [--grouping auto|order] [--num-lines N] [--seed S] [--result r.json]
//
// Result: {"train_seconds", "generate_seconds", "rows", "batches": [{"columns",
// "condition", "epochs_run", "train_seconds", "valid", "invalid"}], "valid_share"}
// where valid_share = generated valid batch rows / all batch rows sampled (the
// share of sampled rows that passed validation, over all batches).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "tabular/tabular.h"
#include "util/fs.h"

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class Log : public ds::TabularObserver {
 public:
  void OnInfo(const std::string& m) override { std::fprintf(stderr, "%s\n", m.c_str()); }
  void OnWarning(const std::string& m) override { std::fprintf(stderr, "warning: %s\n", m.c_str()); }
  void OnBatchTrained(const ds::BatchTrainResult& r) override {
    std::fprintf(stderr, "batch %d: %d epochs, kept %d, %.1fs (%s)\n", r.batch, r.epochs_run,
                 r.best_epoch, r.seconds, r.stop_reason.c_str());
  }
};

int Usage() {
  std::fprintf(stderr,
               "usage: tabular_bench --input T --model-dir M --output S [--config C] "
               "[--condition-columns N] [--batch-size-columns N] [--grouping G] [--num-lines N] "
               "[--seed S] [--result R]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string input, model_dir, output, config_file, result = "-";
  ds::TabularTrainOptions t;
  ds::TabularGenerateOptions g;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return Usage();
    std::string v = argv[++i];
    if (a == "--input") input = v;
    else if (a == "--model-dir") model_dir = v;
    else if (a == "--output") output = v;
    else if (a == "--config") config_file = v;
    else if (a == "--condition-columns") t.tabular.condition_columns = std::atoi(v.c_str());
    else if (a == "--batch-size-columns") t.tabular.batch_columns = std::atoi(v.c_str());
    else if (a == "--grouping") t.tabular.grouping = v;
    else if (a == "--num-lines") g.num_lines = std::atoll(v.c_str());
    else if (a == "--seed") g.seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (a == "--result") result = v;
    else return Usage();
  }
  if (input.empty() || model_dir.empty() || output.empty()) return Usage();
  if (!config_file.empty()) {
    ds::Status s = t.config.LoadFile(config_file);
    if (!s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return 1;
    }
  }
  t.config.overwrite = true;
  t.input_path = input;
  t.model_dir = model_dir;
  Log log;
  double t0 = Now();
  auto tr = ds::TrainTabular(t, &log);
  if (!tr.ok()) {
    std::fprintf(stderr, "error: %s\n", tr.status().message().c_str());
    return 1;
  }
  double t1 = Now();
  g.model_dir = model_dir;
  g.output = output;
  g.overwrite = true;  // reruns replace the last output
  ds::TabularGenerateSummary gs;
  ds::Status st = ds::GenerateTabular(g, &log, &gs);
  double t2 = Now();
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.message().c_str());
    return 1;
  }
  nlohmann::json j;
  j["input"] = input;
  j["train_seconds"] = t1 - t0;
  j["generate_seconds"] = t2 - t1;
  j["rows"] = gs.rows;
  j["processes"] = tr->processes;
  int64_t valid = 0, all = 0;
  nlohmann::json bs = nlohmann::json::array();
  for (size_t b = 0; b < tr->spec.batches.size(); ++b) {
    const auto& sb = tr->spec.batches[b];
    const auto& r = tr->batches[b];
    const auto& gb = gs.batches[b];
    valid += gb.valid;
    all += gb.valid + gb.invalid;
    bs.push_back({{"columns", sb.columns},
                  {"condition", sb.condition},
                  {"epochs_run", r.epochs_run},
                  {"best_epoch", r.best_epoch},
                  {"train_seconds", r.seconds},
                  {"valid", gb.valid},
                  {"invalid", gb.invalid},
                  {"generate_seconds", gb.seconds}});
  }
  j["batches"] = bs;
  j["valid_share"] = all > 0 ? double(valid) / double(all) : 1.0;
  std::string text = j.dump(1) + "\n";
  if (result == "-") {
    std::fputs(text.c_str(), stdout);
  } else {
    ds::Status ws = ds::WriteFileAtomic(result, text);
    if (!ws.ok()) {
      std::fprintf(stderr, "error: %s\n", ws.message().c_str());
      return 1;
    }
  }
  return 0;
}
