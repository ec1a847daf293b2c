#include "dist/generate.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>

#include "dist/comm.h"
#include "generate/resume.h"
#include "generate/scheduler.h"
#include "util/fs.h"

namespace ds::dist {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kPartIds = 4096;  // at most this many attempt ids per part
constexpr uint64_t kMinParts = 16;   // per round (the spread over the ranks)

struct Part {
  uint64_t first = 0, end = 0;
  // counts of the finished part (summed over the ranks)
  int64_t valid = 0, invalid = 0, tokens = 0, workers = 0;
};

std::string PartPath(const std::string& dir, const Part& p) {
  return fmt::format("{}/part-{:012d}-{:012d}.jsonl", dir, p.first, p.end);
}

// The next round's parts: ids [next, next + n) in near-equal parts.
std::vector<Part> RoundParts(uint64_t next, uint64_t n) {
  const uint64_t k = std::min(n, std::max(kMinParts, (n + kPartIds - 1) / kPartIds));
  std::vector<Part> parts(k);
  for (uint64_t i = 0; i < k; ++i) {
    parts[i].first = next + uint64_t((unsigned __int128)n * i / k);
    parts[i].end = next + uint64_t((unsigned __int128)n * (i + 1) / k);
  }
  return parts;
}

// What the parts depend on (a --resume with other settings starts again).
Json PartSettings(const GenerationModel& model, const RunOptions& o) {
  Json s = o.resume_settings.is_object() ? o.resume_settings : Json::object();
  const GenerateOptions& g = o.gen;
  s["seed"] = g.seed;
  s["gen_temp"] = g.temperature;
  s["gen_chars"] = g.gen_chars;
  s["max_tokens"] = g.max_tokens;
  s["predict_batch_size"] = g.predict_batch_size;
  s["start_string"] = g.start_string ? Json(*g.start_string) : Json(nullptr);
  s["header"] = model.header;
  s["delimiter"] = model.delimiter ? std::string(1, model.delimiter) : std::string();
  return Json::parse(s.dump(-1, ' ', false, Json::error_handler_t::replace));
}

// Rank 0: a fresh parts directory, or the one of the interrupted run.
Status PrepareParts(const std::string& dir, const Json& settings, bool resume,
                    const GenerateEvents& events) {
  const std::string path = dir + "/settings.json";
  if (resume && PathExists(path)) {
    DS_ASSIGN_OR_RETURN(std::string text, ReadFile(path, 64 << 20));
    Json saved = Json::parse(text, nullptr, false);
    if (saved.is_discarded()) return DS_ERR(kCorrupt, "{}: not valid JSON", path);
    return CompareResumeSettings(saved, settings, path);
  }
  if (PathExists(dir)) {
    if (!resume && events.warning)
      events.warning(fmt::format("{}: the parts of an interrupted run are discarded (run with "
                                 "--resume to continue it instead)",
                                 dir));
    DS_RETURN_IF_ERROR(RemoveTree(dir));
  }
  DS_RETURN_IF_ERROR(MakeDirs(dir));
  return WriteFileAtomic(path, settings.dump(1) + "\n");
}

// One part on this rank: kept from an interrupted run, or generated.
Status RunPart(const GenerationModel& model, const RunOptions& options, const std::string& dir,
               Part* part) {
  const std::string out = PartPath(dir, *part), done = out + ".json";
  if (options.resume && PathExists(done)) {
    DS_ASSIGN_OR_RETURN(std::string text, ReadFile(done));
    Json j = Json::parse(text, nullptr, false);
    if (j.is_object() && j.value("first", uint64_t(1)) == part->first &&
        j.value("end", uint64_t(0)) == part->end) {
      part->valid = j.value("valid", int64_t(0));
      part->invalid = j.value("invalid", int64_t(0));
      part->tokens = j.value("tokens", int64_t(0));
      return Status::Ok();
    }
  }
  RunOptions o = options;
  o.output = out;
  o.format = OutputFormat::kJsonl;
  o.gen.first_attempt = part->first;
  o.gen.end_attempt = part->end;
  o.gen.num_lines = int64_t(part->end - part->first);
  o.resume = false;
  o.output_policy.overwrite = true;
  o.output_policy.resume = false;
  GenerateSummary s;
  Status st = RunGeneration(model, o, GenerateEvents{}, &s);
  // Past max_invalid inside the part: the whole run stops at or before that
  // point, so the records written so far are all the merge can need.
  if (!st.ok() && st.code() != Code::kResourceExhausted)
    return st.WithContext(fmt::format("{} (ids {} to {})", Where(), part->first, part->end));
  std::remove(ProgressPath(out).c_str());
  part->valid = s.valid;
  part->invalid = s.invalid;
  part->tokens = s.tokens;
  part->workers = s.workers;
  Json j = {{"first", part->first}, {"end", part->end},     {"valid", s.valid},
            {"invalid", s.invalid}, {"tokens", s.tokens}};
  return WriteFileAtomic(done, j.dump() + "\n");
}

// Every rank: rounds of parts until the wanted valid records (or the invalid
// budget) are covered. `parts` gets every part, in id order, with its counts.
Status RunRounds(const GenerationModel& model, const RunOptions& options, const std::string& dir,
                 std::vector<Part>* parts) {
  const GenerateOptions& g = options.gen;
  int64_t valid = 0, invalid = 0;
  uint64_t next = 0;
  while (valid < g.num_lines && invalid <= g.max_invalid) {
    const double share = std::max(0.01, double(valid + 1) / double(valid + invalid + 1));
    double n = std::ceil(double(g.num_lines - valid) / share);
    if (next > 0) n = std::ceil(n * 1.1) + double(kMinParts);
    std::vector<Part> round = RoundParts(next, uint64_t(n));
    std::vector<int64_t> counts(round.size() * 4, 0);
    for (size_t i = size_t(Rank()); i < round.size(); i += size_t(Size())) {
      if (options.cancel && options.cancel->load()) return DS_ERR(kCancelled, "generation interrupted");
      DS_RETURN_IF_ERROR(RunPart(model, options, dir, &round[i]));
      counts[i * 4] = round[i].valid;
      counts[i * 4 + 1] = round[i].invalid;
      counts[i * 4 + 2] = round[i].tokens;
      counts[i * 4 + 3] = round[i].workers;
    }
    DS_RETURN_IF_ERROR(AllreduceSum(counts.data(), counts.size()));
    for (size_t i = 0; i < round.size(); ++i) {
      round[i].valid = counts[i * 4];
      round[i].invalid = counts[i * 4 + 1];
      round[i].tokens = counts[i * 4 + 2];
      round[i].workers = counts[i * 4 + 3];
      valid += round[i].valid;
      invalid += round[i].invalid;
      parts->push_back(round[i]);
      // A part cut short by max_invalid: the run stops inside it.
      if (round[i].valid + round[i].invalid < int64_t(round[i].end - round[i].first))
        invalid = std::max(invalid, g.max_invalid + 1);
    }
    next = round.back().end;
  }
  return Status::Ok();
}

Result<GeneratedRecord> ParseRecord(const std::string& line, const std::string& path) {
  Json j = Json::parse(line, nullptr, false);
  GeneratedRecord r;
  try {
    r.id = j.at("id").get<uint64_t>();
    r.valid = j.at("valid").get<bool>();
    r.text = j.at("text").get<std::string>();
    r.explain = j.at("explain").get<std::string>();
    if (j.contains("fields")) r.fields = j.at("fields").get<std::vector<std::string>>();
  } catch (const Json::exception& e) {
    return DS_ERR(kCorrupt, "{}: {}", path, e.what());
  }
  return r;
}

// Rank 0: the parts' records released in id order, as a single process does.
Status Merge(const GenerationModel& model, const RunOptions& options, const std::string& dir,
             const std::vector<Part>& parts, GenerateSummary* summary) {
  AttemptScheduler::Options so;
  so.target = options.gen.num_lines;
  so.max_invalid = options.gen.max_invalid;
  so.window = int64_t(1) << 40;
  AttemptScheduler sched(so);
  DS_ASSIGN_OR_RETURN(std::unique_ptr<OutputSink> sink, OutputSink::Open(options.output));
  summary->output = sink->is_stdout() ? "" : options.output;
  RecordWriter writer(options.format, model.header, model.delimiter, sink.get());
  DS_RETURN_IF_ERROR(writer.Begin());
  std::vector<GenTask> tasks;
  GeneratedRecord out;
  for (const Part& p : parts) {
    summary->tokens += p.tokens;
    const std::string path = PartPath(dir, p);
    std::ifstream in(path, std::ios::binary);
    if (!in) return DS_ERR(kIo, "{}: cannot read", path);
    std::string line;
    uint64_t id = p.first;
    while (!sched.finished() && sched.status().ok() && std::getline(in, line)) {
      DS_ASSIGN_OR_RETURN(GeneratedRecord r, ParseRecord(line, path));
      if (r.id != id++) return DS_ERR(kCorrupt, "{}: record id {} out of order", path, r.id);
      tasks.clear();
      sched.Issue(1, &tasks);
      sched.Complete(std::move(r));
      while (sched.Pop(&out)) DS_RETURN_IF_ERROR(writer.Write(out));
    }
    if (sched.finished() || !sched.status().ok()) break;
  }
  summary->valid = sched.released_valid();
  summary->invalid = sched.released_invalid();
  summary->complete = sched.finished();
  DS_RETURN_IF_ERROR(sink->Finish());
  if (!sched.status().ok()) return sched.status();
  if (!sched.finished())
    return DS_ERR(kInternal, "{}: the parts hold {} of the {} valid records wanted", dir,
                  sched.released_valid(), options.gen.num_lines);
  return Status::Ok();
}

// Every rank gets rank 0's status (so that all stop on rank 0's error).
Status Shared(Status st) {
  int64_t code = int64_t(st.code());
  std::string message = st.message();
  DS_RETURN_IF_ERROR(BroadcastValue(&code));
  DS_RETURN_IF_ERROR(BroadcastString(&message));
  if (Rank() == 0 || code == int64_t(Code::kOk)) return st;
  return Status(Code(code), "rank 0: " + message, __FILE__, __LINE__);
}

}  // namespace

