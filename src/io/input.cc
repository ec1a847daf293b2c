#include "io/input.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "util/utf8.h"

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

namespace {

// Streams read once into a private temporary file (see the header): path -> the
// copy's descriptor (never closed: the copy lives as long as the process) and the
// offset its data starts at.
struct Shared {
  int fd = -1;
  int64_t start = 0;
};
std::mutex g_shared_mu;
std::map<std::string, Shared>& SharedInputs() {
  static auto* m = new std::map<std::string, Shared>();
  return *m;
}

std::string TempDirName() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

// An unlinked temporary file: O_TMPFILE, else mkstemp + unlink.
Result<int> AnonymousTempFile(const std::string& display) {
  const std::string dir = TempDirName();
  int fd = -1;
#ifdef O_TMPFILE
  fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
#endif
  std::string templ = dir + "/.datasynth-input.XXXXXX";
  fd = ::mkostemp(templ.data(), O_CLOEXEC);
  if (fd < 0)
    return DS_ERR(kIo, "{}: cannot create a temporary file in {} to hold the stream: {} (set "
                  "TMPDIR to a writable directory)", display, dir, std::strerror(errno));
  ::unlink(templ.c_str());
  return fd;
}

int WaitSeconds() {
  const char* e = std::getenv("DATASYNTH_FIFO_WAIT_SECONDS");
  if (e && *e) {
    char* end = nullptr;
    long v = std::strtol(e, &end, 10);
    if (end && *end == '\0' && v >= 0 && v <= 86400) return int(v);
  }
  return 10;
}

// A FIFO without blocking in open(2): waits for a writer (poll reports nothing
// while no writer ever connected), then reads normally.
Result<int> OpenFifo(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return DS_ERR(kIo, "{}: cannot open: {}", path, std::strerror(errno));
  const int wait_s = WaitSeconds();
  struct pollfd p = {fd, POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, wait_s * 1000);
  } while (r < 0 && errno == EINTR);
  if (r <= 0) {
    ::close(fd);
    return DS_ERR(kUnavailable,
                  "{}: a FIFO with no writer (waited {} s); start the program that writes it "
                  "first, or pipe the data in ('-' reads standard input); "
                  "DATASYNTH_FIFO_WAIT_SECONDS sets the wait",
                  path, wait_s);
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

// Copies the stream on fd into an unlinked temporary file. Unless it is gzip, its
// first MiB is checked for binary data as soon as it has arrived (an endless
// /dev/urandom pipe fails at once).
Result<int> Spool(int in, const std::string& display) {
  DS_ASSIGN_OR_RETURN(int out, AnonymousTempFile(display));
  std::string head;
  bool checked = false;
  std::vector<char> buf(size_t{1} << 20);
  auto fail = [&](Status st) {
    ::close(out);
    return st;
  };
  for (;;) {
    ssize_t r = ::read(in, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return fail(DS_ERR(kIo, "{}: read failed: {}", display, std::strerror(errno)));
    if (!checked && (r == 0 || head.size() + size_t(r) >= (size_t{1} << 20))) {
      head.append(buf.data(), std::min(size_t(r), (size_t{1} << 20) - head.size()));
      checked = true;
      const bool gzip = head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x1f &&
                        static_cast<unsigned char>(head[1]) == 0x8b;
      if (!gzip) {
        Status st = CheckTextSample(head, display);
        if (!st.ok()) return fail(st);
      }
    } else if (!checked) {
      head.append(buf.data(), size_t(r));
    }
    if (r == 0) break;
    for (ssize_t off = 0; off < r;) {
      ssize_t w = ::write(out, buf.data() + off, size_t(r - off));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0)
        return fail(DS_ERR(kIo,
                           "{}: cannot copy the stream to a temporary file in {}: {} (set TMPDIR "
                           "to a directory with room)",
                           display, TempDirName(), std::strerror(w < 0 ? errno : ENOSPC)));
      off += w;
    }
  }
  return out;
}

Status RefuseDevice(const std::string& display, const struct stat& st, bool is_stdin) {
  if (S_ISCHR(st.st_mode) && is_stdin && ::isatty(0))
    return DS_ERR(kInvalidInput,
                  "{}: standard input is a terminal; pipe the records in (zcat data.csv.gz | "
                  "datasynth ... --input -) or give a file",
                  display);
  return DS_ERR(kInvalidInput,
                "{}: is a {} device, not a file or a pipe; give a regular file, a pipe or a FIFO",
                display, S_ISCHR(st.st_mode) ? "character" : "block");
}

}  // namespace

Status CheckTextSample(std::string_view s, const std::string& path) {
  if (s.size() >= 2 && ((static_cast<unsigned char>(s[0]) == 0xFF &&
                         static_cast<unsigned char>(s[1]) == 0xFE) ||
                        (static_cast<unsigned char>(s[0]) == 0xFE &&
                         static_cast<unsigned char>(s[1]) == 0xFF)))
    return DS_ERR(kInvalidInput,
                  "{}: UTF-16 text (byte-order mark); convert it to UTF-8 first (iconv -f UTF-16 "
                  "-t UTF-8)",
                  path);
  if (s.size() < 64) return Status::Ok();
  size_t nul = 0, bad = 0, pos = 0;
  while (pos < s.size()) {
    char32_t cp;
    if (!NextCodePointStrict(s, &pos, &cp)) {
      if (s.size() - pos < 4) break;  // a sequence cut by the end of the sample
      ++bad;
      ++pos;
      continue;
    }
    if (cp == 0) ++nul;
  }
  // Text has no NUL bytes, and Latin-1 or other legacy text is mostly ASCII;
  // random bytes are ~40% not UTF-8. Other control characters are no sign:
  // they delimit fields (Hive's \x01, the tabular batches' separators).
  const bool nuls = nul >= 16 && nul * 100 >= s.size();
  const bool not_utf8 = bad >= 16 && bad * 10 >= s.size() * 3;
  if (!nuls && !not_utf8) return Status::Ok();
  return DS_ERR(kInvalidInput,
                "{}: binary data, not text (of its first {} bytes, {} are NUL and {} not "
                "UTF-8); datasynth reads UTF-8 CSV or text lines (gzip is decompressed)",
                path, s.size(), nul, bad);
}

bool InputExists(const std::string& path) { return path == "-" || PathExists(path); }

std::optional<FileIdentity> InputFileIdentity(const std::string& path) {
  return IdentifyFile(path == "-" ? std::string("/dev/stdin") : path);
}

Status InputStream::OpenPath(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_shared_mu);
  auto& shared = SharedInputs();
  if (auto it = shared.find(path); it != shared.end()) {
    fd_ = it->second.fd;
    pos_ = it->second.start;
    return Status::Ok();
  }
  struct stat st;
  int fd = -1;
  if (path == "-") {
    if (::fstat(0, &st) != 0)
      return DS_ERR(kIo, "{}: cannot stat: {}", path_, std::strerror(errno));
    if (S_ISREG(st.st_mode)) {  // < data.csv: in place, from its offset
      const off_t at = ::lseek(0, 0, SEEK_CUR);
      shared[path] = Shared{0, at < 0 ? 0 : int64_t(at)};
      fd_ = 0;
      pos_ = shared[path].start;
      return Status::Ok();
    }
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return RefuseDevice(path_, st, true);
    fd = 0;
  } else {
    if (::stat(path.c_str(), &st) != 0) {
      const int err = errno;
      if (err == ENOENT) return DS_ERR(kNotFound, "{}: no such file", path);
      return DS_ERR(kIo, "{}: cannot open: {}", path, std::strerror(err));
    }
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
      return RefuseDevice(path, st, path == "/dev/stdin" || path == "/dev/fd/0");
    if (S_ISFIFO(st.st_mode)) {
      DS_ASSIGN_OR_RETURN(fd, OpenFifo(path));
    } else {
      fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd_ < 0) {
        const int err = errno;
        if (err == ENOENT) return DS_ERR(kNotFound, "{}: no such file", path);
        return DS_ERR(kIo, "{}: cannot open: {}", path, std::strerror(err));
      }
      own_fd_ = true;
      if (::fstat(fd_, &st) == 0 && S_ISDIR(st.st_mode))
        return DS_ERR(kIo, "{}: is a directory, not a file", path);
      return Status::Ok();
    }
  }
  // A pipe, FIFO or socket: read once into a private copy.
  Result<int> copy = Spool(fd, path_);
  if (fd != 0) ::close(fd);
  if (!copy.ok()) return copy.status();
  shared[path] = Shared{*copy, 0};
  fd_ = *copy;
  pos_ = 0;
  return Status::Ok();
}

