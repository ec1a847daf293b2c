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

// Resumable state machine; see the grammar in csv.h. The states persist across buffer
// refills (p == e), so a record may span any number of chunks without re-parsing.
Result<bool> CsvReader::ReadRecord(std::vector<std::string>* out, bool is_header) {
  if (!error_.ok()) return error_;
  enum State { kStart, kField, kUnquoted, kQuoted, kAfterQuote };
  State st = kStart;
  size_t nf = 0;               // completed fields
  std::string* f = nullptr;    // the field being filled: (*out)[nf]
  int64_t field_line = line_;  // line where the current field started
  const char d = opts_.delimiter;
  const size_t max_field = opts_.max_field_bytes;
  const char* p = buf_.get() + pos_;
  const char* e = buf_.get() + end_;
  bool ascii = chunk_ascii_;  // every chunk this record touched so far is pure ASCII

  auto finish = [&](bool advance_line, bool cr) -> Result<bool> {
    // Ends the record after the current field.
    ++nf;
    out->resize(nf);
    if (advance_line) ++line_;
    skip_lf_ = cr;
    pos_ = static_cast<size_t>(p - buf_.get());
    if (!is_header) ++records_read_;
    return true;
  };

  for (;;) {
    if (p == e) {
      Result<bool> more = Fill();
      if (!more.ok()) return Fail(more.status());
      p = buf_.get() + pos_;
      e = buf_.get() + end_;
      ascii = ascii && chunk_ascii_;
      if (!*more) {  // end of input
        if (st == kStart) return false;
        if (st == kQuoted) return Fail(Unbalanced(nf, field_line, is_header));
        if (st == kField) {  // input ends right after a delimiter: one more empty field
          if (nf >= opts_.max_fields) return Fail(TooManyFields());
          if (nf == out->size()) out->emplace_back();
          (*out)[nf].clear();
        } else {
          Status s = CheckField(*f, nf, field_line, is_header, ascii);
          if (!s.ok()) return Fail(s);
        }
        return finish(false, false);
      }
    }
    switch (st) {
      case kStart: {
        const char c = *p;
        if (skip_lf_) {
          skip_lf_ = false;
          if (c == '\n') {
            ++p;
            continue;
          }
        }
        if (c == '\n' || c == '\r') {  // blank line
          ++line_;
          skip_lf_ = (c == '\r');
          ++p;
          continue;
        }
        record_line_ = line_;
        st = kField;
        [[fallthrough]];
      }
      case kField: {
        if (nf >= opts_.max_fields) return Fail(TooManyFields());
        if (nf == out->size()) out->emplace_back();
        f = &(*out)[nf];
        f->clear();
        field_line = line_;
        if (*p == '"') {
          ++p;
          st = kQuoted;
          continue;
        }
        st = kUnquoted;
        [[fallthrough]];
      }
      case kUnquoted: {
        const char* s = p;
        while (p < e && !unquoted_special_[static_cast<unsigned char>(*p)]) ++p;
        f->append(s, static_cast<size_t>(p - s));
        if (f->size() > max_field) return Fail(TooLong(nf, field_line, is_header));
        if (p == e) continue;
        const char c = *p++;
        if (c == d) {
          Status st2 = CheckField(*f, nf, field_line, is_header, ascii);
          if (!st2.ok()) return Fail(st2);
          ++nf;
          st = kField;
          continue;
        }
        if (c == '\n' || c == '\r') {
          Status st2 = CheckField(*f, nf, field_line, is_header, ascii);
          if (!st2.ok()) return Fail(st2);
          return finish(true, c == '\r');
        }
        if (c == '"') {  // lenient: literal quote inside an unquoted field
          f->push_back('"');
          continue;
        }
        return Fail(NulByte(nf, is_header));
      }
      case kQuoted: {
        const char* s = p;
        while (p < e && !quoted_special_[static_cast<unsigned char>(*p)]) ++p;
        f->append(s, static_cast<size_t>(p - s));
        if (f->size() > max_field) return Fail(TooLong(nf, field_line, is_header));
        if (p == e) continue;
        const char c = *p++;
        if (c == '"') {
          st = kAfterQuote;
        } else if (c == '\n') {
          ++line_;
          f->push_back('\n');
        } else {
          return Fail(NulByte(nf, is_header));
        }
        continue;
      }
      case kAfterQuote: {
        const char c = *p;
        if (c == '"') {  // doubled quote
          f->push_back('"');
          ++p;
          st = kQuoted;
          continue;
        }
        if (c == d || c == '\n' || c == '\r') {
          st = kUnquoted;  // consumes the terminator (empty run)
          continue;
        }
        if (c == '\0') return Fail(NulByte(nf, is_header));
        return Fail(DS_ERR(kInvalidInput,
                           "{}:{}: {}: unexpected {} after the closing quote of a quoted field "
                           "(a quote inside a quoted field must be doubled: \"\")",
                           path(), line_, FieldRef(nf, is_header), Printable(c)));
      }
    }
  }
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