Status RunShardedGeneration(const GenerationModel& model, const RunOptions& options,
                            const GenerateEvents& events, GenerateSummary* summary) {
  *summary = GenerateSummary{};
  if (!options.gen.prefixes.empty()) {  // one valid record per line, in line order
    if (Rank() != 0) return Status::Ok();
    if (events.warning) events.warning("mpirun: --start-strings runs on rank 0 alone");
    return RunGeneration(model, options, events, summary);
  }
  const auto t0 = Clock::now();
  const bool to_file = OutputSink::IsResumable(options.output);
  if (options.resume && !to_file)
    return DS_ERR(kInvalidArgument, "resuming needs an output file");
  int64_t pid = ::getpid();
  DS_RETURN_IF_ERROR(BroadcastValue(&pid));
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = to_file ? options.output + ".parts"
                                  : fmt::format("{}/datasynth-parts-{}", tmp && *tmp ? tmp : "/tmp", pid);
  Status st;
  if (Rank() == 0) st = PrepareParts(dir, PartSettings(model, options), options.resume, events);
  DS_RETURN_IF_ERROR(Shared(st));
  std::vector<Part> parts;
  st = RunRounds(model, options, dir, &parts);
  DS_ASSIGN_OR_RETURN(bool failed, Any(!st.ok()));
  if (!st.ok()) return st;
  if (failed) return DS_ERR(kInternal, "mpirun: another rank failed (its error is above)");
  for (const Part& p : parts) summary->workers = std::max<int64_t>(summary->workers, p.workers);
  if (Rank() == 0) {
    st = Merge(model, options, dir, parts, summary);
    if (st.ok()) (void)RemoveTree(dir);
    summary->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    summary->resumable = false;
  }
  // The others end as rank 0 reports (it alone prints the outcome).
  DS_RETURN_IF_ERROR(Barrier());
  return Rank() == 0 ? st : Status::Ok();
}

}  // namespace ds::dist
