// File-system helpers: crash-safe (atomic) writes, bounded reads, directories.
//
// Atomic write protocol (WriteFileAtomic, AtomicFileWriter):
//   1. create a fresh temp file "<dir>/.<name>.tmp.<random>" in the destination's
//      directory (O_CREAT|O_EXCL, mode 0666 & ~umask), so the final rename never
//      crosses file systems;
//   2. write all data (EINTR/short writes retried);
//   3. fsync(temp), close(temp) (close errors are checked: NFS reports late);
//   4. rename(temp, path) -- atomic replace: readers see the old or the new file;
//   5. fsync(dir) so the rename itself survives a crash.
// Any failure in 1-4 removes the temp file and returns kIo naming the destination path
// and strerror ("out/model.bin: write failed: No space left on device"). A destination
// is never left half-written and no temp file is left behind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "util/status.h"

namespace ds {

// Writes data to path atomically (see protocol above).
Status WriteFileAtomic(const std::string& path, std::string_view data);

// Streams a large output to path atomically. Writes are buffered (1 MiB).
//   AtomicFileWriter w;
//   DS_RETURN_IF_ERROR(w.Open(path));
//   DS_RETURN_IF_ERROR(w.Write(chunk));  ...
//   DS_RETURN_IF_ERROR(w.Commit());      // rename into place
// Without a successful Commit (error, early return, exception) the destructor removes the
// temp file and path is untouched. After any error the writer is closed: the temp file is
// gone and further calls return that same error.
class AtomicFileWriter {
 public:
  AtomicFileWriter() = default;
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  Status Open(const std::string& path);
  Status Write(std::string_view data);
  Status Commit();
  // Discards everything written: closes and removes the temp file. Idempotent.
  void Abort();

  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  uint64_t bytes_written() const { return bytes_; }

 private:
  Status Flush();
  Status Fail(Status s);  // removes the temp file, remembers s, returns it

  int fd_ = -1;
  std::string path_;
  std::string temp_path_;
  std::string buf_;  // pending bytes, flushed at 1 MiB
  uint64_t bytes_ = 0;
  Status error_;
};

// Reads the whole file (raw bytes, no decompression). Errors: kNotFound (missing),
// kInvalidInput (larger than max_bytes), kIo (anything else, with strerror).
Result<std::string> ReadFile(const std::string& path, size_t max_bytes = size_t{1} << 30);

// True if path names an existing file, directory or other object (follows symlinks).
bool PathExists(const std::string& path);

// mkdir -p: creates path and missing parents. OK if it already is a directory; kIo if
// it or a parent exists and is not a directory, or on permission errors.
Status MakeDirs(const std::string& path);

// rm -rf: removes path recursively (symlinks are removed, not followed). OK if missing.
Status RemoveTree(const std::string& path);

}  // namespace ds
