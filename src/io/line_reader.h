// LineReader: streams text records, one per line, from a plain/gzip file or stdin.
//
// Policy: lines end at LF; a CR right before the LF (CRLF) is dropped, any other CR is
// data. A UTF-8 BOM at the start is dropped. Every line is returned, empty ones included;
// a final line without LF is returned, and a trailing LF does not add an empty line.
// Errors (kInvalidInput, sticky), naming file:line:
//   "notes.txt:3: NUL byte at byte 17 of the line (binary file?)"
//   "notes.txt:3: invalid UTF-8 at byte 5 of the line"
//   "notes.txt:3: line longer than 16777216 bytes"
// Byte offsets are 0-based within the line (after the BOM for line 1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "io/input.h"
#include "util/status.h"

namespace ds {

struct LineOptions {
  size_t max_line_bytes = size_t{16} << 20;
  size_t buffer_bytes = InputStream::kDefaultChunk;
};

class LineReader {
 public:
  static Result<std::unique_ptr<LineReader>> Open(const std::string& path,
                                                  LineOptions options = {});
  // Reads the next line (without its line end). Returns false at the end of input.
  Result<bool> Next(std::string* line);
  // 1-based number of the line last returned by Next (0 before the first).
  int64_t line() const { return line_; }
  const std::string& path() const { return in_->path(); }

 private:
  LineReader() = default;
  Status Fail(Status s) {
    error_ = s;
    return s;
  }

  LineOptions opts_;
  std::unique_ptr<InputStream> in_;
  std::unique_ptr<char[]> buf_;  // [cap_]
  size_t cap_ = 0;
  size_t pos_ = 0, end_ = 0;
  bool eof_ = false;
  int64_t line_ = 0;
  Status error_;
};

// Reads the first up-to-3 bytes of a fresh stream into buf (capacity >= 4), dropping a
// UTF-8 BOM. Returns the number of bytes left in buf. Shared by the readers.
Result<size_t> ReadStartSkippingBom(InputStream* in, char* buf);

}  // namespace ds
