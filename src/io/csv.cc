#include "io/csv.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <unordered_map>

#include <fmt/format.h>

#include "util/utf8.h"

namespace ds {
namespace {

Status CheckDelimiter(char d) {
  const auto u = static_cast<unsigned char>(d);
  if (d == '"' || d == '\r' || d == '\n' || d == '\0' || u >= 0x80) {
    return DS_ERR(kInvalidArgument,
                  "invalid CSV delimiter byte 0x{:02x}: it must be one ASCII character other "
                  "than a quote, CR, LF or NUL",
                  u);
  }
  return Status::Ok();
}

std::string Printable(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return fmt::format("'{}'", c);
  return fmt::format("byte 0x{:02x}", u);
}

}  // namespace

Result<std::unique_ptr<CsvReader>> CsvReader::Open(const std::string& path, CsvOptions options) {
  DS_RETURN_IF_ERROR(CheckDelimiter(options.delimiter));
  if (options.max_fields == 0) return DS_ERR(kInvalidArgument, "CSV max_fields must be > 0");
  std::unique_ptr<CsvReader> r(new CsvReader());
  r->opts_ = options;
  DS_ASSIGN_OR_RETURN(r->in_, InputStream::Open(path));
  r->cap_ = std::max<size_t>(options.buffer_bytes, 4);
  r->buf_.reset(new char[r->cap_]);
  DS_ASSIGN_OR_RETURN(r->end_, ReadStartSkippingBom(r->in_.get(), r->buf_.get()));
  DS_RETURN_IF_ERROR(r->Start());
  return r;
}

Result<std::unique_ptr<CsvReader>> CsvReader::FromString(std::string_view text,
                                                         const std::string& source,
                                                         CsvOptions options) {
  DS_RETURN_IF_ERROR(CheckDelimiter(options.delimiter));
  if (options.max_fields == 0) return DS_ERR(kInvalidArgument, "CSV max_fields must be > 0");
  if (text.size() >= 3 && std::memcmp(text.data(), "\xEF\xBB\xBF", 3) == 0) text.remove_prefix(3);
  std::unique_ptr<CsvReader> r(new CsvReader());
  r->opts_ = options;
  r->source_ = source;
  r->cap_ = std::max<size_t>(text.size(), 4);
  r->buf_.reset(new char[r->cap_]);
  std::memcpy(r->buf_.get(), text.data(), text.size());
  r->end_ = text.size();
  DS_RETURN_IF_ERROR(r->Start());
  return r;
}

// The tables of special bytes, then the header row.
Status CsvReader::Start() {
  chunk_ascii_ = IsAscii(std::string_view(buf_.get(), end_));
  for (unsigned char c : {static_cast<unsigned char>(opts_.delimiter),
                          static_cast<unsigned char>('"'), static_cast<unsigned char>('\r'),
                          static_cast<unsigned char>('\n'), static_cast<unsigned char>('\0')}) {
    unquoted_special_[c] = true;
  }
  for (unsigned char c : {'"', '\n', '\0'}) quoted_special_[c] = true;
  if (opts_.has_header) {
    DS_ASSIGN_OR_RETURN(bool got, ReadRecord(&header_, /*is_header=*/true));
    if (!got) header_.clear();
  }
  return Status::Ok();
}

Status CsvReader::RequireHeader() const {
  if (opts_.has_header && header_.empty()) {
    return DS_ERR(kInvalidInput, "{}: empty file (no header row)", path());
  }
  return Status::Ok();
}

Result<bool> CsvReader::Next(std::vector<std::string>* fields) {
  return ReadRecord(fields, /*is_header=*/false);
}

Result<bool> CsvReader::Fill() {
  if (!in_) {  // FromString: the whole input was the first chunk
    pos_ = end_ = 0;
    return false;
  }
  DS_ASSIGN_OR_RETURN(size_t r, in_->Read(buf_.get(), cap_));
  pos_ = 0;
  end_ = r;
  chunk_ascii_ = IsAscii(std::string_view(buf_.get(), r));
  return r > 0;
}

std::string CsvReader::FieldRef(size_t index, bool is_header) const {
  if (!is_header && index < header_.size()) {
    return fmt::format("field {} '{}'", index + 1, header_[index]);
  }
  return fmt::format("field {}", index + 1);
}

Status CsvReader::CheckField(const std::string& f, size_t index, int64_t line, bool is_header,
                             bool ascii) {
  if (f.size() > opts_.max_field_bytes) return TooLong(index, line, is_header);
  size_t bad = 0;
  if (!ascii && !IsValidUtf8(f, &bad)) {
    return DS_ERR(kInvalidInput, "{}:{}: {}: invalid UTF-8 at byte {} of the field{}", path(), line,
                  FieldRef(index, is_header), bad, InvalidUtf8Hint(f, bad));
  }
  return Status::Ok();
}

Status CsvReader::NulByte(size_t index, bool is_header) const {
  return DS_ERR(kInvalidInput, "{}:{}: {}: NUL byte (binary file?)", path(), line_,
                FieldRef(index, is_header));
}

Status CsvReader::TooManyFields() const {
  return DS_ERR(kInvalidInput, "{}:{}: more than {} fields", path(), record_line_,
                opts_.max_fields);
}

Status CsvReader::TooLong(size_t index, int64_t field_line, bool is_header) const {
  return DS_ERR(kInvalidInput, "{}:{}: {}: field longer than {} bytes", path(), field_line,
                FieldRef(index, is_header), opts_.max_field_bytes);
}

Status CsvReader::Unbalanced(size_t index, int64_t field_line, bool is_header) const {
  return DS_ERR(kInvalidInput,
                "{}:{}: {}: unbalanced quote: the quoted field starting on this line is never "
                "closed",
                path(), field_line, FieldRef(index, is_header));
}

// The parse of one record: resumable across buffer refills (p == e), so a record may
// span any number of chunks without re-parsing.
struct CsvReader::Scan {
  enum State { kStart, kField, kUnquoted, kQuoted, kAfterQuote };
  std::vector<std::string>* out;
  bool is_header;
  State st = kStart;
  size_t nf = 0;             // completed fields
  std::string* f = nullptr;  // the field being filled: (*out)[nf]
  int64_t field_line = 0;    // line where the current field started
  const char* p = nullptr;   // the next byte of the chunk
  const char* e = nullptr;   // the end of the chunk
  bool ascii = true;         // every chunk this record touched so far is pure ASCII
  bool done = false;         // the record is complete
};

// The state machine of the grammar in csv.h, one state's step at a time.
Result<bool> CsvReader::ReadRecord(std::vector<std::string>* out, bool is_header) {
  if (!error_.ok()) return error_;
  Scan s{out, is_header};
  s.field_line = line_;
  s.p = buf_.get() + pos_;
  s.e = buf_.get() + end_;
  s.ascii = chunk_ascii_;
  for (;;) {
    if (s.p == s.e) {
      Result<bool> more = Fill();
      if (!more.ok()) return Fail(more.status());
      s.p = buf_.get() + pos_;
      s.e = buf_.get() + end_;
      s.ascii = s.ascii && chunk_ascii_;
      if (!*more) {
        if (s.st == Scan::kStart) return false;
        if (!EndOfInput(&s)) return error_;
        return true;
      }
    }
    if (!StepState(&s)) return error_;
    if (s.done) return true;
  }
}

inline bool CsvReader::StepState(Scan* s) {
  switch (s->st) {
    case Scan::kStart: StartRecord(s); return true;
    case Scan::kField: return StartField(s);
    case Scan::kUnquoted: return UnquotedRun(s);
    case Scan::kQuoted: return QuotedRun(s);
    case Scan::kAfterQuote: return AfterQuote(s);
  }
  return true;
}

// The field just completed passes CheckField (length, UTF-8).
inline bool CsvReader::FieldOk(Scan* s) {
  if (s->ascii && s->f->size() <= opts_.max_field_bytes) return true;
  Status st = CheckField(*s->f, s->nf, s->field_line, s->is_header, s->ascii);
  return st.ok() || Failed(std::move(st));
}

// Ends the record after the current field.
inline void CsvReader::Finish(Scan* s, bool advance_line, bool cr) {
  ++s->nf;
  s->out->resize(s->nf);
  if (advance_line) ++line_;
  skip_lf_ = cr;
  pos_ = static_cast<size_t>(s->p - buf_.get());
  if (!s->is_header) ++records_read_;
  s->done = true;
}

// Input ended inside a record (not before its first byte).
inline bool CsvReader::EndOfInput(Scan* s) {
  if (s->st == Scan::kQuoted) return Failed(Unbalanced(s->nf, s->field_line, s->is_header));
  if (s->st == Scan::kField) {  // input ends right after a delimiter: one more empty field
    if (s->nf >= opts_.max_fields) return Failed(TooManyFields());
    if (s->nf == s->out->size()) s->out->emplace_back();
    (*s->out)[s->nf].clear();
  } else {
    if (!FieldOk(s)) return false;
  }
  Finish(s, false, false);
  return true;
}

// Skips blank lines (and the LF of a CRLF that ended the last record); a record starts
// at the first other byte.
inline void CsvReader::StartRecord(Scan* s) {
  const char c = *s->p;
  if (skip_lf_) {
    skip_lf_ = false;
    if (c == '\n') {
      ++s->p;
      return;
    }
  }
  if (c == '\n' || c == '\r') {  // blank line
    ++line_;
    skip_lf_ = (c == '\r');
    ++s->p;
    return;
  }
  record_line_ = line_;
  s->st = Scan::kField;
}

inline bool CsvReader::StartField(Scan* s) {
  if (s->nf >= opts_.max_fields) return Failed(TooManyFields());
  if (s->nf == s->out->size()) s->out->emplace_back();
  s->f = &(*s->out)[s->nf];
  s->f->clear();
  s->field_line = line_;
  if (*s->p == '"') {
    ++s->p;
    s->st = Scan::kQuoted;
  } else {
    s->st = Scan::kUnquoted;
  }
  return true;
}

// Appends the bytes before the next one in `special` (or the chunk's end) to the field;
// false when the field grows past max_field_bytes.
inline bool CsvReader::AppendRun(Scan* s, const bool* special) {
  const char* b = s->p;
  while (s->p < s->e && !special[static_cast<unsigned char>(*s->p)]) ++s->p;
  s->f->append(b, static_cast<size_t>(s->p - b));
  return s->f->size() <= opts_.max_field_bytes ||
         Failed(TooLong(s->nf, s->field_line, s->is_header));
}

// An unquoted run up to the next special byte (also the empty run after a closing quote).
inline bool CsvReader::UnquotedRun(Scan* s) {
  if (!AppendRun(s, unquoted_special_)) return false;
  if (s->p == s->e) return true;
  const char c = *s->p++;
  if (c == opts_.delimiter || c == '\n' || c == '\r') {
    if (!FieldOk(s)) return false;
    if (c != opts_.delimiter) {
      Finish(s, true, c == '\r');
      return true;
    }
    ++s->nf;
    s->st = Scan::kField;
    return s->p == s->e || StartField(s);  // the next field at once (the common case)
  }
  if (c == '"') {  // lenient: literal quote inside an unquoted field
    s->f->push_back('"');
    return true;
  }
  return Failed(NulByte(s->nf, s->is_header));
}

inline bool CsvReader::QuotedRun(Scan* s) {
  if (!AppendRun(s, quoted_special_)) return false;
  if (s->p == s->e) return true;
  const char c = *s->p++;
  if (c == '"') {
    s->st = Scan::kAfterQuote;
  } else if (c == '\n') {
    ++line_;
    s->f->push_back('\n');
  } else {
    return Failed(NulByte(s->nf, s->is_header));
  }
  return true;
}

inline bool CsvReader::AfterQuote(Scan* s) {
  const char c = *s->p;
  if (c == '"') {  // doubled quote
    s->f->push_back('"');
    ++s->p;
    s->st = Scan::kQuoted;
    return true;
  }
  if (c == opts_.delimiter || c == '\n' || c == '\r') {
    s->st = Scan::kUnquoted;  // consumes the terminator (empty run)
    return true;
  }
  if (c == '\0') return Failed(NulByte(s->nf, s->is_header));
  return Failed(DS_ERR(kInvalidInput,
                "{}:{}: {}: unexpected {} after the closing quote of a quoted field "
                "(a quote inside a quoted field must be doubled: \"\")",
                path(), line_, FieldRef(s->nf, s->is_header), Printable(c)));
}

Status ValidateHeader(const std::vector<std::string>& header, const std::string& path) {
  if (header.empty()) return DS_ERR(kInvalidInput, "{}: empty file (no header row)", path);
  std::unordered_map<std::string_view, size_t> seen;
  seen.reserve(header.size() * 2);
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i].empty()) {
      return DS_ERR(kInvalidInput, "{}: column {} has an empty name", path, i + 1);
    }
    auto [it, inserted] = seen.emplace(header[i], i);
    if (!inserted) {
      return DS_ERR(kInvalidInput, "{}: duplicate column name '{}' (columns {} and {})", path,
                    header[i], it->second + 1, i + 1);
    }
  }
  return Status::Ok();
}

