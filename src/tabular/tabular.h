// Tabular mode: whole CSV tables trained as column batches, joined back on
// generation, with conditioning across batches and seed fields.
//
//   TrainTabular:   table.csv -> m/tabular.json + m/batch_N/ (ordinary model dirs)
//   GenerateTabular: m/ -> synth.csv (original header order, original delimiter)
//   Synthesize:      both in one go (the model in a temporary directory unless
//                    one is given)
//
// Training (see tabular/plan.h for how batches and conditioning columns are
// chosen):
//   1. read the whole table (CsvReader: RFC 4180, gzip by content); every row
//      must have the header's field count ("t.csv:17: 3 fields, the header
//      has 4"); learn the column rules (types) and measure associations on a
//      sample of rows (not under dp: see below);
//   2. plan the batches; write one CSV per batch into m/.tabular-tmp/
//      (conditioning columns first, then the batch's columns, values
//      byte-exact: empty fields stay empty, "007" stays "007", "1.50" stays
//      "1.50", quotes / delimiters / newlines are quoted by AppendCsvRecord);
//   3. train every batch with Train() (train/trainer.h) in its own forked
//      process: P = min(batches, parallel_batches or the thread budget)
//      processes at a time, each with max(1, budget / P) compute threads
//      (budget = config.threads, or every CPU this process may use), the
//      widest batches first. A process reports its progress to the parent
//      over a pipe (JSON lines); a failed or killed batch stops the others
//      and fails the run with the batch named ("batch 2 (Garage_Type,
//      Garage_Cars, ...): too few records ..."). The parent itself never runs
//      OpenMP code, so forking stays safe;
//   4. write tabular.json LAST (atomically): a directory is a tabular model
//      exactly when tabular.json exists. On failure, nothing that looks like
//      a tabular model is left (directories this run created are removed).
//   Time budget (config.max_training_time_seconds): for the whole run, from
//   the start of TrainTabular; each batch process gets, when it starts, its
//   share of the time left (in proportion to its CSV's size, over the batches
//   not yet started and the process slots; see AllotSeconds) as its
//   TrainOptions::time_budget_seconds.
//   Interruption (*cancel, or SIGTERM to the batch processes): every batch
//   process stops between steps and keeps its last saved epoch; when any batch
//   saved an epoch, the run stays resumable: m/tabular_checkpoint.json (the
//   plan and settings) and m/.tabular-tmp/ (the batch CSVs) are kept, and
//   `resume` continues it: finished batches are only reloaded, the others
//   continue from their checkpoints (or start). Otherwise it is cleaned up as
//   a failure.
//   Under dp (config.dp), associations are not measured (the grouping and the
//   conditioning choice would reveal data outside the privacy guarantee):
//   grouping falls back to "order" and batches are independent, unless the
//   user gave explicit header groups.
//
// Generation: batch 0 generates the rows (N = num_lines; with seeds see
// below); each later batch generates exactly one valid row per existing row,
// with that row's conditioning values as its record prefix (batches without
// conditioning columns generate N rows joined by row index). Each batch runs
// RunGeneration (generate/workers.h: parallel workers, reproducible from the
// seed, invalid rows regenerated, the batch's column rules as validator);
// max_invalid applies to each batch and exceeding it fails the run naming the
// batch. Batch k's seed is a fixed function of (seed, k), so the same seed
// gives the same table. The output is written atomically (or to stdout) in
// the original header order with the table's delimiter.
//
// Seed fields: values for leading columns of batch 0 (TabularSpec::seedable:
// the seed columns given at training, then batch 0's other columns), either
// one set for every row (--seed-field col=value ...) or one set per row (a
// CSV whose header names the seeded columns: exactly one output row per seed
// row, in order). The seeded columns must form a leading run of the seedable
// columns, in any order; anything else is an error naming the columns that
// can be seeded and how to train for others (--seed-columns). Seed values
// are checked up front against batch 0's learned rules and vocabulary.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "generate/workers.h"
#include "tabular/plan.h"
#include "train/trainer.h"
#include "util/status.h"

