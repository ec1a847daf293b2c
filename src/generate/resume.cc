#include "generate/resume.h"

#include <errno.h>
#include <fmt/format.h>
#include <string.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/json_fields.h"

namespace ds {

namespace {
constexpr const char* kFormatName = "datasynth-generate-progress";
constexpr int kVersion = 1;
constexpr size_t kMaxProgressBytes = 16 << 20;  // settings hold at most a CRC of the prefixes
}  // namespace

std::string PartialPath(const std::string& output) { return output + ".partial"; }
std::string ProgressPath(const std::string& output) { return output + ".progress.json"; }

namespace {

using Position = AttemptScheduler::Position;

const JsonFields<Position>& PositionFields() {
  static const JsonFields<Position> fields = {
      JsonMember("attempt", &Position::attempt),
      JsonMember("prefix_try", &Position::prefix_try),
      JsonMember("valid", &Position::valid),
      JsonMember("invalid", &Position::invalid),
  };
  return fields;
}

// The progress file, one row per key (util/json_fields.h); "format" is
// checked before the table is read.
const JsonFields<GenerationCheckpoint>& CheckpointFields() {
  using C = GenerationCheckpoint;
  static const JsonFields<C> fields = {
      {"version", JsonNeed::kRequired, [](const C&) { return nlohmann::json(kVersion); },
       [](const nlohmann::json& j, C*, const std::string& source) -> Status {
         int version = j.get<int>();
         if (version != kVersion)
           return DS_ERR(kCorrupt, "{}: progress file version {} (this build reads {})", source,
                         version, kVersion);
         return Status::Ok();
       }},
      JsonMember("bytes", &C::bytes),
      JsonMember("crc32", &C::crc32),
      JsonMember("records", &C::records),
      JsonMember("tokens", &C::tokens),
      {"position", JsonNeed::kRequired,
       [](const C& c) { return ToJsonFields(c.position, PositionFields()); },
       [](const nlohmann::json& j, C* c, const std::string& source) {
         return ReadJsonFields(j, PositionFields(), &c->position, source);
       }},
      {"settings", JsonNeed::kRequired, [](const C& c) { return c.settings; },
       [](const nlohmann::json& j, C* c, const std::string& source) -> Status {
         if (!j.is_object()) return DS_ERR(kCorrupt, "{}: 'settings' is not an object", source);
         c->settings = j;
         return Status::Ok();
       }},
  };
  return fields;
}

}  // namespace

nlohmann::json GenerationCheckpoint::ToJson() const {
  nlohmann::json j = ToJsonFields(*this, CheckpointFields());
  j["format"] = kFormatName;
  return j;
}

Result<GenerationCheckpoint> GenerationCheckpoint::FromJson(const nlohmann::json& j,
                                                            const std::string& source) {
  GenerationCheckpoint c;
  try {
    if (!j.is_object() || j.value("format", std::string()) != kFormatName)
      return DS_ERR(kCorrupt, "{}: not a datasynth generation progress file", source);
    DS_RETURN_IF_ERROR(ReadJsonFields(j, CheckpointFields(), &c, source));
  } catch (const nlohmann::json::exception& e) {
    return DS_ERR(kCorrupt, "{}: invalid progress file: {}", source, e.what());
  }
  if (c.records < 0 || c.tokens < 0 || c.position.valid < 0 || c.position.invalid < 0)
    return DS_ERR(kCorrupt, "{}: negative counts", source);
  if (c.records > c.position.valid + c.position.invalid)
    return DS_ERR(kCorrupt, "{}: {} records written but only {} released", source, c.records,
                  c.position.valid + c.position.invalid);
  return c;
}

Status WriteCheckpoint(const std::string& path, const GenerationCheckpoint& checkpoint) {
  return WriteFileAtomic(path, checkpoint.ToJson().dump(1) + "\n");
}

Result<std::optional<GenerationCheckpoint>> ReadCheckpoint(const std::string& path) {
  auto text = ReadFile(path, kMaxProgressBytes);
  if (!text.ok()) {
    if (text.status().code() == Code::kNotFound) return std::optional<GenerationCheckpoint>();
    return text.status();
  }
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return DS_ERR(kCorrupt, "{}: not valid JSON", path);
  DS_ASSIGN_OR_RETURN(GenerationCheckpoint c, GenerationCheckpoint::FromJson(j, path));
  return std::optional<GenerationCheckpoint>(std::move(c));
}

Status CompareResumeSettings(const nlohmann::json& saved, const nlohmann::json& now,
                             const std::string& source) {
  std::string diffs;
  auto show = [](const nlohmann::json* v) {
    if (!v) return std::string("(not set)");
    std::string s = v->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (s.size() > 80) s = s.substr(0, 77) + "...";
    return s;
  };
  auto add = [&](const std::string& key, const nlohmann::json* a, const nlohmann::json* b) {
    diffs += fmt::format("{}{} = {} in the interrupted run, {} now", diffs.empty() ? "" : "; ", key,
                         show(a), show(b));
  };
  for (auto it = saved.begin(); it != saved.end(); ++it) {
    auto o = now.find(it.key());
    if (o == now.end())
      add(it.key(), &it.value(), nullptr);
    else if (*o != it.value())
      add(it.key(), &it.value(), &*o);
  }
  for (auto it = now.begin(); it != now.end(); ++it)
    if (!saved.contains(it.key())) add(it.key(), nullptr, &it.value());
  if (diffs.empty()) return Status::Ok();
  return DS_ERR(kInvalidArgument,
                "{}: cannot resume with different settings: {} (give the same settings as the "
                "interrupted run, or start again without --resume)",
                source, diffs);
}

// Checks the target and the progress file before anything is opened.
Status ResumableOutput::Prepare(const ResumableOutputOptions& o) {
  if (o.resume && !to_file_)
    return DS_ERR(kInvalidArgument, "resuming needs an output file, not {}",
                  o.path.empty() || o.path == "-" ? std::string("standard output")
                                                  : o.path + " (not a regular file)");
  if (!to_file_) return Status::Ok();
  if (o.resume) {
    DS_ASSIGN_OR_RETURN(resumed_, ReadCheckpoint(progress_path_));
    if (!resumed_) {
      if (o.warning)
        o.warning(fmt::format("nothing to resume ({} does not exist): starting a new run",
                              progress_path_));
    } else {
      DS_RETURN_IF_ERROR(CompareResumeSettings(resumed_->settings, o.settings, progress_path_));
      if (o.schedule) {
        Status cs = AttemptScheduler::CheckStart(*o.schedule, resumed_->position);
        if (!cs.ok()) return DS_ERR(kCorrupt, "{}: {}", progress_path_, cs.message());
      }
    }
  }
  OutputPolicy policy = o.policy;
  policy.resume = resumed_.has_value();
  DS_RETURN_IF_ERROR(CheckOutputTarget(o.path, policy));
  const std::string partial = PartialPath(o.path);
  if (!o.resume && o.warning && (PathExists(progress_path_) || PathExists(partial))) {
    auto old = ReadCheckpoint(progress_path_);
    std::string what = old.ok() && *old ? fmt::format(" ({} valid records)", (*old)->position.valid)
                                        : std::string();
    o.warning(fmt::format(
        "{} holds an interrupted run's output{}; starting again from the first record (run "
        "with resume, --resume on the command line, to continue it instead)",
        PathExists(partial) ? partial : o.path, what));
  }
  return Status::Ok();
}

Result<std::unique_ptr<ResumableOutput>> ResumableOutput::Open(const ResumableOutputOptions& o) {
  std::unique_ptr<ResumableOutput> out(new ResumableOutput());
  out->to_file_ = OutputSink::IsResumable(o.path);
  out->progress_path_ = out->to_file_ ? ProgressPath(o.path) : std::string();
  DS_RETURN_IF_ERROR(out->Prepare(o));
  if (out->resumed_) {
    DS_ASSIGN_OR_RETURN(
        out->sink_, OutputSink::OpenForResume(o.path, out->resumed_->bytes, out->resumed_->crc32));
  } else {
    DS_ASSIGN_OR_RETURN(out->sink_, OutputSink::Open(o.path));
    // Under the partial file's lock: the old progress file (if any) is stale.
    const std::string& pp = out->progress_path_;
    if (out->to_file_ && PathExists(pp) && ::unlink(pp.c_str()) != 0)
      return DS_ERR(kIo, "{}: cannot remove: {}", pp, strerror(errno));
  }
  out->path_ = out->sink_->is_stdout() ? "" : o.path;
  out->writer_ = std::make_unique<RecordWriter>(o.format, o.header, o.delimiter, out->sink_.get());
  // What the output file holds: updated whenever the sink wrote its buffer
  // (which always ends at the last record handed to it), so that after a
  // write error (the sink truncates back to its last flush) the progress file
  // and the summary describe exactly the records in the file.
  out->flushed_.settings = out->to_file_ ? o.settings : nlohmann::json();
  if (out->resumed_) {
    out->flushed_ = *out->resumed_;
    out->writer_->Continue(out->resumed_->records);
  }
  return out;
}

// `force`: the buffer was just written out (Sync), so the position covers
// every released record even if the last ones wrote nothing (invalid records
// in csv/text).
void ResumableOutput::NoteFlush(bool force, const Position& pos, int64_t tokens) {
  if (!sink_->error().ok() || (!force && sink_->committed() == flushed_.bytes)) return;
  flushed_.position = pos;
  flushed_.bytes = sink_->committed();
  flushed_.crc32 = sink_->crc32();
  flushed_.records = writer_->written();
  flushed_.tokens = tokens;
}

Status ResumableOutput::Checkpoint(const Position& pos, int64_t tokens) {
  if (!to_file_) return Status::Ok();
  DS_RETURN_IF_ERROR(sink_->Sync());
  NoteFlush(/*force=*/true, pos, tokens);
  flushed_.tokens = tokens;
  return WriteCheckpoint(progress_path_, flushed_);
}

Status ResumableOutput::Begin(const Position& pos, int64_t tokens) {
  if (resumed_) return Status::Ok();
  DS_RETURN_IF_ERROR(writer_->Begin());
  return Checkpoint(pos, tokens);
}

Status ResumableOutput::Write(const GeneratedRecord& record, const Position& pos, int64_t tokens) {
  DS_RETURN_IF_ERROR(writer_->Write(record));
  NoteFlush(/*force=*/false, pos, tokens);
  return Status::Ok();
}

Status ResumableOutput::Finish(Status st, bool complete, const Position& pos, int64_t tokens) {
  if (to_file_ && !complete) {
    // Stopped early: record how far the output is good, for a resumed run.
    // After a write error the file was truncated back to its last flush,
    // which `flushed_` describes (on a full disk this may fail too; the
    // previous checkpoint then stays, and it is still right).
    Status cs =
        sink_->error().ok() ? Checkpoint(pos, tokens) : WriteCheckpoint(progress_path_, flushed_);
    if (st.ok()) st = cs;
  }
  Status fin = sink_->Finish();
  if (st.ok()) st = fin;
  if (to_file_) {
    if (st.ok() && complete) {
      if (::unlink(progress_path_.c_str()) != 0 && errno != ENOENT)
        st = DS_ERR(kIo, "{}: cannot remove: {}", progress_path_, strerror(errno));
    } else {
      resumable_ = PathExists(progress_path_);
    }
  }
  return st;
}

}  // namespace ds