namespace {

// Field counts of the complete records in sample (the last, unterminated one dropped
// unless the sample is the whole input), with delimiter d; quotes as the reader does.
std::vector<size_t> SampleFieldCounts(std::string_view sample, char d, bool whole,
                                      size_t max_records) {
  std::vector<size_t> counts;
  size_t fields = 1;
  bool quoted = false, any = false, field_start = true, closed = false;
  for (size_t i = 0; i < sample.size() && counts.size() < max_records; ++i) {
    const char c = sample[i];
    if (quoted) {
      if (c == '"') quoted = false, closed = true;  // a doubled quote re-enters below
      continue;
    }
    // As the reader: a quote opens a quoted field at the field's start, or re-enters it
    // right after its closing quote (a doubled quote); elsewhere it is a literal.
    const bool reopen = field_start || closed;
    field_start = closed = false;
    if (c == '"' && reopen) {
      quoted = true;
    } else if (c == d) {
      ++fields;
      field_start = true;
    } else if (c == '\n' || c == '\r') {
      if (any || fields > 1) counts.push_back(fields);  // blank lines are skipped
      fields = 1;
      any = false;
      field_start = true;
      continue;
    }
    any = true;
  }
  if (whole && !quoted && (any || fields > 1) && counts.size() < max_records)
    counts.push_back(fields);
  return counts;
}

bool DelimiterFits(std::string_view sample, char d, bool whole) {
  const std::vector<size_t> n = SampleFieldCounts(sample, d, whole, 50);
  if (n.empty() || n[0] < 2) return false;
  if (n.size() == 1) return true;
  const size_t same = static_cast<size_t>(std::count(n.begin() + 1, n.end(), n[0]));
  return same * 10 >= (n.size() - 1) * 9;
}

char SniffSample(std::string_view sample, char preferred, bool whole) {
  if (sample.substr(0, 3) == "\xEF\xBB\xBF") sample.remove_prefix(3);
  if (DelimiterFits(sample, preferred, whole)) return preferred;
  for (char d : {',', '\t', ';', '|'}) {
    if (d != preferred && DelimiterFits(sample, d, whole)) return d;
  }
  return preferred;
}

}  // namespace

