// Attempt bookkeeping for one generation run: which attempts to start next,
// and the release of finished attempts in a fixed output order, so that the
// output depends only on the seed (not on how many processes or slots ran the
// attempts, nor in which order they finished).
//
// Count mode (num_prefixes == 0): attempts 0, 1, 2, ... (Philox stream = id),
// all with the same prefix (`count_prefix`, -1 = none). Results are released
// in id order; the run is finished when `target` valid records were released.
// Invalid records are counted in release order, and the run fails as soon as
// more than `max_invalid` were released: the output is then also a pure
// function of the seed. Issue policy: at most `window` attempts outstanding
// (issued and not yet released), and no more than the remaining need divided
// by the valid share seen so far (Laplace-smoothed, floored at 1%), so a short
// run does not sample far beyond what it keeps.
//
// Prefix mode (num_prefixes = P > 0): one valid record per prefix, in prefix
// order. Prefix i's tries are attempts id = (i << 32) | j, j = 0, 1, ...,
// started one after the other: try j+1 only once try j came back invalid.
// Prefix i's tries are released (invalid ones first, then the valid one) once
// every prefix before it is complete; at most `window` prefixes are admitted
// ahead of the release cursor. Invalid tries are counted when they complete
// (so that prefixes past the cursor cannot run up unbounded work): the point
// where too many invalid records stop the run may depend on timing, every
// record released before it does not.
//
// Lost attempts (a worker died) are handed back with Requeue and re-issued
// before any new attempt: being pure functions of their id, re-running them
// gives the same records, so nothing is lost or duplicated.
//
// Resuming (generate/resume.h): position() is the release cursor after the
// records popped so far; a scheduler constructed with `start` = that
// position releases exactly the records an uninterrupted run would have
// released after them (count mode: attempts start.attempt, start.attempt+1,
// ...; prefix mode: prefix start.attempt from its try start.prefix_try on,
// then the following prefixes), with the released counts carried over (the
// invalid budget continues; with prefixes the completed-invalid count restarts
// at the released one).
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "generate/batch_sampler.h"
#include "util/status.h"

namespace ds {

class AttemptScheduler {
 public:
  // The release cursor: everything before it was popped.
  struct Position {
    uint64_t attempt = 0;            // count mode: next attempt id; prefix mode: next prefix
    uint32_t prefix_try = 0;         // prefix mode: tries of that prefix already popped (invalid)
    int64_t valid = 0, invalid = 0;  // popped so far
    bool operator==(const Position&) const = default;
  };
  struct Options {
    int64_t target = 0;         // count mode: valid records wanted
    int32_t count_prefix = -1;  // count mode: prefix of every attempt
    int64_t num_prefixes = 0;   // > 0: prefix mode
    int64_t max_invalid = 1000;
    int64_t window = 256;  // outstanding attempts (count) / admitted prefixes (prefix)
    // Count mode: attempts first, first + 1, ... below end only; the run is
    // also finished when the cursor reaches end (a shard of an mpirun
    // generation, src/dist/generate.h).
    uint64_t first = 0, end = UINT64_MAX;
  };
  explicit AttemptScheduler(const Options& options);
  // Resumes at `start` (see the file comment).
  AttemptScheduler(const Options& options, const Position& start);

  // How many tasks Issue would hand out now.
  int64_t Available() const;
  // Appends up to `max` tasks that should start now.
  void Issue(int64_t max, std::vector<GenTask>* out);
  // An issued task whose result will never arrive (its worker died).
  void Requeue(const GenTask& task);
  // A finished attempt (validation already applied). Duplicates are ignored.
  void Complete(GeneratedRecord record);
  // The next record in output order, if it is known; false otherwise.
  bool Pop(GeneratedRecord* record);

  // Every wanted record was released (count reached / every prefix done).
  bool finished() const { return finished_; }
  // Not OK once too many invalid records were seen (kResourceExhausted).
  const Status& status() const { return status_; }

  int64_t released_valid() const { return valid_; }
  int64_t released_invalid() const { return invalid_; }
  int64_t wanted() const { return opt_.num_prefixes > 0 ? opt_.num_prefixes : opt_.target; }
  int64_t outstanding() const;  // issued, not yet released
  Position position() const;    // the release cursor (see the file comment)
  // Checks a resume position against the options (kInvalidInput, naming what
  // is inconsistent): counts non-negative, count mode attempt == valid +
  // invalid and valid <= target, prefix mode attempt <= num_prefixes == valid
  // and prefix_try <= invalid.
  static Status CheckStart(const Options& options, const Position& start);

  static uint64_t PrefixAttemptId(int64_t prefix, uint32_t attempt) {
    return (uint64_t(prefix) << 32) | attempt;
  }

 private:
  void CountInvalid();
  void Admit();

  Options opt_;
  Status status_;
  bool finished_ = false;
  int64_t valid_ = 0, invalid_ = 0;  // released
  std::deque<GenTask> requeue_;
  // count mode
  uint64_t next_new_ = 0, consume_ = 0;
  std::unordered_map<uint64_t, GeneratedRecord> results_;
  // prefix mode
  struct PrefixState {
    uint32_t next_try = 0;  // try currently issued or to issue
    bool done = false;      // a valid try completed
    std::deque<GeneratedRecord> pending;
  };
  std::vector<PrefixState> prefixes_;
  int64_t cursor_ = 0, admitted_ = 0;
  uint32_t cursor_tries_ = 0;  // tries of prefix cursor_ popped (invalid)
  int64_t invalid_completed_ = 0;
  std::deque<GenTask> ready_;
};

}  // namespace ds