Result<std::unique_ptr<InputStream>> InputStream::Open(const std::string& path,
                                                       size_t chunk_bytes) {
  std::unique_ptr<InputStream> in(new InputStream());
  in->chunk_ = std::max<size_t>(chunk_bytes, 16);
  if (path.empty()) return DS_ERR(kInvalidArgument, "empty input file name");
  in->path_ = path == "-" ? "<stdin>" : path;
  DS_RETURN_IF_ERROR(in->OpenPath(path));
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
  DS_RETURN_IF_ERROR(in->FillHead());
  return in;
}

Status InputStream::FillHead() {
  head_.resize(kSniffBytes);
  size_t got = 0;
  while (got < kSniffBytes) {
    Result<size_t> r = ReadDecoded(head_.data() + got, kSniffBytes - got);
    if (!r.ok() || *r == 0) break;  // an error stays in error_: Read returns it after head_
    got += *r;
  }
  head_.resize(got);
  return CheckTextSample(head_, path_);
}

Result<size_t> InputStream::ReadRaw(char* dst, size_t n) {
  for (;;) {
    const ssize_t r = pos_ >= 0 ? ::pread(fd_, dst, n, off_t(pos_)) : ::read(fd_, dst, n);
    if (r >= 0) {
      if (r == 0) raw_eof_ = true;
      if (pos_ >= 0) pos_ += r;
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
  if (head_pos_ < head_.size() && n > 0) {
    const size_t k = std::min(n, head_.size() - head_pos_);
    std::memcpy(dst, head_.data() + head_pos_, k);
    head_pos_ += k;
    bytes_out_ += k;
    if (head_pos_ == head_.size()) {
      head_.clear();
      head_.shrink_to_fit();
      head_pos_ = 0;
    }
    return k;
  }
  DS_ASSIGN_OR_RETURN(size_t r, ReadDecoded(dst, n));
  bytes_out_ += r;
  return r;
}

Result<size_t> InputStream::ReadDecoded(char* dst, size_t n) {
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
