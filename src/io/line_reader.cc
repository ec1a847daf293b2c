#include "io/line_reader.h"

#include <algorithm>
#include <cstring>

#include "util/utf8.h"

namespace ds {

Result<size_t> ReadStartSkippingBom(InputStream* in, char* buf) {
  DS_ASSIGN_OR_RETURN(size_t r, in->ReadFull(buf, 3));
  if (r == 3 && std::memcmp(buf, "\xEF\xBB\xBF", 3) == 0) return size_t{0};
  return r;
}

Result<std::unique_ptr<LineReader>> LineReader::Open(const std::string& path, LineOptions options) {
  std::unique_ptr<LineReader> r(new LineReader());
  r->opts_ = options;
  DS_ASSIGN_OR_RETURN(r->in_, InputStream::Open(path));
  r->cap_ = std::max<size_t>(options.buffer_bytes, 4);
  r->buf_.reset(new char[r->cap_]);
  DS_ASSIGN_OR_RETURN(r->end_, ReadStartSkippingBom(r->in_.get(), r->buf_.get()));
  return r;
}

Result<bool> LineReader::Next(std::string* line) {
  if (!error_.ok()) return error_;
  line->clear();
  bool got_any = false;  // bytes of this line seen (distinguishes "" from EOF)
  for (;;) {
    if (pos_ == end_) {
      if (eof_) break;
      Result<size_t> r = in_->Read(buf_.get(), cap_);
      if (!r.ok()) return Fail(r.status());
      pos_ = 0;
      end_ = *r;
      if (end_ == 0) {
        eof_ = true;
        break;
      }
    }
    const char* p = buf_.get() + pos_;
    const size_t avail = end_ - pos_;
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', avail));
    const size_t take = nl ? static_cast<size_t>(nl - p) : avail;
    got_any = true;
    if (line->size() + take > opts_.max_line_bytes) {
      return Fail(DS_ERR(kInvalidInput, "{}:{}: line longer than {} bytes", path(), line_ + 1,
                         opts_.max_line_bytes));
    }
    line->append(p, take);
    pos_ += take;
    if (nl) {
      ++pos_;
      break;
    }
  }
  if (!got_any) return false;
  ++line_;
  if (!line->empty() && line->back() == '\r') line->pop_back();
  if (const void* z = std::memchr(line->data(), '\0', line->size())) {
    const size_t off = static_cast<size_t>(static_cast<const char*>(z) - line->data());
    return Fail(DS_ERR(kInvalidInput, "{}:{}: NUL byte at byte {} of the line (binary file?)",
                       path(), line_, off));
  }
  size_t bad = 0;
  if (!IsValidUtf8(*line, &bad)) {
    return Fail(
        DS_ERR(kInvalidInput, "{}:{}: invalid UTF-8 at byte {} of the line{}", path(), line_,
               bad, InvalidUtf8Hint(*line, bad)));
  }
  return true;
}

}  // namespace ds