std::string DelimiterName(char d) {
  if (d == '\t') return "tab";
  if (static_cast<unsigned char>(d) < 0x20) return fmt::format("byte 0x{:02x}", d);
  return fmt::format("'{}'", d);
}

char SniffDelimiterOf(std::string_view sample, char preferred) {
  return SniffSample(sample, preferred, true);
}

char SniffDelimiter(const std::string& path, char preferred) {
  if (path == "-") return preferred;  // a stream is read once, by the reader
  Result<std::unique_ptr<InputStream>> in = InputStream::Open(path);
  if (!in.ok()) return preferred;
  std::string sample(size_t{64} << 10, '\0');
  Result<size_t> n = in.value()->ReadFull(sample.data(), sample.size());
  if (!n.ok()) return preferred;
  const bool whole = n.value() < sample.size();
  sample.resize(n.value());
  return SniffSample(sample, preferred, whole);
}

Result<char> ParseDelimiter(std::string_view s) {
  std::string lower(s);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  char d;
  if (lower == "\\t" || lower == "tab") {
    d = '\t';
  } else if (lower == "comma") {
    d = ',';
  } else if (lower == "semicolon") {
    d = ';';
  } else if (lower == "pipe") {
    d = '|';
  } else if (lower == "space") {
    d = ' ';
  } else if (s.size() == 1) {
    d = s[0];
  } else {
    return DS_ERR(kInvalidArgument,
                  "invalid delimiter '{}': expected one character (e.g. ',' ';' '|') or "
                  "'tab', '\\t', 'comma', 'semicolon', 'pipe', 'space'",
                  s);
  }
  DS_RETURN_IF_ERROR(CheckDelimiter(d));
  return d;
}