namespace ds {

// True when dir/tabular.json exists.
bool IsTabularModel(const std::string& dir);
// Reads and checks dir/tabular.json.
Result<TabularSpec> ReadTabularSpec(const std::string& dir);
// Every check GenerateTabular makes of a tabular model before it generates:
// tabular.json, and each batch model loaded as generation loads it
// (LoadModelForGeneration's checks) with the columns and delimiter
// tabular.json names. `datasynth info` runs the same. `batches` (optional)
// receives the loaded batch models.
Result<TabularSpec> CheckTabularModel(const std::string& dir,
                                      std::vector<std::unique_ptr<Model>>* batches = nullptr);

// A whole table in memory.
struct RowTable {
  std::string path;
  char delimiter = ',';
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // [rows][header.size()]
};
// Reads a CSV table (header required, validated; every row with the header's
// field count). max_rows 0 = all.
Result<RowTable> ReadRowTable(const std::string& path, char delimiter, int64_t max_rows = 0);
// Writes header + rows (AppendCsvRecord) atomically to path, or to stdout for
// "" / "-".
Status WriteRowTable(const std::string& path, const std::vector<std::string>& header,
                  const std::vector<std::vector<std::string>>& rows, char delimiter);

// Progress callbacks (the library never writes to the terminal itself).
struct BatchTrainResult {
  int batch = 0;
  int threads = 0;
  int64_t records = 0;
  int epochs_run = 0;
  int best_epoch = 0;
  double best_metric = 0;
  double loss = 0, val_loss = 0;  // of the kept epoch (val_loss NaN without validation)
  double seconds = 0;
  double tokens_per_s = 0;
  std::string stop_reason;
};

class TabularObserver {
 public:
  virtual ~TabularObserver() = default;
  virtual void OnInfo(const std::string& message) {}
  virtual void OnWarning(const std::string& message) {}
  // Training, per batch (messages of the batch's Train() run).
  virtual void OnBatchInfo(int batch, const std::string& message) {}
  virtual void OnBatchEpoch(int batch, const EpochResult& r) {}
  virtual void OnBatchTrained(const BatchTrainResult& r) {}
  // Generation, per batch.
  virtual void OnGenerateProgress(int batch, int batches, const GenerateProgress& p) {}
  virtual void OnBatchGenerated(int batch, const GenerateSummary& s) {}
};

struct TabularTrainOptions {
  Config config;  // per-batch training settings; field_delimiter = the table's
                  // delimiter ("" = ','), max_lines = rows of the table used
  TabularConfig tabular;
  std::string input_path;
  std::string model_dir;                      // overwritten only with config.overwrite
  const std::atomic<bool>* cancel = nullptr;  // set -> stop the batch processes, kCancelled
  // Continue an interrupted run in model_dir: input_path, tabular and most of
  // config are ignored (the stored ones are used); explicit epochs,
  // max_training_time_seconds, threads and tabular.parallel_batches > 0 apply.
  bool resume = false;
};

struct TabularTrainSummary {
  TabularSpec spec;
  std::vector<BatchTrainResult> batches;
  double seconds = 0;
  int processes = 0;  // batch processes run side by side
};

Result<TabularTrainSummary> TrainTabular(const TabularTrainOptions& options,
                                         TabularObserver* observer);

// Seed fields (see the file comment).
struct TabularSeeds {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;  // [seeds][columns]
  bool per_row = false;                // false: rows.size() == 1, the same seed for every row
  std::string source = "seed fields";  // for messages: "--seed-field" or the file
};
// "column=value" assignments (split at the first '='), one set for all rows.
Result<TabularSeeds> ParseSeedFields(const std::vector<std::string>& assignments);
// A CSV of per-row seeds: header = seeded columns, one row per output row.
Result<TabularSeeds> ReadSeedFile(const std::string& path, char delimiter);

struct TabularGenerateOptions {
  std::string model_dir;
  std::string output;                // "" or "-" = stdout
  bool overwrite = false;            // an existing output file may be replaced
  std::optional<int64_t> num_lines;  // default: the training row count
  uint64_t seed = 0;                 // 0: the model's training seed
  std::optional<double> gen_temp;    // defaults: each batch model's own settings
  std::optional<int64_t> gen_chars;
  std::optional<int> predict_batch_size;
  std::optional<int64_t> max_invalid;  // per batch
  double parallelism = 0;              // workers per batch (docs/reference.md §5)
  RuleChecks checks;                   // validation switches of every batch (field count and
                                       // the learned rules; all on by default)
  // At most one of these (seed_fields: "col=value" each; seed_file: per-row CSV
  // with the table's delimiter).
  std::vector<std::string> seed_fields;
  std::string seed_file;
  std::optional<TabularSeeds> seeds;
  const std::atomic<bool>* cancel = nullptr;
  // Device of the batch workers (generate/generate.h ResolveInferDevice).
  std::string device = "auto", gpu_memory = "grow", gpu_memory_limit;
  bool copy_guard = true;  // false: ignore the batch models' copy guards (--no-copy-guard)
};

struct TabularGenerateSummary {
  int64_t rows = 0;                      // rows written
  std::vector<GenerateSummary> batches;  // per batch (valid / invalid / tokens / seconds)
  int64_t invalid = 0;                   // over all batches
  double seconds = 0;
  std::string output;
};

Status GenerateTabular(const TabularGenerateOptions& options, TabularObserver* observer,
                       TabularGenerateSummary* summary);

struct SynthesizeOptions {
  TabularTrainOptions train;        // model_dir "" = a temporary directory, removed at the end
  TabularGenerateOptions generate;  // model_dir is ignored (the trained one is used)
};
struct SynthesizeSummary {
  TabularTrainSummary train;
  TabularGenerateSummary generate;
};
Status Synthesize(const SynthesizeOptions& options, TabularObserver* observer,
                  SynthesizeSummary* summary);

}  // namespace ds
