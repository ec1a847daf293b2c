// Fuzz target: the CSV reader (io/csv.h), the line reader (io/line_reader.h) and the
// gzip input path (io/input.h).
//
// Input: byte 0 = options, byte 1 = buffer size / truncation, the rest = file content.
//   bits 0-2 of byte 0: delimiter (, ; TAB | space a : ')
//   bit 3: has_header     bit 4: max_field_bytes = 64     bit 5: max_fields = 8
//   bit 6: the content is gzip-compressed by the harness first (exercises the gzip
//          decoder with valid streams; raw gzip bytes reach it too, sniffed by content)
//   bit 7: with bit 6, the compressed stream is truncated (must be an error, never EOF)
// Invariants checked (DS_FUZZ_FAIL on violation):
//   * the records, header, line numbers and error message do not depend on the
//     reader's buffer size (4..64 bytes vs one that holds the whole input);
//   * records written back with AppendCsvRecord read back identically;
//   * a truncated gzip stream is an error;
//   * the line reader gives the same lines / error for tiny and default buffers.
#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "io/csv.h"
#include "io/line_reader.h"

namespace ds::fuzz {
namespace csv_fuzz {

// Larger than any input the fuzzer makes (-max_len 8192): like the default 1 MiB
// buffer, it holds the whole (plain) input, without the cost of 1 MiB allocations
// under ASan (which made the target 2x slower).
inline constexpr size_t kLargeBuffer = 16384;

struct CsvOutcome {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> records;
  std::vector<int64_t> lines;
  std::string error;  // "" when the whole input parsed
  bool operator==(const CsvOutcome&) const = default;
  std::string Summary() const {
    return std::to_string(header.size()) + " header fields, " + std::to_string(records.size()) +
           " records, error '" + error + "'";
  }
};

inline CsvOutcome ReadCsv(const std::string& path, const CsvOptions& opts) {
  CsvOutcome out;
  auto r = CsvReader::Open(path, opts);
  if (!r.ok()) {
    out.error = r.status().message();
    return out;
  }
  CsvReader& reader = **r;
  out.header = reader.header();
  std::vector<std::string> fields;
  for (;;) {
    Result<bool> more = reader.Next(&fields);
    if (!more.ok()) {
      out.error = more.status().message();
      // Errors are sticky.
      Result<bool> again = reader.Next(&fields);
      DS_FUZZ_CHECK(!again.ok() && again.status().message() == out.error);
      break;
    }
    if (!*more) break;
    DS_FUZZ_CHECK(!fields.empty());
    out.records.push_back(fields);
    out.lines.push_back(reader.record_line());
  }
  return out;
}

struct LineOutcome {
  std::vector<std::string> lines;
  std::string error;
  bool operator==(const LineOutcome&) const = default;
};

inline LineOutcome ReadLines(const std::string& path, size_t buffer) {
  LineOutcome out;
  LineOptions opts;
  opts.buffer_bytes = buffer;
  opts.max_line_bytes = 1000;
  auto r = LineReader::Open(path, opts);
  if (!r.ok()) {
    out.error = r.status().message();
    return out;
  }
  std::string line;
  for (;;) {
    Result<bool> more = (*r)->Next(&line);
    if (!more.ok()) {
      out.error = more.status().message();
      break;
    }
    if (!*more) break;
    out.lines.push_back(line);
  }
  return out;
}

inline std::string Gzip(std::string_view in) {
  z_stream s{};
  if (deflateInit2(&s, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  std::string out(deflateBound(&s, uLong(in.size())) + 32, '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  s.avail_in = uInt(in.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = uInt(out.size());
  if (deflate(&s, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

}  // namespace csv_fuzz

inline int CsvOneInput(const uint8_t* data, size_t size) {
  using namespace csv_fuzz;
  if (size < 2) return 0;
  const uint8_t mode = data[0], aux = data[1];
  std::string content(AsText(data + 2, size - 2));
  static const char kDelims[] = {',', ';', '\t', '|', ' ', 'a', ':', '\''};
  CsvOptions opts;
  opts.delimiter = kDelims[mode & 7];
  opts.has_header = (mode & 8) != 0;
  if (mode & 16) opts.max_field_bytes = 64;
  if (mode & 32) opts.max_fields = 8;
  bool truncated = false;
  if (mode & 64) {
    content = Gzip(content);
    if (mode & 128) {
      // Drop 1..32 bytes of the 8-byte trailer and beyond: the stream is incomplete.
      const size_t cut = 1 + aux % 32;
      content.resize(content.size() > cut ? content.size() - cut : 0);
      truncated = content.size() >= 2;  // shorter: not even recognised as gzip
    }
  }
  MemFile file(content);

  CsvOptions small = opts;
  small.buffer_bytes = 4 + aux % 61;
  const CsvOutcome a = ReadCsv(file.path(), small);
  CsvOptions large = opts;
  large.buffer_bytes = kLargeBuffer;
  const CsvOutcome b = ReadCsv(file.path(), large);
  if (!(a == b)) {
    const std::string m = "CSV result depends on the buffer size: small buffer " + a.Summary() +
                          "; default buffer " + b.Summary();
    DS_FUZZ_FAIL(m.c_str());
  }
  // A truncated stream never reads as a clean end of input (an earlier parse error
  // may come first).
  if (truncated) DS_FUZZ_CHECK(!b.error.empty());

  if (b.error.empty()) {
    // Round trip through the writer.
    std::string written;
    if (opts.has_header && !b.header.empty()) AppendCsvRecord(&written, b.header, opts.delimiter);
    for (const auto& rec : b.records) AppendCsvRecord(&written, rec, opts.delimiter);
    MemFile again(written);
    const CsvOutcome c = ReadCsv(again.path(), large);
    DS_FUZZ_CHECK(c.error.empty());
    DS_FUZZ_CHECK(c.header == b.header);
    DS_FUZZ_CHECK(c.records == b.records);
  }

  const LineOutcome la = ReadLines(file.path(), 4 + aux % 13);
  const LineOutcome lb = ReadLines(file.path(), kLargeBuffer);
  if (!(la == lb)) DS_FUZZ_FAIL("line reader result depends on the buffer size");
  if (truncated) DS_FUZZ_CHECK(!lb.error.empty());
  return 0;
}

}  // namespace ds::fuzz

#ifndef DS_FUZZ_NO_MAIN
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return ds::fuzz::CsvOneInput(data, size);
}
#endif
