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
// The temp file is created with O_CREAT|O_EXCL|O_NOFOLLOW: a file or symlink planted at
// its name is never opened or followed.
// Any failure in 1-4 removes the temp file and returns kIo naming the destination path
// and strerror ("out/model.bin: write failed: No space left on device"). A destination
// is never left half-written and no temp file is left behind.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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
// kInvalidInput (larger than max_bytes, or a character or block device such as
// /dev/zero), kIo (anything else, with strerror).
Result<std::string> ReadFile(const std::string& path, size_t max_bytes = size_t{1} << 30);

// True if path names an existing file, directory or other object (follows symlinks).
bool PathExists(const std::string& path);

// mkdir -p: creates path and missing parents. OK if it already is a directory; kIo if
// it or a parent exists and is not a directory, or on permission errors.
Status MakeDirs(const std::string& path);

// rm -rf: removes path recursively (symlinks are removed, not followed). OK if missing.
Status RemoveTree(const std::string& path);

// ---- Identity and location checks (output safety, docs/reliability.md) ----

// A regular file's identity, to recognise it under another name (a symlink, a hard
// link, another spelling of the path).
struct FileIdentity {
  uint64_t dev = 0, ino = 0;
  int64_t mtime_ns = 0;
  std::string path;  // absolute, symlinks resolved (realpath)
};

// stat(path), following symlinks. nullopt when path does not exist or is not a
// regular file.
std::optional<FileIdentity> IdentifyFile(const std::string& path);

// True when path exists and is the file `id` describes: the same device and inode,
// and the same modification time or the same resolved path (so that an inode number
// reused by an unrelated new file does not count).
bool IsSameFile(const std::string& path, const FileIdentity& id);

// realpath(3): absolute, symlinks resolved. kNotFound / kIo with strerror.
Result<std::string> RealPath(const std::string& path);

// The resolved directory that holds path (path itself need not exist; its directory must).
Result<std::string> ResolvedParent(const std::string& path);

// True when `inner` is `outer` or lies below it. Both must be resolved absolute paths.
bool PathIsWithin(const std::string& inner, const std::string& outer);

// Opens an existing regular file without following a symlink at its last component
// (O_NOFOLLOW). flags: O_RDONLY / O_RDWR / O_WRONLY (+ O_APPEND); O_CLOEXEC is added.
// Errors name the path: kNotFound; kInvalidArgument for a symlink ("is a symbolic link;
// refusing to follow it") or for something other than a regular file; kIo otherwise.
Result<int> OpenExistingNoFollow(const std::string& path, int flags);

// Creates a new file: O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC (never opens or follows
// anything already at path). kAlreadyExists when path exists (a dangling symlink
// included), kIo otherwise.
Result<int> CreateExclusive(const std::string& path, int flags, mode_t mode = 0666);

// An exclusive advisory lock (flock, non-blocking) on the lock file `dir/name`,
// created without following links, held until destruction:
//   auto lock = DirLock::Acquire("out/model", ".datasynth.lock", "training");
// Creates dir (mkdir -p) when missing; created() then says so and the destructor
// removes dir (and the parents it created) again when only the lock file is left. Busy: kIo "out/model:
// another datasynth process is already training into this directory (...)". The lock
// file is removed on release; Acquire checks after locking that the name still
// names the locked file (a release between open and flock), and retries otherwise.
class DirLock {
 public:
  static Result<std::unique_ptr<DirLock>> Acquire(const std::string& dir, const std::string& name,
                                                  const std::string& activity);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  bool created() const { return created_; }
  // On release, remove the directory with everything in it (only if created()).
  void RemoveDirOnRelease() { remove_tree_ = created_; }
  const std::string& lock_path() const { return path_; }

 private:
  DirLock() = default;
  int fd_ = -1;
  std::string dir_, path_;
  bool created_ = false;
  bool remove_tree_ = false;
  std::vector<std::string> made_;  // directories Acquire created, the leaf first
};

}  // namespace ds
