#include "generate/output.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "io/csv.h"

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

std::string DirOf(const std::string& path) {
  size_t p = path.rfind('/');
  if (p == std::string::npos) return ".";
  if (p == 0) return "/";
  return path.substr(0, p);
}
std::string BaseOf(const std::string& path) {
  size_t p = path.rfind('/');
  return p == std::string::npos ? path : path.substr(p + 1);
}
}  // namespace

Result<std::unique_ptr<OutputSink>> OutputSink::Open(const std::string& path) {
  std::unique_ptr<OutputSink> s(new OutputSink());
  if (path.empty() || path == "-") {
    s->fd_ = 1;
    return s;
  }
  s->path_ = path;
  s->temp_ = DirOf(path) + "/." + BaseOf(path) + ".tmp." + std::to_string(getpid());
  s->fd_ = ::open(s->temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (s->fd_ < 0) return DS_ERR(kIo, "{}: cannot create output: {}", path, strerror(errno));
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
      if (fd_ != 1 && ::ftruncate(fd_, off_t(committed_)) == 0)
        (void)::lseek(fd_, off_t(committed_), SEEK_SET);
      error_ = DS_ERR(kIo, "{}: write failed: {}", path_.empty() ? "stdout" : path_,
                      strerror(w < 0 ? e : ENOSPC));
      buf_.clear();
      return error_;
    }
    off += size_t(w);
  }
  committed_ += buf_.size();
  buf_.clear();
  return Status::Ok();
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
  if (fd_ == 1) return st;
  if (::fsync(fd_) != 0 && st.ok())
    st = DS_ERR(kIo, "{}: fsync failed: {}", path_, strerror(errno));
  if (::close(fd_) != 0 && st.ok())
    st = DS_ERR(kIo, "{}: close failed: {}", path_, strerror(errno));
  fd_ = -1;
  // Even after a write error the file holds complete records only: keep it.
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    Status rs = DS_ERR(kIo, "{}: cannot rename {} into place: {}", path_, temp_, strerror(errno));
    ::unlink(temp_.c_str());
    return st.ok() ? rs : st;
  }
  return st;
}

void OutputSink::Abort() {
  if (done_) return;
  done_ = true;
  buf_.clear();
  if (fd_ > 1) {
    ::close(fd_);
    ::unlink(temp_.c_str());
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
