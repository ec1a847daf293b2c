// Record generation as a library: what a model must provide, the options of a
// run, and RecordGenerator, an in-process generator object that yields records
// one at a time (for programs that embed datasynth). RunGeneration
// (generate/workers.h) runs the same attempts in worker processes and gives
// byte-identical results for the same seed.
//
//   GenerationModel m = ...;               // or LoadGenerationModel(dir) (generate/generate.h)
//   GenerateOptions o; o.num_lines = 100; o.seed = 7;
//   DS_ASSIGN_OR_RETURN(auto gen, RecordGenerator::Create(m, o));
//   GeneratedRecord r;
//   while (true) {
//     DS_ASSIGN_OR_RETURN(bool more, gen->Next(&r));
//     if (!more) break;
//     if (r.valid) use(r.fields);  else log(r.explain);
//   }
//
// Validation of a finished record (ValidateRecord): the sampler's own failures
// (no end of record, every token masked) first; then, for delimited data, the
// ColumnRules (field count and the learned per-column rules, each switchable
// through ColumnRules::set_checks). Text-line models accept every record that
// ended. Last, a valid record that copies a rare training row (the model's
// copy guard) is rejected (explain: kCopyExplain). Only valid records count
// towards num_lines.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "generate/batch_sampler.h"
#include "generate/constraints.h"
#include "generate/copy_guard.h"
#include "generate/sampler.h"
#include "generate/scheduler.h"
#include "schema/column_rules.h"
#include "tokenize/tokenizer.h"
#include "util/status.h"

namespace ds {

// What generation needs from a trained model. `make_backend` is called once
// per generating process (in each worker after fork), with the slot count.
struct GenerationModel {
  const Tokenizer* tokenizer = nullptr;
  std::vector<std::string> header;   // CSV header; empty for text lines
  char delimiter = 0;                // 0 for text lines
  std::optional<ColumnRules> rules;  // delimited data: validation rules
  std::function<Result<std::unique_ptr<InferBackend>>(int slots)> make_backend;
  DeviceKind device = DeviceKind::kCpu;  // what make_backend creates
  // Constrained decoding (generate/constraints.h): called like make_backend,
  // once per generating process; null = no filter. GenerateOptions::filter,
  // when set, takes precedence in-process.
  std::function<Result<std::unique_ptr<TokenFilter>>(int slots)> make_filter;
  std::shared_ptr<const RecordConstraints> constraints;  // the tables behind make_filter, if any
  // Rare training rows no record may copy (generate/copy_guard.h); null = none.
  std::shared_ptr<const CopyGuard> copy_guard;
};

struct GenerateOptions {
  int64_t num_lines = 1000;  // valid records wanted (ignored with prefixes)
  uint64_t seed = 0;
  double temperature = 1.0;     // gen_temp
  int64_t gen_chars = 0;        // 0 = no cap
  int predict_batch_size = 64;  // slots per process
  int64_t max_invalid = 1000;
  int64_t max_tokens = 8192;                      // per record, then invalid
  std::optional<std::string> start_string;        // prefix of every record
  std::vector<std::string> prefixes;              // non-empty: one valid record per prefix
  std::string prefixes_source = "start strings";  // for error messages ("prefixes.txt")
  TokenFilter* filter = nullptr;                  // constrained decoding hook (in-process only)
  // Count mode: only attempts [first_attempt, end_attempt) (a shard of an
  // mpirun generation; AttemptScheduler::Options first / end).
  uint64_t first_attempt = 0, end_attempt = UINT64_MAX;
};

// Encodes start strings for the sampler. With a delimiter, each must end with
// it ("Adelie,Torgersen,"): it is split on the delimiter into complete fields
// (Tokenizer::EncodePrefix). Without one, the string is the start of the line.
// Errors name `source` and the 1-based line: "prefixes.txt:3: ...".
// `fields`, when not null, gets each string's fields (empty without a delimiter).
Result<std::vector<std::vector<int32_t>>> EncodeStartStrings(
    const Tokenizer& tok, char delimiter, const std::vector<std::string>& strings,
    const std::string& source, std::vector<std::vector<std::string>>* fields = nullptr);

// Sets valid/explain of a finished record (see the file comment).
void ValidateRecord(const GenerationModel& model, GeneratedRecord* record);

// Release window (AttemptScheduler::Options::window) for `processes` x
// `slots` sampling slots: finished records wait for every earlier attempt
// before they are released, so the window must hold many batches' worth of
// records, or one long record would stall every slot (head-of-line
// blocking). 64 x slots x processes, at least 4096 (memory: the buffered
// records, typically a few MB).
int64_t ReleaseWindow(int slots, int processes);

// Checks options against the model; fills the sampler options, the encoded
// prefixes and the scheduler options (window = `window`).
struct RunPlan {
  SamplerOptions sampler;
  std::vector<std::vector<int32_t>> prefixes;
  // Record tokenizers: the prefixes' field values, written back verbatim
  // (BatchSampler); empty otherwise.
  std::vector<std::vector<std::string>> prefix_fields;
  AttemptScheduler::Options schedule;
};
Result<RunPlan> PlanRun(const GenerationModel& model, const GenerateOptions& options,
                        int64_t window);

class RecordGenerator {
 public:
  static Result<std::unique_ptr<RecordGenerator>> Create(const GenerationModel& model,
                                                         const GenerateOptions& options);
  // The next record (valid or invalid) in output order; false when every
  // wanted record was produced. An error (too many invalid) is returned once
  // the record that crossed max_invalid was yielded.
  Result<bool> Next(GeneratedRecord* record);

  int64_t valid() const { return sched_->released_valid(); }
  int64_t invalid() const { return sched_->released_invalid(); }
  int64_t tokens_sampled() const { return sampler_->tokens_sampled(); }
  const BatchSampler& sampler() const { return *sampler_; }

 private:
  RecordGenerator() = default;
  const GenerationModel* model_ = nullptr;
  std::unique_ptr<InferBackend> backend_;
  std::unique_ptr<TokenFilter> filter_;  // from model.make_filter
  std::unique_ptr<BatchSampler> sampler_;
  std::unique_ptr<AttemptScheduler> sched_;
  std::vector<GeneratedRecord> done_;
  std::vector<GenTask> tasks_;
};

}  // namespace ds
