// datasynth train: input file -> model directory.
#include <cmath>

#include "cli.h"
#include "cli_tabular.h"
#include "generate/generate.h"
#include "train/trainer.h"

namespace ds::cli {
namespace {

struct TrainArgs {
  std::string input, model_dir, config_file;
  bool resume = false;
  bool tabular = false;
  ConfigFlags flags;
  TabularFlags tab;
};

class CliObserver : public TrainObserver {
 public:
  void OnInfo(const std::string& m) override { line_.Print(m); }
  void OnProgress(const TrainProgress& p) override {
    line_.Update(fmt::format("epoch {}/{}  step {}/{}  loss {:.4f}  {:.0f} tokens/s  ETA {}",
                             p.epoch, p.epochs, p.step, p.steps, p.loss, p.tokens_per_s,
                             FormatDuration(p.eta_seconds)));
  }
  void OnEpoch(const EpochResult& r) override {
    std::string val = std::isnan(r.val_loss)
                          ? std::string()
                          : fmt::format("  val_loss {:.4f}  val_accuracy {:.4f}", r.val_loss,
                                        r.val_accuracy);
    std::string dp = r.epsilon > 0 ? fmt::format("  epsilon {:.3g}", r.epsilon) : "";
    line_.Print(fmt::format("epoch {:>3}  loss {:.4f}  accuracy {:.4f}{}{}  {:.1f}s  {:.0f} tokens/s{}",
                            r.epoch, r.loss, r.accuracy, val, dp, r.seconds, r.tokens_per_s,
                            r.best ? "  *best" : ""));
    if (g_verbose && r.device_memory)
      line_.Print("  GPU memory: " + r.device_memory->ToString());
  }

  void Finish() { line_.Finish(); }

 private:
  ProgressLine line_;
};

int RunTrain(TrainArgs& a) {
  TrainOptions o;
  if (a.input.empty() && !a.resume)
    return Fail(DS_ERR(kInvalidArgument, "--input is required (the records to train on)"));
  if (!a.config_file.empty()) {
    Status s = o.config.LoadFile(a.config_file);
    if (!s.ok()) return Fail(s);
  }
  if (Status s = a.flags.Apply(&o.config); !s.ok()) return Fail(s);
  if (!a.resume)  // (a resumed run keeps the stored delimiter)
    if (std::string note = DefaultDelimiterFromName(a.input, &o.config, a.tabular); !note.empty())
      std::fprintf(stderr, "%s\n", note.c_str());
  ReportDeviceFallback(o.config.IsExplicit("device"));
  o.input_path = a.input;
  o.model_dir = a.model_dir;
  o.resume = a.resume;
  if (a.tabular) {
    TabularTrainOptions t;
    t.resume = a.resume;
    t.config = o.config;
    if (t.config.field_delimiter.empty()) t.config.field_delimiter = ",";
    if (Status s = a.tab.Apply(&t.tabular); !s.ok()) return Fail(s);
    t.input_path = a.input;
    t.model_dir = a.model_dir;
    t.cancel = InstallInterruptFlag();
    TabularCliObserver tobs;
    auto r = TrainTabular(t, &tobs);
    tobs.Finish();
    if (!r.ok() && r.status().code() == Code::kCancelled)
      return ReportInterrupted(r.status(), a.model_dir, true);
    if (!r.ok()) return Fail(r.status());
    std::fprintf(stderr, "trained %zu batch models in %s (%d processes side by side)\nmodel written to %s\n",
                 r.value().batches.size(), FormatDuration(r.value().seconds).c_str(),
                 r.value().processes, a.model_dir.c_str());
    return 0;
  }
  CliObserver obs;
  o.cancel = InstallInterruptThread();
  auto r = Train(o, &obs);
  obs.Finish();
  if (!r.ok() && r.status().code() == Code::kCancelled)
    return ReportInterrupted(r.status(), a.model_dir, false);
  if (!r.ok()) return Fail(r.status());
  const TrainSummary& s = r.value();
  const auto& best = s.history[size_t(s.meta.best_epoch - 1)];
  std::string val = std::isnan(best.val_loss) ? "" : fmt::format(", val_loss {:.4f}", best.val_loss);
  std::string dp = s.meta.dp ? fmt::format("; (epsilon {:.3g}, delta {:.3g})-DP per record",
                                           s.meta.epsilon, s.meta.delta)
                             : "";
  std::fprintf(stderr,
               "trained %d epochs in %s (%s), %.0f tokens/s (%s); kept epoch %d: loss %.4f%s (untrained "
               "%.4f)%s\nmodel written to %s\n",
               s.meta.epochs_run, FormatDuration(s.seconds).c_str(), s.meta.stop_reason.c_str(),
               s.tokens_per_s, s.meta.precision.c_str(), s.meta.best_epoch, best.loss, val.c_str(), s.untrained_val_loss,
               dp.c_str(), a.model_dir.c_str());
  if (s.device_memory) {
    const AllocatorStats& m = *s.device_memory;
    std::fprintf(stderr, "GPU memory: peak in use %s, peak reserved %s, limit %s%s\n",
                 FormatBytes(m.peak_allocated_bytes).c_str(),
                 FormatBytes(m.peak_reserved_bytes).c_str(),
                 m.limit_bytes ? FormatBytes(m.limit_bytes).c_str() : "none",
                 m.num_oom_retries ? fmt::format(", {} OOM retries", m.num_oom_retries).c_str() : "");
  }
  return 0;
}

}  // namespace

void AddTrainCommand(CLI::App& app) {
  auto* a = new TrainArgs();  // lives for the whole run
  CLI::App* cmd = app.add_subcommand("train", "Train a model on a CSV or text file");
  cmd->add_option("--input,-i,--input-data-path", a->input,
                  "records: CSV with header, or text lines (with --resume: the stored path)");
  cmd->add_option("--model-dir,-m,--checkpoint-dir", a->model_dir, "output model directory")
      ->required();
  cmd->add_option("--config,-c", a->config_file, "JSON file of config keys (flags win)");
  cmd->add_flag("--resume", a->resume,
                "continue an interrupted run from its last checkpoint (with --tabular: by batch)");
  cmd->add_flag("--tabular", a->tabular,
                "a table: one model per column batch, later batches conditioned on earlier ones");
  a->tab.Add(cmd);
  a->flags.Add(cmd, {Config::Group::kTraining, Config::Group::kTokenizer, Config::Group::kPrivacy});
  cmd->callback([a] { throw CLI::RuntimeError(RunTrain(*a)); });
}

}  // namespace ds::cli
