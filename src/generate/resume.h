// Crash-safe, resumable generation output: the progress file.
//
// While `RunGeneration` writes `synth.csv`, the records go to
// `synth.csv.partial` (OutputSink, generate/output.h), and a small progress
// file `synth.csv.progress.json` records, at every checkpoint, how far the
// partial file is good:
//
//   {"format": "datasynth-generate-progress", "version": 1,
//    "bytes": 123456,          output bytes at a record boundary (header included)
//    "crc32": 305419896,       CRC-32 of those bytes
//    "records": 1200,          records written (csv/text: valid ones; jsonl: all)
//    "tokens": 98765,          tokens sampled so far (informational)
//    "position": {"attempt": 1230, "prefix_try": 0, "valid": 1200, "invalid": 30},
//    "settings": {...}}        what must match to resume (ResumeSettings)
//
// Checkpoint protocol (RunGeneration): flush the buffered records (whole
// records only), fdatasync the partial file, then replace the progress file
// atomically (util/fs.h WriteFileAtomic). So, whenever the process dies
// (kill -9, OOM killer, power loss), the progress file describes a prefix of
// the partial file made of whole records; bytes past it (records flushed
// after the checkpoint, or a write cut by the kill) are dropped on resume.
// A checkpoint is taken once the header is written, about every
// RunOptions::checkpoint_interval_s seconds, and when the run stops.
//
// Resume (RunOptions::resume): the progress file is read and its settings
// compared with the command's (any difference is an error naming the
// setting); the data file (`synth.csv.partial`, or `synth.csv` itself after a
// run that stopped with an error) must hold at least `bytes` bytes whose
// CRC-32 matches; it is truncated to `bytes` and the scheduler restarts at
// `position` (AttemptScheduler::Position). Attempts are pure functions of
// (seed, attempt id), so the resumed output is byte-identical to an
// uninterrupted run's: no record lost, none duplicated.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "generate/output.h"
#include "generate/scheduler.h"
#include "util/status.h"

namespace ds {

// "<output>.partial": the data file while the run is in progress.
std::string PartialPath(const std::string& output);
// "<output>.progress.json": the checkpoint.
std::string ProgressPath(const std::string& output);

struct GenerationCheckpoint {
  nlohmann::json settings = nlohmann::json::object();  // must match to resume
  AttemptScheduler::Position position;                 // release cursor
  uint64_t bytes = 0;                                  // output bytes, at a record boundary
  uint32_t crc32 = 0;                                  // CRC-32 of those bytes
  int64_t records = 0;                                 // records written
  int64_t tokens = 0;                                  // tokens sampled (informational)

  nlohmann::json ToJson() const;
  // Validates the structure and types; errors name `source`.
  static Result<GenerationCheckpoint> FromJson(const nlohmann::json& j, const std::string& source);
};

// Writes the progress file atomically (temp file, fsync, rename).
Status WriteCheckpoint(const std::string& path, const GenerationCheckpoint& checkpoint);
// Reads a progress file: nullopt when it does not exist; kCorrupt (naming the
// file) when it is not a valid progress file.
Result<std::optional<GenerationCheckpoint>> ReadCheckpoint(const std::string& path);

// Compares the settings of an interrupted run (`saved`, from `source`) with
// the command's (`now`). Every key of either side must be equal; the error
// (kInvalidArgument) names each differing setting with both values.
Status CompareResumeSettings(const nlohmann::json& saved, const nlohmann::json& now,
                             const std::string& source);

// The resumable output of one generation run (the checkpoint protocol above):
// a new output, or the continuation of an interrupted run's. The caller
// passes the scheduler's position and the token count with every call that
// may checkpoint.
struct ResumableOutputOptions {
  std::string path;  // "" or "-" = standard output (not resumable)
  OutputFormat format = OutputFormat::kCsv;
  std::vector<std::string> header;
  char delimiter = ',';
  bool resume = false;  // continue an interrupted run (none: a new run, with a warning)
  OutputPolicy policy;  // what the output may replace (`resume` is set here)
  nlohmann::json settings = nlohmann::json::object();   // must match on resume
  const AttemptScheduler::Options* schedule = nullptr;  // a resumed position must fit it
  std::function<void(const std::string&)> warning;
};

class ResumableOutput {
 public:
  using Position = AttemptScheduler::Position;
  // Checks the target (CheckOutputTarget), reads and checks the progress file
  // on resume, and opens the sink. Errors as the file comment says.
  static Result<std::unique_ptr<ResumableOutput>> Open(const ResumableOutputOptions& options);

  bool to_file() const { return to_file_; }
  const std::string& path() const { return path_; }  // "" for standard output
  // The interrupted run's checkpoint; nullopt for a new run.
  const std::optional<GenerationCheckpoint>& resumed() const { return resumed_; }
  Position start() const { return resumed_ ? resumed_->position : Position{}; }

  // A new run: the header, then the first checkpoint (a resumed run: nothing).
  Status Begin(const Position& pos, int64_t tokens);
  // One released record (written whole; invalid ones only in jsonl).
  Status Write(const GeneratedRecord& record, const Position& pos, int64_t tokens);
  // The records written so far reach the disk, then the progress file says so.
  Status Checkpoint(const Position& pos, int64_t tokens);
  // Ends the run (`st`: how it went; `complete`: every record produced) and
  // returns the run's status: an incomplete file output keeps an up-to-date
  // progress file (resumable()), a complete one loses it.
  Status Finish(Status st, bool complete, const Position& pos, int64_t tokens);
  // Gives up before any record: removes a new partial file.
  void Abort() { sink_->Abort(); }
  // In a forked child: see OutputSink::CloseInChild.
  void CloseInChild() { sink_->CloseInChild(); }
  // Writes the buffered records past the last checkpoint (test hook).
  Status Flush() { return sink_->Flush(); }

  int64_t written() const { return writer_->written(); }
  bool write_ok() const { return sink_->error().ok(); }
  // What the file holds (after a write error: up to the last good flush).
  const GenerationCheckpoint& flushed() const { return flushed_; }
  bool resumable() const { return resumable_; }

 private:
  ResumableOutput() = default;
  void NoteFlush(bool force, const Position& pos, int64_t tokens);
  Status Prepare(const ResumableOutputOptions& o);

  bool to_file_ = false;
  std::string path_, progress_path_;
  std::optional<GenerationCheckpoint> resumed_;
  std::unique_ptr<OutputSink> sink_;
  std::unique_ptr<RecordWriter> writer_;
  GenerationCheckpoint flushed_;
  bool resumable_ = false;
};

}  // namespace ds
