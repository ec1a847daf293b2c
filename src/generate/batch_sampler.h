// Continuous-batching sampler: the inner loop of generation in one process.
//
// `slots` records are sampled side by side on one InferBackend. Every Step()
// advances each busy slot by exactly one token in one batched backend call;
// a slot whose record ended is refilled from the task queue at the start of
// the next Step, so no slot waits for the slowest record of a batch. Each
// record is detokenized incrementally (one RecordDecoder::Push per token), so
// the work per record is linear in its length.
//
// Record (attempt) `task.id` is a pure function of (seed, id, prefix):
//   state   reset (InferBackend::ResetSlot) at the start of the record
//   input   <n>, then the prefix tokens one per step (forced), then the
//           sampled tokens
//   rng     Philox(seed, id): one UniformDouble per sampled token
//   stop    <n> sampled (complete), or the decoded record reached gen_chars
//           characters (complete, truncated), or max_tokens tokens sampled
//           without <n> (INVALID: "no end of record after N tokens"), or a
//           TokenFilter masked every token (INVALID).
// so the output does not depend on slot assignment, batch composition or the
// number of processes, provided the backend's logits for a row do not depend
// on the other rows of a batch of fixed size, nor on the row's position
// (SamplerOptions::full_batch keeps the batch size fixed; tests check the CPU
// backend bit for bit).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "generate/sampler.h"
#include "tokenize/tokenizer.h"
#include "util/rng.h"
#include "util/status.h"

namespace ds {

// One generation attempt: its Philox stream id and its prefix (an index into
// the sampler's prefix list, -1 = none).
struct GenTask {
  uint64_t id = 0;
  int32_t prefix = -1;
};

struct GeneratedRecord {
  uint64_t id = 0;      // attempt index (the Philox stream)
  int32_t prefix = -1;  // prefix index, -1 = none
  bool valid = true;
  bool copy_rejected = false;       // invalid because the copy guard rejected it
  std::string text;                 // the record as one line: fields joined by the delimiter
  std::string explain;              // why it is invalid ("" when valid)
  std::vector<std::string> fields;  // decoded fields (the prefix's included)
  int64_t tokens = 0;               // tokens sampled (prefix tokens not counted)
};

struct SamplerOptions {
  uint64_t seed = 0;
  double temperature = 1.0;   // gen_temp; <= kGreedyTemperature = argmax
  int64_t gen_chars = 0;      // 0 = no cap
  int64_t max_tokens = 8192;  // sampled tokens per record before it is given up as invalid
  char delimiter = 0;         // joins fields into GeneratedRecord::text (0 = text lines)
  // Every Step runs ALL slots (idle ones on a dummy <n> input, their state is
  // reset before use), so the backend always sees the same batch shape: GEMM
  // libraries pick kernels by shape (e.g. a GEMV path for one row) and the
  // results of a row may then differ in the last bits with the batch size.
  // A fixed shape keeps the records independent of how many other records
  // share a step, at the price of idle rows while fewer records than slots
  // are left (the tail of a run).
  bool full_batch = true;
};

class BatchSampler {
 public:
  // `prefixes[k]` are the token ids of prefix k (Tokenizer::EncodePrefix);
  // `backend` must have at least one slot; `filter` may be null.
  // `prefix_fields[k]`, when given, are prefix k's field values: a finished
  // record's leading fields are set to them verbatim (a record tokenizer
  // decodes a rare category's <other> token as some rare value, not
  // necessarily the one given).
  BatchSampler(const Tokenizer& tok, InferBackend& backend, const SamplerOptions& options,
               std::vector<std::vector<int32_t>> prefixes, TokenFilter* filter = nullptr,
               std::vector<std::vector<std::string>> prefix_fields = {});

  void Submit(const GenTask& task) { queue_.push_back(task); }
  size_t queued() const { return queue_.size(); }
  int active() const { return active_; }
  bool idle() const { return active_ == 0 && queue_.empty(); }
  int slots() const { return int(slots_.size()); }

  // Starts queued tasks in free slots, runs one backend step over every busy
  // slot and appends the records that ended to `done` (fields, text, tokens;
  // `valid` false only for the sampler's own failures listed above).
  void Step(std::vector<GeneratedRecord>* done);

  int64_t tokens_sampled() const { return tokens_sampled_; }
  int64_t steps() const { return steps_; }
  int64_t rows_stepped() const { return rows_stepped_; }  // busy rows over all steps
  int64_t idle_rows() const { return idle_rows_; }        // padding rows (full_batch)

 private:
  struct Slot {
    bool busy = false;
    GenTask task;
    Philox rng{0, 0};
    RecordDecoder decoder;
    size_t feed = 0;      // prefix tokens fed so far
    int32_t input = 0;    // token fed at the next step
    int64_t sampled = 0;  // tokens sampled for this record
    explicit Slot(const Tokenizer& t) : decoder(t) {}
  };
  void Start(int s, const GenTask& task);
  void Finish(int s, bool valid, std::string explain, std::vector<GeneratedRecord>* done);
  // The prefix token slot s is fed next, or null when it samples.
  const int32_t* Forced(const Slot& sl) const {
    if (sl.task.prefix < 0) return nullptr;
    const auto& pre = prefixes_[size_t(sl.task.prefix)];
    return sl.feed < pre.size() ? &pre[sl.feed] : nullptr;
  }

  const Tokenizer& tok_;
  InferBackend& backend_;
  SamplerOptions opt_;
  std::vector<std::vector<int32_t>> prefixes_;
  TokenFilter* filter_;
  std::vector<std::vector<std::string>> prefix_fields_;  // [prefix] or empty
  int V_;
  std::vector<Slot> slots_;
  std::deque<GenTask> queue_;
  int active_ = 0;
  std::vector<uint8_t> never_;   // [V] 1 = kUnused (never sampled)
  std::vector<int32_t> never_before_;  // [V + 1] kUnused ids below each id
  std::vector<int> ids_;         // [slots] slot ids of this step's batch
  std::vector<int32_t> tokens_;  // [slots] inputs of this step's batch
  std::vector<int32_t> lo_, hi_;  // [slots] logit ids each row samples from (StepRange)
  std::vector<float> logits_;    // [slots, V]
  std::vector<float> scratch_;   // [SampleScratchSize(V)]
  int64_t tokens_sampled_ = 0, steps_ = 0, rows_stepped_ = 0, idle_rows_ = 0;
};

// Joins fields with the delimiter (a text record is its single field).
std::string JoinFields(const std::vector<std::string>& fields, char delimiter);

}  // namespace ds
