// Streaming output of generated records.
//
// Formats:
//   csv    the training header, then one line per VALID record, fields quoted
//          by io/csv.h's AppendCsvRecord with the training delimiter (quoted
//          when holding the delimiter, a quote, CR or LF, quotes doubled; a
//          lone empty field is ""), so the output reads back with CsvReader.
//          Text-line models: no header, one single-field line (delimiter ',')
//          per record.
//   text   one line per VALID record: the fields joined by the delimiter, as
//          sampled (no quoting); the reference's "text" of a record.
//   jsonl  one JSON object per record, valid AND invalid, in output order:
//          {"id": n, "valid": bool, "text": str, "explain": str, "fields": [str...]}
//          ("fields" only for delimited data; invalid UTF-8 is replaced).
//          "id" is the record's attempt index (its Philox stream, see
//          generate/scheduler.h): 0, 1, 2, ... in a count run (so a gap or a
//          repeat would show a lost or duplicated record); (i << 32) | try
//          with start strings.
//
// OutputSink writes a file `out` through `out.partial` in the same directory
// (PartialPath, generate/resume.h), renamed onto the final name by Finish();
// `out.partial` is always a NEW file (O_CREAT|O_EXCL|O_NOFOLLOW): a stale one
// from an interrupted run is unlinked first (under its lock), and a symlink or
// anything but a regular file at that name is refused, never followed; a
// resumed run opens its files with O_NOFOLLOW too.
// stdout is written directly. The partial file is locked (flock) while a sink
// holds it: a second run writing the same output fails at once. Writes are
// buffered (1 MiB) and flushed only at record boundaries; a failed write
// truncates the file back to the last complete record. Finish() is called on
// success AND on errors or cancellation after generation started, so the
// final name then holds a well-formed, truncated output (the header and every
// complete record written so far). Abort() removes the partial file (errors
// before the first record) unless the sink continues an earlier run
// (OpenForResume): that file is kept for a later resume.
// If the process is killed outright, `out.partial` stays behind; together with
// its progress file it is completed by a resumed run (generate/resume.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "generate/batch_sampler.h"
#include "util/fs.h"
#include "util/status.h"

namespace ds {

// What generate may write (CheckOutputTarget):
//   * an existing output file is replaced only with `overwrite` (or when a run
//     continues it: `resume`);
//   * never the training input (`training_input`, recorded by train: also under
//     another name, a symlink or a hard link), and never a file inside
//     `model_dir` or inside any directory that holds a model
//     (model/model_dir.h IsModelDirectory), `overwrite` or not.
// Standard output, devices and FIFOs (/dev/null) are written directly and
// replace nothing: always allowed.
struct OutputPolicy {
  bool overwrite = false;
  bool resume = false;
  std::string model_dir;
  std::optional<FileIdentity> training_input;
};
// kAlreadyExists (existing output without overwrite) or kInvalidArgument (the
// training input, inside a model directory), naming the file and what to do.
Status CheckOutputTarget(const std::string& path, const OutputPolicy& policy);

enum class OutputFormat { kCsv, kText, kJsonl };
Result<OutputFormat> ParseOutputFormat(const std::string& name);  // "csv", "text", "jsonl"
const char* OutputFormatName(OutputFormat f);

class OutputSink {
 public:
  ~OutputSink();
  OutputSink(const OutputSink&) = delete;
  OutputSink& operator=(const OutputSink&) = delete;

  // `path` "" or "-" = standard output; an existing device, FIFO or socket
  // (/dev/null, a named pipe) is written directly too. A file output starts
  // an empty `path.partial` (an existing one is overwritten).
  static Result<std::unique_ptr<OutputSink>> Open(const std::string& path);
  // Continues an earlier run's output: `path.partial`, or else `path` itself
  // (renamed to `path.partial`), must hold at least `bytes` bytes whose CRC-32
  // is `crc32` (kCorrupt otherwise, naming the file); it is truncated to
  // `bytes` and appended to.
  static Result<std::unique_ptr<OutputSink>> OpenForResume(const std::string& path, uint64_t bytes,
                                                           uint32_t crc32);
  // Appends complete records (the unit of flushing).
  Status Write(std::string_view data);
  // Writes the buffered records to the file.
  Status Flush();
  // Flush, then fdatasync: committed() bytes are on stable storage.
  Status Sync();
  // Flushes, fsyncs and renames the partial file onto the final path.
  Status Finish();
  // Removes the partial file (no output); a resumed one is only closed.
  void Abort();
  // In a child process forked while the sink is open: closes the child's
  // copy of the file descriptor, so that the file's lock (held through every
  // copy) goes with the parent when it dies.
  void CloseInChild();

  const std::string& path() const { return path_; }
  const std::string& partial_path() const { return temp_; }
  bool is_stdout() const { return fd_ == 1; }
  // False for outputs written directly (stdout, devices, FIFOs): no partial
  // file, no progress file, no resume.
  static bool IsResumable(const std::string& path);
  uint64_t bytes() const { return committed_ + buf_.size(); }
  uint64_t committed() const { return committed_; }  // bytes in the file (record boundary)
  uint32_t crc32() const { return crc_; }            // CRC-32 of the committed bytes
  const Status& error() const { return error_; }     // the first write error

 private:
  OutputSink() = default;
  Status LockExisting(const std::string& path);  // O_NOFOLLOW, a regular file, flock
  Status CreatePartial();                        // a new temp_ (see the file comment)

  int fd_ = -1;
  std::string path_, temp_;
  std::string buf_;
  uint64_t committed_ = 0;  // bytes on disk, at a record boundary
  uint32_t crc_ = 0;        // CRC-32 of those bytes
  bool done_ = false;
  bool resumed_ = false;  // continues an earlier run's file: Abort keeps it
  bool direct_ = false;   // stdout or a device: no partial file
  Status error_;
};

// Formats records onto a sink.
class RecordWriter {
 public:
  RecordWriter(OutputFormat format, std::vector<std::string> header, char delimiter,
               OutputSink* sink)
      : format_(format), header_(std::move(header)), delimiter_(delimiter), sink_(sink) {}
  Status Begin();                                         // the CSV header
  void Continue(int64_t written) { written_ = written; }  // resumed: header and records written
  Status Write(const GeneratedRecord& record);            // skips invalid records except in jsonl
  int64_t written() const { return written_; }

 private:
  OutputFormat format_;
  std::vector<std::string> header_;
  char delimiter_;
  OutputSink* sink_;
  std::string line_;
  int64_t written_ = 0;
};

}  // namespace ds
