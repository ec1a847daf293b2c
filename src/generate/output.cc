#include "generate/output.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "generate/resume.h"
#include "io/csv.h"
#include "model/model_dir.h"
#include "model/tensor_file.h"

namespace ds {

Result<OutputFormat> ParseOutputFormat(const std::string& name) {
  if (name == "csv") return OutputFormat::kCsv;
  if (name == "text") return OutputFormat::kText;
  if (name == "jsonl") return OutputFormat::kJsonl;
  return DS_ERR(kInvalidArgument, "unknown output format '{}' (csv, text or jsonl)", name);
}

const char* OutputFormatName(OutputFormat f) {
  switch (f) {
    case OutputFormat::kCsv:
      return "csv";
    case OutputFormat::kText:
      return "text";
    case OutputFormat::kJsonl:
      return "jsonl";
  }
  return "csv";
}

// ---- OutputSink ----

namespace {
constexpr size_t kFlushBytes = 1 << 20;

}  // namespace

namespace {
Status CheckNotDirectory(const std::string& path) {
  struct stat st;
  if (path.back() == '/' || (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)))
    return DS_ERR(kInvalidArgument, "{}: the output is a directory; give a file name", path);
  return Status::Ok();
}
}  // namespace

// Opens an existing output file of ours (a partial file, or the final name of a
// run that stopped with an error) and takes its lock.
Status OutputSink::LockExisting(const std::string& data) {
  Result<int> fd = OpenExistingNoFollow(data, O_RDWR);
  if (!fd.ok()) {
    done_ = true;  // not ours: never remove it
    return Status(fd.status().code(),
                  fmt::format("{}: cannot open output: {}", path_, fd.status().message()),
                  __FILE__, __LINE__);
  }
  fd_ = *fd;
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    ::close(fd_);
    fd_ = -1;
    done_ = true;  // not ours: never remove it
    if (e == EWOULDBLOCK)
      return DS_ERR(kIo, "{}: another process is writing this output ({} is locked)", path_, data);
    return DS_ERR(kIo, "{}: cannot lock {}: {}", path_, data, strerror(e));
  }
  return Status::Ok();
}

Status OutputSink::CreatePartial() {
  for (int attempt = 0; attempt < 5; ++attempt) {
    Result<int> fd = CreateExclusive(temp_, O_RDWR);
    if (fd.ok()) {
      fd_ = *fd;
      if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return Status::Ok();
      ::close(fd_);  // another run opened our new file already: it is theirs
      fd_ = -1;
      done_ = true;
      return DS_ERR(kIo, "{}: another process is writing this output ({} is locked)", path_, temp_);
    }
    if (fd.status().code() != Code::kAlreadyExists)
      return DS_ERR(kIo, "{}: cannot create output {}", path_, fd.status().message());
    // A stale partial file (an interrupted run): take its lock, so that a live
    // run's file is never touched, then unlink the name (not the data: a hard
    // link elsewhere keeps its content) and create a new file.
    DS_RETURN_IF_ERROR(LockExisting(temp_));
    if (::unlink(temp_.c_str()) != 0) {
      Status st = DS_ERR(kIo, "{}: cannot remove the old {}: {}", path_, temp_, strerror(errno));
      ::close(fd_);
      fd_ = -1;
      done_ = true;
      return st;
    }
    ::close(fd_);
    fd_ = -1;
  }
  done_ = true;
  return DS_ERR(kIo, "{}: cannot create output {} (it keeps reappearing)", path_, temp_);
}

Status CheckOutputTarget(const std::string& path, const OutputPolicy& policy) {
  if (path.empty() || path == "-" || !OutputSink::IsResumable(path)) return Status::Ok();
  if (policy.training_input && IsSameFile(path, *policy.training_input))
    return DS_ERR(kInvalidArgument,
                  "{}: is the training input of this model ({}); generate never writes it, "
                  "with --overwrite or not: choose another output file",
                  path, policy.training_input->path);
  Result<std::string> parent = ResolvedParent(path);
  if (parent.ok()) {  // else opening the output reports the missing directory
    auto inside = [&](const std::string& dir) {
      return DS_ERR(kInvalidArgument,
                    "{}: is inside the model directory {}; generate never writes into a model "
                    "directory, with --overwrite or not: choose an output outside it",
                    path, dir);
    };
    if (!policy.model_dir.empty()) {
      Result<std::string> model = RealPath(policy.model_dir);
      if (model.ok() && PathIsWithin(*parent, *model)) return inside(policy.model_dir);
    }
    for (std::string dir = *parent;;) {
      if (IsModelDirectory(dir)) return inside(dir);
      const size_t slash = dir.find_last_of('/');
      if (dir == "/" || slash == std::string::npos) break;
      dir = slash == 0 ? "/" : dir.substr(0, slash);
    }
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode) && !policy.overwrite &&
      !policy.resume) {  // a directory: the sink's "give a file name"
    const bool interrupted = PathExists(ProgressPath(path));
    return DS_ERR(kAlreadyExists, "{}: already exists; pass --overwrite to replace it{}", path,
                  interrupted ? " (or --resume to continue the interrupted run it holds)" : "");
  }
  return Status::Ok();
}

