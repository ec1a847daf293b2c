#include "util/fs.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace ds {
namespace {

constexpr size_t kWriteBuffer = size_t{1} << 20;

std::string ErrnoStr(int err) { return std::strerror(err); }

// Directory part of path ("." when there is none).
std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Writes all of [p, p+n), retrying short writes and EINTR. Returns 0 or an errno.
int WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

// fsync on the directory so a completed rename is durable. File systems that cannot
// sync directories (EINVAL/ENOTSUP) are not an error.
int SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  int err = 0;
  if (::fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP) err = errno;
  ::close(fd);
  return err;
}

uint64_t TempSuffix() {
  static std::atomic<uint64_t> counter{0};
  const uint64_t t =
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  uint64_t x = t ^ (uint64_t(::getpid()) << 32) ^ (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return x;
}

}  // namespace

AtomicFileWriter::~AtomicFileWriter() { Abort(); }

void AtomicFileWriter::Abort() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
    ::unlink(temp_path_.c_str());
  }
  buf_.clear();
  buf_.shrink_to_fit();
}

Status AtomicFileWriter::Fail(Status s) {
  Abort();
  error_ = s;
  return s;
}

Status AtomicFileWriter::Open(const std::string& path) {
  Abort();
  error_ = Status::Ok();
  path_ = path;
  bytes_ = 0;
  if (path.empty() || path.back() == '/') {
    return Fail(DS_ERR(kIo, "'{}': not a file path", path));
  }
  const std::string dir = DirName(path);
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp_path_ = fmt::format("{}/.{}.tmp.{:016x}", dir, BaseName(path), TempSuffix());
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ >= 0) break;
    if (errno == EINTR || errno == EEXIST) continue;
    const int err = errno;
    error_ = DS_ERR(kIo, "{}: cannot create temporary file in '{}': {}", path, dir, ErrnoStr(err));
    return error_;
  }
  if (fd_ < 0) {
    error_ = DS_ERR(kIo, "{}: cannot create a unique temporary file in '{}'", path, dir);
    return error_;
  }
  buf_.reserve(kWriteBuffer);
  return Status::Ok();
}

Status AtomicFileWriter::Flush() {
  if (buf_.empty()) return Status::Ok();
  if (int err = WriteAll(fd_, buf_.data(), buf_.size())) {
    return Fail(DS_ERR(kIo, "{}: write failed: {}", path_, ErrnoStr(err)));
  }
  buf_.clear();
  return Status::Ok();
}

Status AtomicFileWriter::Write(std::string_view data) {
  if (!error_.ok()) return error_;
  if (fd_ < 0) return DS_ERR(kInternal, "AtomicFileWriter::Write before Open or after Commit");
  bytes_ += data.size();
  if (buf_.size() + data.size() <= kWriteBuffer) {
    buf_.append(data);
    return Status::Ok();
  }
  DS_RETURN_IF_ERROR(Flush());
  if (data.size() >= kWriteBuffer) {
    if (int err = WriteAll(fd_, data.data(), data.size())) {
      return Fail(DS_ERR(kIo, "{}: write failed: {}", path_, ErrnoStr(err)));
    }
  } else {
    buf_.append(data);
  }
  return Status::Ok();
}

Status AtomicFileWriter::Commit() {
  if (!error_.ok()) return error_;
  if (fd_ < 0) return DS_ERR(kInternal, "AtomicFileWriter::Commit before Open or twice");
  DS_RETURN_IF_ERROR(Flush());
  if (::fsync(fd_) != 0 && errno != EINVAL) {
    const int err = errno;
    return Fail(DS_ERR(kIo, "{}: fsync failed: {}", path_, ErrnoStr(err)));
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(temp_path_.c_str());
    return Fail(DS_ERR(kIo, "{}: close failed: {}", path_, ErrnoStr(err)));
  }
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp_path_.c_str());
    return Fail(
        DS_ERR(kIo, "{}: cannot rename temporary file into place: {}", path_, ErrnoStr(err)));
  }
  buf_.clear();
  buf_.shrink_to_fit();
  if (int err = SyncDir(DirName(path_))) {
    // The file is complete and in place; only the directory sync failed.
    return DS_ERR(kIo, "{}: written, but syncing its directory failed: {}", path_, ErrnoStr(err));
  }
  return Status::Ok();
}

Status WriteFileAtomic(const std::string& path, std::string_view data) {
  AtomicFileWriter w;
  DS_RETURN_IF_ERROR(w.Open(path));
  DS_RETURN_IF_ERROR(w.Write(data));
  return w.Commit();
}

Result<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return DS_ERR(kNotFound, "{}: no such file", path);
    return DS_ERR(kIo, "{}: cannot open: {}", path, ErrnoStr(err));
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    return DS_ERR(kIo, "{}: cannot stat: {}", path, ErrnoStr(err));
  }
  if (S_ISDIR(st.st_mode)) return DS_ERR(kIo, "{}: is a directory, not a file", path);
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))  // /dev/zero would fill max_bytes first
    return DS_ERR(kInvalidInput, "{}: is a device, not a file", path);
  std::string out;
  if (S_ISREG(st.st_mode)) {
    if (static_cast<uint64_t>(st.st_size) > max_bytes) {
      return DS_ERR(kInvalidInput, "{}: file is larger than the limit of {} bytes", path,
                    max_bytes);
    }
    out.reserve(static_cast<size_t>(st.st_size));
  }
  char chunk[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd, chunk, sizeof(chunk));
    if (r < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      return DS_ERR(kIo, "{}: read failed: {}", path, ErrnoStr(err));
    }
    if (r == 0) break;
    if (out.size() + static_cast<size_t>(r) > max_bytes) {
      return DS_ERR(kInvalidInput, "{}: file is larger than the limit of {} bytes", path,
                    max_bytes);
    }
    out.append(chunk, static_cast<size_t>(r));
  }
  return out;
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

