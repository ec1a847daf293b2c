// datasynth info: what a model directory holds.
#include <cmath>

#include "cli.h"
#include "model/model_dir.h"
#include "tokenize/field_tokenizer.h"
#include "util/fs.h"

namespace ds::cli {
namespace {

int RunInfo(const std::string& dir, bool json) {
  auto r = LoadModel(dir);
  if (!r.ok()) return Fail(r.status());
  const Model& m = *r.value();
  const ModelMeta& meta = m.meta;
  if (json) {
    nlohmann::json j = m.config.ToJson();
    j["datasynth"] = meta.ToJson();
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  ParamLayout layout = ParamLayout::For(meta.spec);
  std::printf("model        %s (format %d, datasynth %s)\n", dir.c_str(), meta.format_version,
              meta.datasynth_version.c_str());
  std::printf("trained on   %s: %lld records, %lld tokens\n", meta.input_path.c_str(),
              (long long)meta.records, (long long)meta.tokens);
  if (meta.delimiter) {
    std::string cols;
    for (size_t i = 0; i < meta.header.size(); ++i) cols += (i ? ", " : "") + meta.header[i];
    std::printf("columns      %zu, delimiter '%c': %s\n", meta.header.size(), meta.delimiter,
                cols.c_str());
  } else {
    std::printf("records      text lines\n");
  }
  std::printf("tokenizer    %s, %d tokens%s\n", m.tokenizer->type().c_str(),
              m.tokenizer->vocab_size(), m.tokenizer->column_markers() ? ", column markers" : "");
  if (const auto* ft = dynamic_cast<const FieldTokenizer*>(m.tokenizer.get()))
    std::printf("schema\n%s", ft->Describe().c_str());
  std::printf("network      embedding %d, %d x LSTM %d, dropout %.2f, %.2fM parameters\n",
              meta.spec.embedding_dim, meta.spec.num_layers, meta.spec.rnn_units,
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
  auto hist = ReadFile(dir + "/model_history.csv", 16 << 20);
  if (hist.ok()) std::printf("\nmodel_history.csv:\n%s", hist.value().c_str());
  return 0;
}

}  // namespace

void AddInfoCommand(CLI::App& app) {
  static std::string dir;
  static bool json = false;
  CLI::App* cmd = app.add_subcommand("info", "Show what a model directory holds");
  cmd->add_option("--model-dir,-m,model_dir", dir, "model directory")->required();
  cmd->add_flag("--json", json, "print model_params.json content as JSON");
  cmd->callback([] { throw CLI::RuntimeError(RunInfo(dir, json)); });
}

}  // namespace ds::cli
