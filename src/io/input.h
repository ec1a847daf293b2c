// InputStream: a buffered byte source over a plain file, a gzip file or stdin.
//
// Open(path) opens the file ("-" = stdin) and sniffs the first two bytes: 1f 8b means
// gzip (RFC 1952), decoded with zlib's inflate; anything else is passed through. The
// decision is by content, not by file name, so "data.csv" holding gzip works and so does
// a gzip stream on stdin. Concatenated gzip members (as `cat a.gz b.gz`, pigz, bgzip
// write) are decoded one after another.
//
// Errors (the message always starts with the display path, "<stdin>" for "-"):
//   kNotFound      the file does not exist
//   kIo            open/read failures, a directory given as input (with strerror)
//   kInvalidInput  "data.csv.gz: truncated gzip stream" (input ended before the gzip
//                  trailer: never reported as a silent EOF), "corrupt gzip stream",
//                  "trailing garbage after gzip stream"
//   kResourceExhausted  zlib out of memory
// Errors are sticky: after one, Read keeps returning it.
//
// What may be an input (docs/reliability.md):
//   * a regular file, read directly;
//   * a stream: "-" (standard input), a pipe, a FIFO, /dev/stdin, /dev/fd/N (process
//     substitution, <(...)): read ONCE, on the first Open, into a private temporary
//     file (O_TMPFILE in $TMPDIR, else /tmp; unlinked, so nothing is left behind),
//     and every later Open of the same path reads that copy, so that training's
//     several passes see the same bytes and messages still name the path given.
//     A FIFO is opened without blocking and waits for a writer for at most
//     DATASYNTH_FIFO_WAIT_SECONDS (default 10) seconds (kUnavailable, "no writer").
//     "-" on a regular file (< data.csv) reads it in place, from its offset;
//   * anything else is refused at once (kInvalidInput): a terminal, /dev/zero,
//     /dev/urandom and other character or block devices.
// Binary data is refused within the first MiB of the decoded input, before any
// further reading (CheckTextSample): a long binary input never makes the reader
// run on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "util/fs.h"
#include "util/status.h"

namespace ds {

class InputStream {
 public:
  static constexpr size_t kDefaultChunk = size_t{1} << 20;  // 1 MiB raw reads

  // chunk_bytes: size of each read(2) from the underlying file (>= 16).
  static Result<std::unique_ptr<InputStream>> Open(const std::string& path,
                                                   size_t chunk_bytes = kDefaultChunk);
  ~InputStream();
  InputStream(const InputStream&) = delete;
  InputStream& operator=(const InputStream&) = delete;

  // Reads up to n (> 0) decoded bytes into dst. Returns the count, which is 0 only at the
  // end of input; may return fewer than n before the end.
  Result<size_t> Read(char* dst, size_t n);

  // Reads until dst holds n bytes or the input ends; returns the count.
  Result<size_t> ReadFull(char* dst, size_t n);

  // Path for messages: as given to Open, "<stdin>" for "-".
  const std::string& path() const { return path_; }
  bool is_gzip() const { return gzip_; }
  // Decoded bytes returned by Read so far.
  uint64_t bytes_read() const { return bytes_out_; }

 private:
  struct Zlib;
  InputStream() = default;
  Status OpenPath(const std::string& path);     // sets fd_ (and pos_ for shared spools)
  Status FillHead();                            // head_: the first kSniffBytes, checked
  Result<size_t> ReadDecoded(char* dst, size_t n);
  Result<size_t> ReadRaw(char* dst, size_t n);  // one read(2), EINTR retried
  Status FillRaw();                             // refill raw_ when consumed
  Result<size_t> ReadGzip(char* dst, size_t n);
  Status Fail(Status s) {
    error_ = s;
    return s;
  }

  static constexpr size_t kSniffBytes = size_t{1} << 20;
  int fd_ = -1;
  bool own_fd_ = false;
  int64_t pos_ = -1;  // >= 0: fd_ is shared (a spool, stdin): pread at this offset
  std::string head_;  // the first decoded bytes (FillHead), served first
  size_t head_pos_ = 0;
  bool gzip_ = false;
  bool raw_eof_ = false;      // read(2) returned 0
  bool member_done_ = false;  // gzip: a member ended, next bytes decide what follows
  bool done_ = false;         // decoded stream ended
  std::string path_;
  std::unique_ptr<char[]> raw_;  // [chunk_] raw (possibly compressed) bytes
  size_t chunk_ = 0;
  size_t raw_pos_ = 0, raw_end_ = 0;  // unread raw bytes are raw_[raw_pos_, raw_end_)
  uint64_t bytes_out_ = 0;
  std::unique_ptr<Zlib> z_;
  Status deferred_;  // gzip: error found after decoding bytes still to be returned
  Status error_;
};

// kInvalidInput "<path>: binary data, not text (...)" when sample (the first bytes of
// an input) holds at least 64 bytes and either 1% or more of them (and at least 16)
// are NUL bytes, or 30% or more (and at least 16) are not UTF-8; also for a UTF-16
// byte-order mark. Other control characters do not count (\x01 delimits Hive
// tables). Shorter or
// cleaner samples pass: the record readers report the line and field of a stray bad
// byte (Latin-1 text gets "invalid UTF-8 at byte N" there, not "binary").
Status CheckTextSample(std::string_view sample, const std::string& path);

// True when path can be opened as an input: "-", or an existing path.
bool InputExists(const std::string& path);

// The identity of the regular file behind an input path ("-": standard input's file);
// nullopt for streams (pipes, FIFOs) and missing paths.
std::optional<FileIdentity> InputFileIdentity(const std::string& path);

// Reads the whole (decoded) input; kInvalidInput when it exceeds max_bytes.
Result<std::string> ReadAllInput(const std::string& path, size_t max_bytes = size_t{1} << 30);

}  // namespace ds
