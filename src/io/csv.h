// Streaming RFC 4180 CSV reader and writer.
//
// Reader grammar and policy (RFC 4180 plus the choices below):
//   file    = [BOM] record *(EOL record) [EOL]       BOM = EF BB BF, dropped
//   record  = field *(DELIM field)
//   field   = quoted / unquoted
//   quoted  = '"' *(any byte but '"' / '""') '"'     may contain DELIM, CR, LF
//   EOL     = CRLF / LF / CR (a bare CR outside quotes also ends a record)
// Choices:
//   * Blank lines (zero bytes between two EOLs, or at the start/end of the file) are
//     skipped: they are not records. A record with one empty field is written '""'
//     (AppendCsvRecord does this) and is read back as one empty field.
//   * Lenient: a quote inside an UNQUOTED field is kept as a literal character
//     (`5'10"` or `a"b` read as written), like Python's csv and pandas. A quoted field
//     must be closed properly: after its closing quote only DELIM, EOL or end of input
//     may follow; anything else (`"a"b`, usually an undoubled quote inside a quoted
//     field) is an error. Line ends inside quotes are kept byte-exact (CRLF stays CRLF).
//   * Strict: NUL bytes, invalid UTF-8, a field over max_field_bytes, more than
//     max_fields fields, and an unclosed quote (reported at the line where the quoted
//     field started) are kInvalidInput errors. Messages name file:line and field:
//       "data.csv:17: field 3 'tenure': invalid UTF-8 at byte 4 of the field"
//     Errors are sticky: after one, Next keeps returning it.
//   * Ragged rows are not an error: Next returns the fields it found; callers compare
//     with num_columns().
//   * The final record may lack an EOL. An empty file (or only blank lines) gives an
//     empty header() and Next() == false; RequireHeader() turns that into an error.
// Lines are physical lines (counted at LF, and at a bare CR outside quotes), 1-based.
//
// Performance: the input is read in buffer_bytes chunks; a record may span any number
// of chunks (the parser is a resumable state machine that appends directly into the
// caller's field strings, which keep their capacity across records). Each chunk is
// checked for pure ASCII once; per-field UTF-8 validation runs only for records that
// touch a chunk with non-ASCII bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/input.h"
#include "io/line_reader.h"
#include "util/status.h"

namespace ds {

struct CsvOptions {
  char delimiter = ',';
  bool has_header = true;
  size_t max_field_bytes = size_t{16} << 20;
  size_t max_fields = 100000;
  size_t buffer_bytes = InputStream::kDefaultChunk;  // read size (tests use tiny values)
};

class CsvReader {
 public:
  // Opens path ("-" = stdin, gzip detected by content) and, with has_header, reads the
  // header row. Errors: see InputStream::Open; kInvalidArgument for a bad delimiter;
  // parse errors in the header row.
  static Result<std::unique_ptr<CsvReader>> Open(const std::string& path, CsvOptions options = {});
  // Reads CSV text held in memory (a leading BOM dropped); `source` names it
  // in messages. buffer_bytes does not apply.
  static Result<std::unique_ptr<CsvReader>> FromString(std::string_view text,
                                                       const std::string& source,
                                                       CsvOptions options = {});

  // The header row (empty without has_header or for an empty file).
  const std::vector<std::string>& header() const { return header_; }
  size_t num_columns() const { return header_.size(); }
  // "data.csv: empty file (no header row)" when has_header and there was no header row.
  Status RequireHeader() const;

  // Reads the next record into *fields (resized to the number of fields found).
  // Returns false at the end of input.
  Result<bool> Next(std::vector<std::string>* fields);

  // 1-based physical line where the last record (or the header) started.
  int64_t record_line() const { return record_line_; }
  // Data records returned by Next (the header is not counted).
  int64_t records_read() const { return records_read_; }
  // Path for messages ("<stdin>" for "-").
  const std::string& path() const { return in_ ? in_->path() : source_; }
  const CsvOptions& options() const { return opts_; }

