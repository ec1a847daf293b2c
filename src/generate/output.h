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
//          {"valid": bool, "text": str, "explain": str, "fields": [str...]}
//          ("fields" only for delimited data; invalid UTF-8 is replaced).
//
// OutputSink writes a file through a temporary file in the same directory,
// ".<name>.tmp.<pid>", renamed onto the final name by Finish(); stdout is
// written directly. Writes are buffered (1 MiB) and flushed only at record
// boundaries; a failed write truncates the file back to the last complete
// record. Finish() is called on success AND on errors or cancellation after
// generation started, so the final name then holds a well-formed, truncated
// output (the header and every complete record written so far). Abort()
// removes the temporary file (errors before the first record).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "generate/batch_sampler.h"
#include "util/status.h"

namespace ds {

enum class OutputFormat { kCsv, kText, kJsonl };
Result<OutputFormat> ParseOutputFormat(const std::string& name);  // "csv", "text", "jsonl"
const char* OutputFormatName(OutputFormat f);

class OutputSink {
 public:
  ~OutputSink();
  OutputSink(const OutputSink&) = delete;
  OutputSink& operator=(const OutputSink&) = delete;

  // `path` "" or "-" = standard output.
  static Result<std::unique_ptr<OutputSink>> Open(const std::string& path);
  // Appends complete records (the unit of flushing).
  Status Write(std::string_view data);
  // Flushes, fsyncs and renames the temporary file onto the final path.
  Status Finish();
  // Removes the temporary file (no output).
  void Abort();

  const std::string& path() const { return path_; }
  bool is_stdout() const { return fd_ == 1; }
  uint64_t bytes() const { return committed_ + buf_.size(); }

 private:
  OutputSink() = default;
  Status Flush();

  int fd_ = -1;
  std::string path_, temp_;
  std::string buf_;
  uint64_t committed_ = 0;  // bytes on disk, at a record boundary
  bool done_ = false;
  Status error_;
};

// Formats records onto a sink.
class RecordWriter {
 public:
  RecordWriter(OutputFormat format, std::vector<std::string> header, char delimiter,
               OutputSink* sink)
      : format_(format), header_(std::move(header)), delimiter_(delimiter), sink_(sink) {}
  Status Begin();                               // the CSV header
  Status Write(const GeneratedRecord& record);  // skips invalid records except in jsonl
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
