#include "cli_tabular.h"

#include <cmath>

namespace ds::cli {

void TabularFlags::Add(CLI::App* cmd) {
  const char* g = "Tabular";
  batch_columns_option =
      cmd->add_option("--tabular-batch-size,--tabular_batch_size", batch_columns,
                      "columns per batch model [default: 15; with the field tokenizer a table "
                      "of up to 30 columns is one model]")->group(g);
  cmd->add_option("--tabular-grouping,--tabular_grouping", grouping,
                  "auto (related columns together) | order (header order) [default: auto]")->group(g);
  cmd->add_option("--header-groups,--tabular_header_groups", header_groups,
                  "explicit batches: \"a,b,c;d,e\" or a JSON array of arrays")->group(g);
  cmd->add_option("--condition-columns,--tabular_condition_columns", condition_columns,
                  "columns of earlier batches each batch is conditioned on; 0 = independent "
                  "batches (the reference) [default: 3]")->group(g);
  cmd->add_option("--seed-columns,--tabular_seed_columns", seed_columns,
                  "columns placed first so that generation can seed them: \"a,b\"")->group(g);
  cmd->add_option("--parallel-batches,--tabular_parallel_batches", parallel_batches,
                  "batch training processes at a time (0 = by the thread budget)")->group(g);
}

Status TabularFlags::Apply(TabularConfig* t) const {
  t->batch_columns = batch_columns;
  t->batch_columns_default = batch_columns_option && batch_columns_option->count() == 0;
  t->grouping = grouping;
  t->condition_columns = condition_columns;
  t->parallel_batches = parallel_batches;
  if (!header_groups.empty()) {
    DS_ASSIGN_OR_RETURN(t->header_groups, ParseHeaderGroups(header_groups));
  }
  if (!seed_columns.empty()) {
    DS_ASSIGN_OR_RETURN(t->seed_columns, ParseColumnList(seed_columns));
  }
  return t->Validate();
}

namespace {
std::string ShellQuote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789_./-+=:,@") == std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}
}  // namespace

int ReportInterrupted(const Status& s, const std::string& model_dir, bool tabular) {
  std::fprintf(stderr, "datasynth: %s\n", s.message().c_str());
  if (s.message().find("continue with --resume") != std::string::npos)
    std::fprintf(stderr, "  to continue: datasynth train%s --resume --model-dir %s\n",
                 tabular ? " --tabular" : "", ShellQuote(model_dir).c_str());
  return ExitCodeFor(s);
}

void SeedFlags::Add(CLI::App* cmd) {
  cmd->add_option("--seed-field", seed_field,
                  "column=value for every row (repeatable; tabular models)")->group("Seeding");
  cmd->add_option("--seed-fields", seed_fields,
                  "CSV of per-row seeds: one generated row per seed row, in order")->group("Seeding");
}

void TabularCliObserver::OnBatchEpoch(int batch, const EpochResult& r) {
  std::string val = std::isnan(r.val_loss) ? "" : fmt::format("  val_loss {:.4f}", r.val_loss);
  line_.Print(fmt::format("[batch {}] epoch {:>3}  loss {:.4f}{}  {:.1f}s{}", batch, r.epoch, r.loss,
                          val, r.seconds, r.best ? "  *best" : ""));
}

void TabularCliObserver::OnBatchTrained(const BatchTrainResult& r) {
  line_.Print(fmt::format("[batch {}] trained: {} epochs ({}), kept epoch {}, {} in {}", r.batch,
                          r.epochs_run, r.stop_reason, r.best_epoch, r.records,
                          FormatDuration(r.seconds)));
}

void TabularCliObserver::OnGenerateProgress(int batch, int batches, const GenerateProgress& p) {
  line_.Update(fmt::format("batch {}/{}: {}/{} rows  {:.0f} rows/s  valid {:.1f}%", batch + 1,
                           batches, p.valid, p.wanted, p.records_per_s, 100 * p.valid_share),
               p.final);
}

void TabularCliObserver::OnBatchGenerated(int batch, const GenerateSummary& s) {
  double total = double(s.valid + s.invalid);
  line_.Print(fmt::format("[batch {}] {} valid rows ({} invalid, {:.1f}% valid) in {}", batch,
                          s.valid, s.invalid, total > 0 ? 100.0 * double(s.valid) / total : 100.0,
                          FormatDuration(s.seconds)));
}

}  // namespace ds::cli