namespace {

inline bool NeedsQuotes(std::string_view f, char delim) {
  for (char c : f) {
    if (c == delim || c == '"' || c == '\n' || c == '\r') return true;
  }
  return f.size() >= 3 && std::memcmp(f.data(), "\xEF\xBB\xBF", 3) == 0;
}

inline void AppendField(std::string* out, std::string_view f, char delim) {
  if (!NeedsQuotes(f, delim)) {
    out->append(f);
    return;
  }
  out->push_back('"');
  size_t start = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '"') {
      out->append(f.substr(start, i + 1 - start));
      out->push_back('"');
      start = i + 1;
    }
  }
  out->append(f.substr(start));
  out->push_back('"');
}

template <typename S>
void AppendRecordImpl(std::string* out, const std::vector<S>& fields, char delim) {
  if (fields.size() == 1 && std::string_view(fields[0]).empty()) {
    out->append("\"\"\n");
    return;
  }
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out->push_back(delim);
    AppendField(out, fields[i], delim);
  }
  out->push_back('\n');
}

}  // namespace

void AppendCsvRecord(std::string* out, const std::vector<std::string>& fields, char delimiter) {
  AppendRecordImpl(out, fields, delimiter);
}

void AppendCsvRecord(std::string* out, const std::vector<std::string_view>& fields,
                     char delimiter) {
  AppendRecordImpl(out, fields, delimiter);
}

std::string CsvEscapeField(std::string_view field, char delimiter) {
  std::string out;
  AppendField(&out, field, delimiter);
  return out;
}

}  // namespace ds
