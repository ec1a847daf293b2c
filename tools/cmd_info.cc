// datasynth info: what a model directory holds. It runs the checks generate
// runs when it loads a model (LoadModelForGeneration, CheckTabularModel): a
// model info accepts, generate loads.
#include <cmath>

#include "cli.h"
#include "generate/generate.h"
#include "io/csv.h"
#include "model/model_dir.h"
#include "tabular/tabular.h"
#include "tokenize/field_tokenizer.h"
#include "util/fs.h"

namespace ds::cli {
namespace {

nlohmann::json ParamsJson(const Model& m) {
  nlohmann::json j = m.config.ToJson();
  j["datasynth"] = m.meta.ToJson();
  return j;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

void PrintModel(const std::string& dir, const Model& m) {
  const ModelMeta& meta = m.meta;
  ParamLayout layout = ParamLayout::For(meta.spec);
  const std::string arch = ArchitectureLabel(meta.spec.architecture);
  std::printf("model        %s (format %d, datasynth %s)\n", dir.c_str(), meta.format_version,
              meta.datasynth_version.c_str());
  std::printf("trained on   %s: %lld records, %lld tokens\n", meta.input_path.c_str(),
              (long long)meta.records, (long long)meta.tokens);
  if (meta.delimiter) {
    std::printf("columns      %zu, delimiter %s: %s\n", meta.header.size(),
                DelimiterName(meta.delimiter).c_str(), Join(meta.header).c_str());
  } else {
    std::printf("records      text lines\n");
  }
  std::printf("tokenizer    %s, %d tokens%s\n", m.tokenizer->type().c_str(),
              m.tokenizer->vocab_size(), m.tokenizer->column_markers() ? ", column markers" : "");
  if (const auto* ft = dynamic_cast<const FieldTokenizer*>(m.tokenizer.get()))
    std::printf("schema\n%s", ft->Describe().c_str());
  std::printf("network      embedding %d, %d x %s %d, dropout %.2f, %.2fM parameters\n",
              meta.spec.embedding_dim, meta.spec.num_layers,
              arch.c_str(), meta.spec.rnn_units,
              meta.spec.dropout_rate, double(layout.total) / 1e6);
  std::printf("training     %d epochs (%s) in %s on %s, optimizer %s lr %g, batch %d x %d, seed %lld\n",
              meta.epochs_run, meta.stop_reason.c_str(), FormatDuration(meta.train_seconds).c_str(),
              meta.device.c_str(), m.config.optimizer.c_str(), m.config.learning_rate,
              m.config.batch_size, m.config.seq_length, (long long)m.config.seed);
  std::printf("kept epoch   %d (%s %.4f)\n", meta.best_epoch, m.config.best_model_metric.c_str(),
              meta.best_metric);
  if (meta.dp)
    std::printf("privacy      (epsilon %.4g, delta %.3g)-DP; unit: %s\n", meta.epsilon, meta.delta,
                meta.dp_unit.c_str());
  else
    std::printf("privacy      none (trained without differential privacy)\n");
  if (m.copy_guard)
    std::printf("copy guard   %zu rare training rows (seen fewer than %d times) are never copied\n",
                m.copy_guard->size(), m.copy_guard->min_count());
}

int RunTabularInfo(const std::string& dir, bool json) {
  std::vector<std::unique_ptr<Model>> batches;
  auto r = CheckTabularModel(dir, &batches);
  if (!r.ok()) return Fail(r.status());
  const TabularSpec& spec = r.value();
  if (json) {
    nlohmann::json j;
    j["tabular"] = spec.ToJson();
    j["batches"] = nlohmann::json::array();
    for (const auto& b : batches) j["batches"].push_back(ParamsJson(*b));
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model        %s: tabular, %zu batch models (format %d, datasynth %s)\n", dir.c_str(),
              spec.batches.size(), spec.format_version, spec.datasynth_version.c_str());
  std::printf("trained on   %s: %lld rows\n", spec.input_path.c_str(), (long long)spec.rows);
  std::printf("columns      %zu, delimiter %s: %s\n", spec.header.size(),
              DelimiterName(spec.delimiter).c_str(), Join(spec.header).c_str());
  std::printf("grouping     %s, up to %d columns per batch, %d conditioning columns, seed %llu\n",
              spec.grouping.c_str(), spec.batch_columns, spec.condition_columns,
              (unsigned long long)spec.seed);
  if (!spec.seed_columns.empty())
    std::printf("seed columns %s\n", Join(spec.seed_columns).c_str());
  for (size_t b = 0; b < spec.batches.size(); ++b) {
    const TabularBatch& t = spec.batches[b];
    const ModelMeta& meta = batches[b]->meta;
    std::printf("\n%s: %s%s\n", t.dir.c_str(), Join(t.columns).c_str(),
                t.condition.empty() ? "" : fmt::format(" (given {})", Join(t.condition)).c_str());
    std::printf("  %s tokenizer, %d tokens; %d x %s %d; %d epochs (%s), kept epoch %d (%s %.4f)\n",
                batches[b]->tokenizer->type().c_str(), batches[b]->tokenizer->vocab_size(),
                meta.spec.num_layers, ArchitectureLabel(meta.spec.architecture), meta.spec.rnn_units, meta.epochs_run,
                meta.stop_reason.c_str(), meta.best_epoch,
                batches[b]->config.best_model_metric.c_str(), meta.best_metric);
  }
  return 0;
}

int RunInfo(const std::string& dir, bool json) {
  if (IsTabularModel(dir)) return RunTabularInfo(dir, json);
  auto r = LoadModelForGeneration(dir);
  if (!r.ok()) return Fail(r.status());
  const Model& m = *r.value();
  if (json) {
    std::printf("%s\n", ParamsJson(m).dump(2).c_str());
    return 0;
  }
  PrintModel(dir, m);
  auto hist = ReadFile(dir + "/model_history.csv", 16 << 20);
  if (hist.ok()) std::printf("\nmodel_history.csv:\n%s", hist.value().c_str());
  return 0;
}

}  // namespace

void AddInfoCommand(CLI::App& app) {
  static std::string dir;
  static bool json = false;
  CLI::App* cmd = app.add_subcommand("info", "Show what a model directory holds (ordinary or tabular)");
  cmd->add_option("--model-dir,-m,model_dir", dir, "model directory")->required();
  cmd->add_flag("--json", json, "print model_params.json content as JSON (tabular: tabular.json and each batch's)");
  cmd->callback([] { throw CLI::RuntimeError(RunInfo(dir, json)); });
}

}  // namespace ds::cli
