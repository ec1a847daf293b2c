// Training: input file -> trained model directory.
//
//   Train(options, observer):
//     1. refuse to overwrite an existing model unless config.overwrite;
//     2. read records (train/dataset.h), learn column rules and the tokenizer;
//     3. build the sequence stream and batches (too few records: clear error);
//     4. for each epoch: train batches (dropout on), validation batches, one
//        history row; keep the best epoch's weights (save_best_model) or the
//        last; early stopping on best_model_metric with patience / min_delta;
//        max_training_time_seconds; max_training_steps (optimizer steps of the
//        whole run, resumed sessions included: the epoch that reaches it stops
//        there, validates and saves); a checkpoint after every epoch;
//     5. write tokenizer, rules, weights and, LAST, model_params.json.
//   A failure before step 5 leaves no model_params.json: nothing that looks
//   like a model (a directory we created is removed).
//
// Time budget: max_training_time_seconds (or TrainOptions::time_budget_seconds)
// covers the whole call from its start, reading and tokenizer included, and
// earlier sessions of a resumed run. Before every step the trainer checks that
// the step, the epoch's validation pass and the checkpoint still fit (from the
// measured step, validation and save times); when they do not, it stops the
// epoch there, validates (time-boxed: the first validation batches that fit)
// and saves, and reports one OnInfo line. At least one step runs.
//
// Cancellation: when *TrainOptions::cancel becomes true (the CLI sets it from
// SIGINT / SIGTERM), the run stops between steps (or between validation
// batches), abandons the unfinished epoch and returns kCancelled: the last
// saved epoch stays a loadable model and `--resume` continues from it. A run
// that saved no epoch removes what it wrote (its directory, if it created it).
//
// The library reports progress through TrainObserver; it never writes to the
// terminal itself.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/device_allocator.h"
#include "config/config.h"
#include "model/model_dir.h"
#include "util/status.h"

namespace ds {

struct EpochResult {
  int epoch = 0;
  int64_t steps = 0;  // optimizer steps of the run when the epoch ended (all sessions)
  double loss = 0, accuracy = 0;
  double val_loss = 0, val_accuracy = 0;  // NaN without validation
  double epsilon = 0, delta = 0;          // dp only
  double learning_rate = 0;               // the rate of the epoch's steps (lr_schedule)
  bool best = false;
  double seconds = 0;
  double tokens_per_s = 0;
  std::optional<AllocatorStats> device_memory;  // GPU backends: the allocator after the epoch
};

// The one JSON form of an EpochResult (checkpoint.json's history, the tabular batch
// processes' epoch frames): every field but device_memory; NaN as null.
// EpochFromJson throws nlohmann::json::exception on a missing or mistyped field.
nlohmann::json EpochToJson(const EpochResult& r);
EpochResult EpochFromJson(const nlohmann::json& j);

struct TrainProgress {
  int epoch = 0, epochs = 0;
  int64_t step = 0, steps = 0;  // within the epoch
  double loss = 0;              // running mean over the epoch so far
  double tokens_per_s = 0;
  double eta_seconds = 0;       // for the whole run (all epochs)
};

class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void OnInfo(const std::string& message) {}
  virtual void OnProgress(const TrainProgress& p) {}
  virtual void OnEpoch(const EpochResult& r) {}
};

struct TrainOptions {
  Config config;
  std::string input_path;
  std::string model_dir;
  bool resume = false;
  const std::atomic<bool>* cancel = nullptr;  // set -> stop at the next step, kCancelled
  // > 0: the time budget of this call alone (tabular batches: their share of
  // the table's budget); it replaces config.max_training_time_seconds and
  // does not count earlier sessions.
  double time_budget_seconds = 0;
};

struct TrainSummary {
  ModelMeta meta;
  std::vector<EpochResult> history;
  double untrained_val_loss = 0;  // loss of the initial weights on the validation batches
  double seconds = 0;
  double tokens_per_s = 0;  // training tokens/s over the run
  std::optional<AllocatorStats> device_memory;  // GPU backends: the allocator at the end
};

Result<TrainSummary> Train(const TrainOptions& options, TrainObserver* observer);

}  // namespace ds
