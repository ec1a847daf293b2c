#include "io/input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ds {

struct InputStream::Zlib {
  z_stream s{};
  bool initialized = false;
  ~Zlib() {
    if (initialized) inflateEnd(&s);
  }
};

InputStream::~InputStream() {
  if (own_fd_ && fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<InputStream>> InputStream::Open(const std::string& path,
                                                       size_t chunk_bytes) {
  std::unique_ptr<InputStream> in(new InputStream());
  in->chunk_ = std::max<size_t>(chunk_bytes, 16);
  if (path == "-") {
    in->path_ = "<stdin>";
    in->fd_ = 0;
    in->own_fd_ = false;
  } else {
    in->path_ = path;
    if (path.empty()) return DS_ERR(kInvalidArgument, "empty input file name");
    in->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (in->fd_ < 0) {
      const int err = errno;
      if (err == ENOENT) return DS_ERR(kNotFound, "{}: no such file", path);
      return DS_ERR(kIo, "{}: cannot open: {}", path, std::strerror(err));
    }
    in->own_fd_ = true;
    struct stat st;
    if (::fstat(in->fd_, &st) == 0 && S_ISDIR(st.st_mode)) {
      return DS_ERR(kIo, "{}: is a directory, not a file", path);
    }
  }
  in->raw_.reset(new char[in->chunk_]);
  // Sniff the first two bytes (a pipe may deliver them separately).
  while (in->raw_end_ < 2 && !in->raw_eof_) {
    DS_ASSIGN_OR_RETURN(size_t r,
                        in->ReadRaw(in->raw_.get() + in->raw_end_, in->chunk_ - in->raw_end_));
    in->raw_end_ += r;
  }
  if (in->raw_end_ >= 2 && static_cast<unsigned char>(in->raw_[0]) == 0x1f &&
      static_cast<unsigned char>(in->raw_[1]) == 0x8b) {
    in->gzip_ = true;
    in->z_ = std::make_unique<Zlib>();
    // 15 + 16: gzip wrapper only, maximum window.
    const int rc = inflateInit2(&in->z_->s, 15 + 16);
    if (rc != Z_OK) {
      return DS_ERR(kResourceExhausted, "{}: cannot initialise gzip decoder (zlib error {})",
                    in->path_, rc);
    }
    in->z_->initialized = true;
  }
  return in;
}

Result<size_t> InputStream::ReadRaw(char* dst, size_t n) {
  for (;;) {
    const ssize_t r = ::read(fd_, dst, n);
    if (r >= 0) {
      if (r == 0) raw_eof_ = true;
      return static_cast<size_t>(r);
    }
    if (errno == EINTR) continue;
    const int err = errno;
    return DS_ERR(kIo, "{}: read failed: {}", path_, std::strerror(err));
  }
}

Status InputStream::FillRaw() {
  raw_pos_ = raw_end_ = 0;
  if (raw_eof_) return Status::Ok();
  DS_ASSIGN_OR_RETURN(size_t r, ReadRaw(raw_.get(), chunk_));
  raw_end_ = r;
  return Status::Ok();
}

Result<size_t> InputStream::Read(char* dst, size_t n) {
  if (!error_.ok()) return error_;
  if (n == 0 || done_) return size_t{0};
  Result<size_t> r = size_t{0};
  if (gzip_) {
    r = ReadGzip(dst, n);
  } else if (raw_pos_ < raw_end_) {
    const size_t k = std::min(n, raw_end_ - raw_pos_);
    std::memcpy(dst, raw_.get() + raw_pos_, k);
    raw_pos_ += k;
    r = k;
  } else if (raw_eof_) {
    r = size_t{0};
  } else {
    r = ReadRaw(dst, n);
  }
  if (!r.ok()) return Fail(r.status());
  if (*r == 0) done_ = true;
  bytes_out_ += *r;
  return r;
}

Result<size_t> InputStream::ReadFull(char* dst, size_t n) {
  size_t got = 0;
  while (got < n) {
    DS_ASSIGN_OR_RETURN(size_t r, Read(dst + got, n - got));
    if (r == 0) break;
    got += r;
  }
  return got;
}

Result<size_t> InputStream::ReadGzip(char* dst, size_t n) {
  if (!deferred_.ok()) return deferred_;
  z_stream& s = z_->s;
  for (;;) {
    if (raw_pos_ == raw_end_) DS_RETURN_IF_ERROR(FillRaw());
    if (member_done_) {
      // Between members: end of input, another member, or garbage.
      if (raw_pos_ == raw_end_) return size_t{0};  // clean end
      if (static_cast<unsigned char>(raw_[raw_pos_]) != 0x1f) {
        return DS_ERR(kInvalidInput, "{}: trailing garbage after gzip stream", path_);
      }
      if (inflateReset(&s) != Z_OK) {
        return DS_ERR(kInternal, "{}: inflateReset failed", path_);
      }
      member_done_ = false;
    }
    // No raw input left: zlib may still hold decoded bytes (the rest of a long match
    // when the last call's output space ran out), so inflate runs once more on no
    // input; only when that yields nothing is the stream truncated.
    const bool input_ended = raw_pos_ == raw_end_;
    s.next_in = reinterpret_cast<Bytef*>(raw_.get() + raw_pos_);
    s.avail_in = static_cast<uInt>(raw_end_ - raw_pos_);
    s.next_out = reinterpret_cast<Bytef*>(dst);
    s.avail_out = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    const uInt out_before = s.avail_out;
    const int rc = inflate(&s, Z_NO_FLUSH);
    raw_pos_ = raw_end_ - s.avail_in;
    const size_t produced = out_before - s.avail_out;
    if (rc == Z_STREAM_END) {
      member_done_ = true;
    } else if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT) {
      Status err = DS_ERR(kInvalidInput, "{}: corrupt gzip stream ({})", path_,
                          s.msg ? s.msg : "invalid data");
      // Deliver the bytes decoded before the damage first, so that the caller sees
      // the same bytes, then the same error, whatever its read size.
      if (produced > 0) {
        deferred_ = err;
        return produced;
      }
      return err;
    } else if (rc == Z_MEM_ERROR) {
      return DS_ERR(kResourceExhausted, "{}: out of memory while decompressing", path_);
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      return DS_ERR(kInternal, "{}: zlib inflate error {}", path_, rc);
    }
    if (produced > 0) return produced;
    if (input_ended && !member_done_) {
      // Input ended inside a gzip member: header, data or trailer is missing.
      return DS_ERR(kInvalidInput,
                    "{}: truncated gzip stream (input ends before the gzip "
                    "trailer; the file is incomplete)",
                    path_);
    }
  }
}

Result<std::string> ReadAllInput(const std::string& path, size_t max_bytes) {
  DS_ASSIGN_OR_RETURN(auto in, InputStream::Open(path));
  std::string out;
  const size_t step = InputStream::kDefaultChunk;
  for (;;) {
    const size_t old = out.size();
    out.resize(old + step);
    DS_ASSIGN_OR_RETURN(size_t r, in->Read(out.data() + old, step));
    out.resize(old + r);
    if (r == 0) break;
    if (out.size() > max_bytes) {
      return DS_ERR(kInvalidInput, "{}: input is larger than the limit of {} bytes", in->path(),
                    max_bytes);
    }
  }
  return out;
}

}  // namespace ds