bool OutputSink::IsResumable(const std::string& path) {
  if (path.empty() || path == "-") return false;
  struct stat st;
  return ::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode);
}

Result<std::unique_ptr<OutputSink>> OutputSink::Open(const std::string& path) {
  std::unique_ptr<OutputSink> s(new OutputSink());
  s->direct_ = true;
  if (path.empty() || path == "-") {
    s->fd_ = 1;
    return s;
  }
  DS_RETURN_IF_ERROR(CheckNotDirectory(path));
  if (!IsResumable(path)) {
    // A device, FIFO or socket (/dev/null, a named pipe): written directly;
    // a partial file renamed onto it would replace it.
    s->path_ = path;
    s->fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (s->fd_ < 0) return DS_ERR(kIo, "{}: cannot open output: {}", path, strerror(errno));
    return s;
  }
  s->direct_ = false;
  s->path_ = path;
  s->temp_ = PartialPath(path);
  DS_RETURN_IF_ERROR(s->CreatePartial());
  return s;
}

Result<std::unique_ptr<OutputSink>> OutputSink::OpenForResume(const std::string& path,
                                                              uint64_t bytes, uint32_t crc) {
  if (path.empty() || path == "-")
    return DS_ERR(kInvalidArgument, "resuming needs an output file, not standard output");
  DS_RETURN_IF_ERROR(CheckNotDirectory(path));
  if (!IsResumable(path))
    return DS_ERR(kInvalidArgument, "{}: not a regular file: it cannot be resumed", path);
  std::unique_ptr<OutputSink> s(new OutputSink());
  s->path_ = path;
  s->temp_ = PartialPath(path);
  s->resumed_ = true;
  struct stat st;
  // The partial file; or the final name, after a run that stopped with an
  // error (its truncated output was renamed into place). lstat: a symlink at
  // either name is refused (LockExisting), not followed.
  const bool in_place = ::lstat(s->temp_.c_str(), &st) != 0 && ::lstat(path.c_str(), &st) == 0;
  const std::string data = in_place ? path : s->temp_;
  if (!in_place && ::lstat(data.c_str(), &st) != 0)
    return DS_ERR(kNotFound, "{}: nothing to resume: neither {} nor {} exists", path, s->temp_,
                  path);
  DS_RETURN_IF_ERROR(s->LockExisting(data));
  if (::fstat(s->fd_, &st) != 0) return DS_ERR(kIo, "{}: cannot stat: {}", data, strerror(errno));
  if (uint64_t(st.st_size) < bytes)
    return DS_ERR(kCorrupt,
                  "{}: {} bytes, fewer than the {} its progress file records (the file was "
                  "changed, or a system crash lost data); start again without --resume",
                  data, st.st_size, bytes);
  // Verify the kept bytes: they must be exactly what the checkpoint saw.
  std::string chunk(1 << 20, '\0');
  uint32_t got = 0;
  for (uint64_t off = 0; off < bytes;) {
    size_t n = size_t(std::min<uint64_t>(chunk.size(), bytes - off));
    ssize_t r = ::pread(s->fd_, chunk.data(), n, off_t(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return DS_ERR(kIo, "{}: read failed: {}", data, strerror(r < 0 ? errno : EIO));
    got = Crc32(chunk.data(), size_t(r), got);
    off += uint64_t(r);
  }
  if (got != crc)
    return DS_ERR(kCorrupt,
                  "{}: its first {} bytes do not match the checksum of its progress file (the "
                  "file was changed); start again without --resume",
                  data, bytes);
  if (::ftruncate(s->fd_, off_t(bytes)) != 0 || ::lseek(s->fd_, off_t(bytes), SEEK_SET) < 0)
    return DS_ERR(kIo, "{}: cannot truncate to {} bytes: {}", data, bytes, strerror(errno));
  if (in_place && ::rename(path.c_str(), s->temp_.c_str()) != 0)
    return DS_ERR(kIo, "{}: cannot rename to {}: {}", path, s->temp_, strerror(errno));
  s->committed_ = bytes;
  s->crc_ = crc;
  return s;
}

OutputSink::~OutputSink() {
  if (!done_) Abort();
}

Status OutputSink::Flush() {
  if (!error_.ok()) return error_;
  size_t off = 0;
  while (off < buf_.size()) {
    ssize_t w = ::write(fd_, buf_.data() + off, buf_.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = errno;
      // Back to the last record boundary so the file stays well-formed.
      if (!direct_ && ::ftruncate(fd_, off_t(committed_)) == 0)
        (void)::lseek(fd_, off_t(committed_), SEEK_SET);
      error_ = DS_ERR(kIo, "{}: write failed: {}", path_.empty() ? "stdout" : path_,
                      strerror(w < 0 ? e : ENOSPC));
      buf_.clear();
      return error_;
    }
    off += size_t(w);
  }
  if (!direct_) crc_ = Crc32(buf_.data(), buf_.size(), crc_);
  committed_ += buf_.size();
  buf_.clear();
  return Status::Ok();
}

Status OutputSink::Sync() {
  DS_RETURN_IF_ERROR(Flush());
  if (!direct_ && ::fdatasync(fd_) != 0)
    error_ = DS_ERR(kIo, "{}: fdatasync failed: {}", path_, strerror(errno));
  return error_;
}

Status OutputSink::Write(std::string_view data) {
  if (!error_.ok()) return error_;
  buf_.append(data);
  if (buf_.size() >= kFlushBytes) return Flush();
  return Status::Ok();
}

Status OutputSink::Finish() {
  if (done_) return error_;
  Status st = Flush();
  done_ = true;
  if (direct_) {
    if (fd_ > 2 && ::close(fd_) != 0 && st.ok())
      st = DS_ERR(kIo, "{}: close failed: {}", path_, strerror(errno));
    fd_ = -1;
    return st;
  }
  if (::fsync(fd_) != 0 && st.ok())
    st = DS_ERR(kIo, "{}: fsync failed: {}", path_, strerror(errno));
  if (::close(fd_) != 0 && st.ok())
    st = DS_ERR(kIo, "{}: close failed: {}", path_, strerror(errno));
  fd_ = -1;
  // Even after a write error the file holds complete records only: keep it.
  // A failed rename leaves the partial file (and its progress file) for a
  // resumed run.
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    Status rs = DS_ERR(kIo, "{}: cannot rename {} into place: {}", path_, temp_, strerror(errno));
    return st.ok() ? rs : st;
  }
  return st;
}

void OutputSink::CloseInChild() {
  if (fd_ > 2) ::close(fd_);
  fd_ = -1;
  done_ = true;
}

void OutputSink::Abort() {
  if (done_) return;
  done_ = true;
  buf_.clear();
  if (fd_ > 2) {
    ::close(fd_);
    if (!resumed_ && !direct_) ::unlink(temp_.c_str());
  }
  fd_ = -1;
}

// ---- RecordWriter ----

Status RecordWriter::Begin() {
  if (format_ == OutputFormat::kCsv && delimiter_ && !header_.empty()) {
    line_.clear();
    AppendCsvRecord(&line_, header_, delimiter_);
    return sink_->Write(line_);
  }
  return Status::Ok();
}

Status RecordWriter::Write(const GeneratedRecord& r) {
  line_.clear();
  switch (format_) {
    case OutputFormat::kCsv:
      if (!r.valid) return Status::Ok();
      if (delimiter_)
        AppendCsvRecord(&line_, r.fields, delimiter_);
      else
        AppendCsvRecord(&line_, std::vector<std::string>{r.text}, ',');
      break;
    case OutputFormat::kText:
      if (!r.valid) return Status::Ok();
      line_ = r.text;
      line_.push_back('\n');
      break;
    case OutputFormat::kJsonl: {
      nlohmann::json j;
      j["id"] = r.id;  // the attempt index (Philox stream): unique, in output order
      j["valid"] = r.valid;
      j["text"] = r.text;
      j["explain"] = r.explain;
      if (delimiter_) j["fields"] = r.fields;
      line_ = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      line_.push_back('\n');
      break;
    }
  }
  ++written_;
  return sink_->Write(line_);
}

}  // namespace ds
