// Training: input file -> trained model directory.
//
//   Train(options, observer):
//     1. refuse to overwrite an existing model unless config.overwrite;
//     2. read records (train/dataset.h), learn column rules and the tokenizer;
//     3. build the sequence stream and batches (too few records: clear error);
//     4. for each epoch: train batches (dropout on), validation batches, one
//        history row; keep the best epoch's weights (save_best_model) or the
//        last; early stopping on best_model_metric with patience / min_delta;
//        max_training_time_seconds; a checkpoint after every epoch;
//     5. write tokenizer, rules, weights and, LAST, model_params.json.
//   A failure before step 5 leaves no model_params.json: nothing that looks
//   like a model (a directory we created is removed).
//
// The library reports progress through TrainObserver; it never writes to the
// terminal itself.
#pragma once

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
  double loss = 0, accuracy = 0;
  double val_loss = 0, val_accuracy = 0;  // NaN without validation
  double epsilon = 0, delta = 0;          // dp only
  bool best = false;
  double seconds = 0;
  double tokens_per_s = 0;
  std::optional<AllocatorStats> device_memory;  // GPU backends: the allocator after the epoch
};

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