 private:
  CsvReader() = default;
  struct Scan;  // one record's parse state (csv.cc)
  Result<bool> ReadRecord(std::vector<std::string>* out, bool is_header);
  // The states' steps (csv.cc): false after an error, kept in error_ (Failed).
  bool StepState(Scan* s);
  void Finish(Scan* s, bool advance_line, bool cr);
  bool FieldOk(Scan* s);
  bool EndOfInput(Scan* s);
  void StartRecord(Scan* s);
  bool StartField(Scan* s);
  bool AppendRun(Scan* s, const bool* special);
  bool UnquotedRun(Scan* s);
  bool QuotedRun(Scan* s);
  bool AfterQuote(Scan* s);
  Result<bool> Fill();
  Status Start();  // after the first chunk is in buf_: tables, header row
  Status Fail(Status s) {
    error_ = s;
    return s;
  }
  bool Failed(Status s) {
    error_ = std::move(s);
    return false;
  }
  std::string FieldRef(size_t index, bool is_header) const;  // "field 3 'tenure'"
  Status CheckField(const std::string& f, size_t index, int64_t line, bool is_header, bool ascii);
  // The reader's errors (messages: see the file comment).
  Status NulByte(size_t index, bool is_header) const;
  Status TooManyFields() const;
  Status TooLong(size_t index, int64_t field_line, bool is_header) const;
  Status Unbalanced(size_t index, int64_t field_line, bool is_header) const;

  CsvOptions opts_;
  std::unique_ptr<InputStream> in_;  // null for FromString
  std::string source_;               // FromString: the name for messages
  std::unique_ptr<char[]> buf_;  // [cap_] current chunk of input
  size_t cap_ = 0;
  size_t pos_ = 0, end_ = 0;  // unparsed bytes are buf_[pos_, end_)
  bool chunk_ascii_ = true;   // buf_[0, end_) is pure ASCII: fields need no UTF-8 check
  bool skip_lf_ = false;      // last record ended at CR: a following LF belongs to it
  int64_t line_ = 1;          // physical line of buf_[pos_]
  int64_t record_line_ = 0;
  int64_t records_read_ = 0;
  std::vector<std::string> header_;
  bool unquoted_special_[256] = {};  // DELIM " CR LF NUL
  bool quoted_special_[256] = {};    // " LF NUL
  Status error_;
};

// Checks header names: no empty name, no duplicates. Errors (kInvalidInput):
//   "data.csv: empty file (no header row)"              (no columns)
//   "data.csv: column 3 has an empty name"
//   "data.csv: duplicate column name 'x' (columns 2 and 5)"   (1-based)
Status ValidateHeader(const std::vector<std::string>& header, const std::string& path);

// Parses a user-given delimiter: a single ASCII byte other than '"', CR, LF, NUL
// (",", ";", "|", ":", " "...), or a name: "\t" (backslash-t), "tab", "comma",
// "semicolon", "pipe", "space" (case-insensitive). kInvalidArgument otherwise.
Result<char> ParseDelimiter(std::string_view s);

// A delimiter for messages: "tab", "byte 0x01" for other control bytes, else "';'".
std::string DelimiterName(char d);

// The delimiter the first lines of a table support, for a file whose name suggests
// `preferred` (',' for .csv, tab for .tsv). Reads at most the first 64 KiB (gzip
// decoded) and counts fields per record for ',', tab, ';' and '|', honouring quotes
// (a quoted field may hold delimiters and newlines). A candidate fits when the header
// has at least 2 fields and at least 90% of the (complete) data records in the sample
// have as many. Returns `preferred` when it fits, when no other candidate fits, or when
// the file cannot be read (the reader reports that error later); otherwise the first
// fitting one of ',', tab, ';', '|'. A European export (`a;b;1,5`) named .csv gives ';'.
char SniffDelimiter(const std::string& path, char preferred);
// The same over text already in memory (a leading UTF-8 BOM is skipped).
char SniffDelimiterOf(std::string_view sample, char preferred);

// Appends one record and "\n". A field is quoted exactly when it contains the
// delimiter, '"', CR or LF (quotes doubled), or starts with a UTF-8 BOM; plus the
// single-empty-field record, written '""' so it is not read back as a blank line.
// A record with no fields appends just "\n" (a blank line, skipped by the reader).
void AppendCsvRecord(std::string* out, const std::vector<std::string>& fields, char delimiter);
void AppendCsvRecord(std::string* out, const std::vector<std::string_view>& fields, char delimiter);

// The field as it would appear in a record (quoted if needed, see above).
std::string CsvEscapeField(std::string_view field, char delimiter);

}  // namespace ds
