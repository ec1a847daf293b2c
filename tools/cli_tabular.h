// CLI pieces shared by train --tabular, generate (tabular models) and synthesize.
#pragma once

#include "cli.h"
#include "tabular/tabular.h"

namespace ds::cli {

struct TabularFlags {
  int batch_columns = 15, condition_columns = 3, parallel_batches = 0;
  CLI::Option* batch_columns_option = nullptr;  // given or not
  std::string grouping = "auto", header_groups, seed_columns;
  void Add(CLI::App* cmd);
  Status Apply(TabularConfig* t) const;
};

struct SeedFlags {
  std::vector<std::string> seed_field;
  std::string seed_fields;
  void Add(CLI::App* cmd);
};

// An interrupted training run (SIGINT / SIGTERM, Code::kCancelled): prints the
// library's message and, when something was saved, the command that
// continues it ("datasynth train [--tabular] --resume --model-dir DIR").
// Returns 130.
int ReportInterrupted(const Status& s, const std::string& model_dir, bool tabular);

// Terminal output for tabular runs.
class TabularCliObserver : public TabularObserver {
 public:
  void OnInfo(const std::string& m) override { line_.Print(m); }
  void OnWarning(const std::string& m) override { line_.Print("warning: " + m); }
  void OnBatchInfo(int batch, const std::string& m) override {
    line_.Print(fmt::format("[batch {}] {}", batch, m));
  }
  void OnBatchEpoch(int batch, const EpochResult& r) override;
  void OnBatchTrained(const BatchTrainResult& r) override;
  void OnGenerateProgress(int batch, int batches, const GenerateProgress& p) override;
  void OnBatchGenerated(int batch, const GenerateSummary& s) override;
  void Finish() { line_.Finish(); }  // ends an open progress line

 private:
  ProgressLine line_{5.0};
};

}  // namespace ds::cli