Status MakeDirs(const std::string& path) {
  if (path.empty()) return DS_ERR(kIo, "cannot create a directory with an empty name");
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return DS_ERR(kIo, "{}: cannot create directory: {}", path, ec.message());
  if (!std::filesystem::is_directory(path, ec)) {
    return DS_ERR(kIo, "{}: exists and is not a directory", path);
  }
  return Status::Ok();
}

Status RemoveTree(const std::string& path) {
  if (path.empty()) return DS_ERR(kIo, "cannot remove a path with an empty name");
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return DS_ERR(kIo, "{}: cannot remove: {}", path, ec.message());
  return Status::Ok();
}

// ---- identity and location ----

std::optional<FileIdentity> IdentifyFile(const std::string& path) {
  struct stat st;
  if (path.empty() || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  FileIdentity id;
  id.dev = uint64_t(st.st_dev);
  id.ino = uint64_t(st.st_ino);
  id.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  auto real = RealPath(path);
  id.path = real.ok() ? *real : path;
  return id;
}

bool IsSameFile(const std::string& path, const FileIdentity& id) {
  std::optional<FileIdentity> now = IdentifyFile(path);
  if (!now) return false;
  if (now->path == id.path) return true;
  return now->dev == id.dev && now->ino == id.ino && now->mtime_ns == id.mtime_ns;
}

Result<std::string> RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) {
    const int err = errno;
    if (err == ENOENT) return DS_ERR(kNotFound, "{}: no such file or directory", path);
    return DS_ERR(kIo, "{}: cannot resolve: {}", path, ErrnoStr(err));
  }
  return std::string(buf);
}

Result<std::string> ResolvedParent(const std::string& path) { return RealPath(DirName(path)); }

bool PathIsWithin(const std::string& inner, const std::string& outer) {
  if (outer == "/") return !inner.empty() && inner[0] == '/';
  return inner == outer || (inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 &&
                            inner[outer.size()] == '/');
}

Result<int> OpenExistingNoFollow(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return DS_ERR(kNotFound, "{}: no such file", path);
    if (err == ELOOP)
      return DS_ERR(kInvalidArgument,
                    "{}: is a symbolic link; refusing to follow it (remove it if you did not "
                    "create it)",
                    path);
    return DS_ERR(kIo, "{}: cannot open: {}", path, ErrnoStr(err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return DS_ERR(kInvalidArgument, "{}: not a regular file; refusing to use it", path);
  }
  return fd;
}

Result<int> CreateExclusive(const std::string& path, int flags, mode_t mode) {
  const int fd = ::open(path.c_str(), flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd >= 0) return fd;
  const int err = errno;
  if (err == EEXIST) return DS_ERR(kAlreadyExists, "{}: already exists", path);
  return DS_ERR(kIo, "{}: cannot create: {}", path, ErrnoStr(err));
}

// ---- DirLock ----

Result<std::unique_ptr<DirLock>> DirLock::Acquire(const std::string& dir, const std::string& name,
                                                  const std::string& activity) {
  if (dir.empty()) return DS_ERR(kInvalidArgument, "no directory given to lock");
  std::unique_ptr<DirLock> lock(new DirLock());
  lock->dir_ = dir;
  lock->path_ = dir + "/" + name;
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) {
    // Remember every directory mkdir -p creates, to remove them again if empty.
    for (std::string d = dir; !d.empty() && d != "/" && d != "." && ::lstat(d.c_str(), &st) != 0;
         d = DirName(d))
      lock->made_.push_back(d);
    DS_RETURN_IF_ERROR(MakeDirs(dir));
    lock->created_ = true;
  } else if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return DS_ERR(kIo, "{}: not a directory", dir);
  }
  for (int attempt = 0; attempt < 20; ++attempt) {
    int fd = ::open(lock->path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
      const int err = errno;
      if (err == ELOOP)
        return DS_ERR(kIo, "{}: is a symbolic link; refusing to follow it", lock->path_);
      if (err == EACCES || err == EROFS || err == EPERM)
        return DS_ERR(kIo, "{}: the directory is not writable: {}", dir, ErrnoStr(err));
      return DS_ERR(kIo, "{}: cannot create lock file: {}", lock->path_, ErrnoStr(err));
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK)
        return DS_ERR(kIo,
                      "{}: another datasynth process is already {} this directory ({} is "
                      "locked); wait for it to finish or use another directory",
                      dir, activity, lock->path_);
      return DS_ERR(kIo, "{}: cannot lock: {}", lock->path_, ErrnoStr(err));
    }
    // The holder before us may have removed the file between our open and flock.
    struct stat a, b;
    if (::fstat(fd, &a) == 0 && ::lstat(lock->path_.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino) {
      lock->fd_ = fd;
      return lock;
    }
    ::close(fd);
  }
  return DS_ERR(kIo, "{}: cannot lock (the lock file keeps changing)", lock->path_);
}

DirLock::~DirLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // before unlocking: a waiter re-checks the name (Acquire)
  ::close(fd_);
  if (remove_tree_) (void)RemoveTree(dir_);
  for (const std::string& d : made_)        // leaf first; rmdir only removes empty ones
    if (::rmdir(d.c_str()) != 0 && errno != ENOENT) break;
}

}  // namespace ds
