// Crash safety and resume of generation (generate/resume.h): the scheduler's
// resume position, the progress file, the partial output's verification and
// truncation, and whole runs killed (SIGKILL, in a forked child) and resumed
// with the fake model: the resumed output is byte-identical to an
// uninterrupted run's.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "generate/resume.h"
#include "generate/workers.h"
#include "generate_fakes.h"
#include "io/csv.h"
#include "util/fs.h"

namespace ds {
namespace {

using testing::FakeGenerationModel;
using testing::FakeTokenizer;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

class GenerateResume : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fmt::format("{}/genresume_{}_{}", ::testing::TempDir(), getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(MakeDirs(dir_).ok());
  }
  void TearDown() override { (void)RemoveTree(dir_); }
  std::string dir_;
};

// ---------------- scheduler position ----------------

GeneratedRecord Rec(uint64_t id, bool valid, int32_t prefix = -1) {
  GeneratedRecord r;
  r.id = id;
  r.prefix = prefix;
  r.valid = valid;
  return r;
}

// Validity of attempt `id` (count mode) / try `id` of a prefix: a fixed
// pseudo-random pattern, about one in three invalid.
bool ValidOf(uint64_t id) { return (id * 2654435761u >> 7) % 3 != 0; }

// Runs a scheduler to the end, completing attempts in a scrambled order;
// returns the popped (id, valid) sequence and the position after each pop.
std::vector<std::pair<uint64_t, bool>> Drain(
    AttemptScheduler& s, std::vector<AttemptScheduler::Position>* positions = nullptr) {
  std::vector<std::pair<uint64_t, bool>> out;
  std::vector<GenTask> t;
  GeneratedRecord r;
  for (int guard = 0; guard < 100000 && !s.finished() && s.status().ok(); ++guard) {
    t.clear();
    s.Issue(7, &t);
    std::reverse(t.begin(), t.end());  // complete out of order
    for (const auto& task : t)
      s.Complete(Rec(task.id, ValidOf(task.id * 31 + uint64_t(task.prefix + 1)), task.prefix));
    while (s.Pop(&r)) {
      out.emplace_back(r.id, r.valid);
      if (positions) positions->push_back(s.position());
    }
  }
  return out;
}

TEST_F(GenerateResume, SchedulerResumesEveryPositionCountMode) {
  AttemptScheduler::Options o;
  o.target = 40;
  o.max_invalid = 1000;
  o.window = 9;
  AttemptScheduler full(o);
  std::vector<AttemptScheduler::Position> pos;
  auto ref = Drain(full, &pos);
  ASSERT_TRUE(full.finished());
  ASSERT_GT(full.released_invalid(), 0);
  for (size_t k = 0; k < ref.size(); ++k) {
    ASSERT_TRUE(AttemptScheduler::CheckStart(o, pos[k]).ok()) << k;
    AttemptScheduler resumed(o, pos[k]);
    EXPECT_EQ(resumed.position(), pos[k]);
    auto rest = Drain(resumed);
    ASSERT_EQ(rest.size(), ref.size() - k - 1) << k;
    for (size_t i = 0; i < rest.size(); ++i) ASSERT_EQ(rest[i], ref[k + 1 + i]) << k << " " << i;
    EXPECT_EQ(resumed.released_valid(), full.released_valid());
    EXPECT_EQ(resumed.released_invalid(), full.released_invalid());
    EXPECT_TRUE(resumed.finished());
  }
}

TEST_F(GenerateResume, SchedulerResumesEveryPositionPrefixMode) {
  AttemptScheduler::Options o;
  o.num_prefixes = 12;
  o.max_invalid = 1000;
  o.window = 3;
  AttemptScheduler full(o);
  std::vector<AttemptScheduler::Position> pos;
  auto ref = Drain(full, &pos);
  ASSERT_TRUE(full.finished());
  ASSERT_GT(full.released_invalid(), 0);
  bool mid_prefix = false;  // some position lies between tries of one prefix
  for (size_t k = 0; k < ref.size(); ++k) {
    mid_prefix |= pos[k].prefix_try > 0;
    ASSERT_TRUE(AttemptScheduler::CheckStart(o, pos[k]).ok()) << k;
    AttemptScheduler resumed(o, pos[k]);
    auto rest = Drain(resumed);
    ASSERT_EQ(rest.size(), ref.size() - k - 1) << k;
    for (size_t i = 0; i < rest.size(); ++i) ASSERT_EQ(rest[i], ref[k + 1 + i]) << k << " " << i;
  }
  EXPECT_TRUE(mid_prefix);
}

TEST_F(GenerateResume, SchedulerChecksStartAndInvalidBudget) {
  AttemptScheduler::Options o;
  o.target = 10;
  o.max_invalid = 5;
  using P = AttemptScheduler::Position;
  // 5 valid + 3 invalid released: the next attempt is 8, not 7.
  EXPECT_EQ(AttemptScheduler::CheckStart(o, P{7, 0, 5, 3}).code(), Code::kInvalidInput);
  EXPECT_TRUE(AttemptScheduler::CheckStart(o, P{8, 0, 5, 3}).ok());
  EXPECT_FALSE(AttemptScheduler::CheckStart(o, P{14, 0, 11, 3}).ok());  // more valid than wanted
  EXPECT_FALSE(AttemptScheduler::CheckStart(o, P{8, 1, 5, 3}).ok());    // a try in count mode
  // Past max_invalid: fails at once (a higher budget resumes).
  AttemptScheduler over(o, P{9, 0, 3, 6});
  EXPECT_EQ(over.status().code(), Code::kResourceExhausted);
  o.max_invalid = 6;
  AttemptScheduler ok(o, P{9, 0, 3, 6});
  EXPECT_TRUE(ok.status().ok());
  EXPECT_TRUE(AttemptScheduler(o, P{10, 0, 10, 0}).finished());  // already complete
  AttemptScheduler::Options p;
  p.num_prefixes = 4;
  EXPECT_TRUE(AttemptScheduler::CheckStart(p, P{2, 1, 2, 1}).ok());
  EXPECT_FALSE(AttemptScheduler::CheckStart(p, P{2, 0, 3, 0}).ok());  // prefix 2 with 3 valid
  EXPECT_FALSE(AttemptScheduler::CheckStart(p, P{2, 2, 2, 1}).ok());  // try 2, one invalid
  EXPECT_FALSE(AttemptScheduler::CheckStart(p, P{5, 0, 5, 0}).ok());  // past the last prefix
}

// ---------------- progress file ----------------

TEST_F(GenerateResume, ProgressFileRoundTripAndErrors) {
  GenerationCheckpoint c;
  c.settings = {{"seed", 7}, {"gen_temp", 0.7}, {"header", {"a", "b"}}};
  c.position = {120, 0, 100, 20};
  c.bytes = 4567;
  c.crc32 = 0xdeadbeef;
  c.records = 100;
  c.tokens = 999;
  std::string path = ProgressPath(dir_ + "/out.csv");
  EXPECT_EQ(path, dir_ + "/out.csv.progress.json");
  EXPECT_EQ(PartialPath(dir_ + "/out.csv"), dir_ + "/out.csv.partial");
  auto none = ReadCheckpoint(path);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(WriteCheckpoint(path, c).ok());
  auto back = ReadCheckpoint(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->has_value());
  const GenerationCheckpoint& b = **back;
  EXPECT_EQ(b.position, c.position);
  EXPECT_EQ(b.bytes, c.bytes);
  EXPECT_EQ(b.crc32, c.crc32);
  EXPECT_EQ(b.records, c.records);
  EXPECT_EQ(b.tokens, c.tokens);
  EXPECT_TRUE(CompareResumeSettings(b.settings, c.settings, path).ok());

  WriteAll(path, "{\"format\": \"datasynth-generate-progress\", \"version\": 1}");
  auto bad = ReadCheckpoint(path);
  EXPECT_EQ(bad.status().code(), Code::kCorrupt);
  EXPECT_NE(bad.status().message().find(path), std::string::npos);
  WriteAll(path, "not json");
  EXPECT_EQ(ReadCheckpoint(path).status().code(), Code::kCorrupt);
  nlohmann::json j = c.ToJson();
  j["records"] = 121;  // more than released
  WriteAll(path, j.dump());
  EXPECT_EQ(ReadCheckpoint(path).status().code(), Code::kCorrupt);
  j = c.ToJson();
  j["version"] = 2;
  WriteAll(path, j.dump());
  EXPECT_NE(ReadCheckpoint(path).status().message().find("version 2"), std::string::npos);
}

TEST_F(GenerateResume, SettingsComparisonNamesTheDifferences) {
  nlohmann::json a = {{"seed", 7}, {"num_lines", 100}, {"format", "csv"}};
  nlohmann::json b = a;
  EXPECT_TRUE(CompareResumeSettings(a, b, "p.json").ok());
  b["seed"] = 8;
  b["extra"] = true;
  Status st = CompareResumeSettings(a, b, "p.json");
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("p.json"), std::string::npos);
  EXPECT_NE(st.message().find("seed = 7 in the interrupted run, 8 now"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("extra = (not set) in the interrupted run, true now"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(st.message().find("num_lines"), std::string::npos);
}

// ---------------- output sink ----------------

// Output safety (issue #13 item 3): what a sink may replace, and partial files
// that are never followed or written through.
TEST_F(GenerateResume, OutputTargetChecks) {
  const std::string in = dir_ + "/input.csv", out = dir_ + "/out.csv";
  WriteAll(in, "a,b\n1,2\n");
  WriteAll(out, "old\n");
  OutputPolicy p;
  Status st = CheckOutputTarget(out, p);
  EXPECT_EQ(st.code(), Code::kAlreadyExists);
  EXPECT_NE(st.message().find("out.csv: already exists; pass --overwrite"), std::string::npos);
  WriteAll(ProgressPath(out), "{}");
  EXPECT_NE(CheckOutputTarget(out, p).message().find("or --resume"), std::string::npos);
  p.overwrite = true;
  EXPECT_TRUE(CheckOutputTarget(out, p).ok());
  EXPECT_TRUE(CheckOutputTarget(dir_ + "/new.csv", OutputPolicy{}).ok());
  EXPECT_TRUE(CheckOutputTarget("/dev/null", OutputPolicy{}).ok());
  EXPECT_TRUE(CheckOutputTarget("-", OutputPolicy{}).ok());
  // The training input, under its name, a hard link and a symlink.
  p.training_input = IdentifyFile(in);
  ASSERT_TRUE(::link(in.c_str(), (dir_ + "/hard.csv").c_str()) == 0);
  ASSERT_TRUE(::symlink("input.csv", (dir_ + "/sym.csv").c_str()) == 0);
  for (const char* name : {"/input.csv", "/hard.csv", "/sym.csv"}) {
    Status t = CheckOutputTarget(dir_ + name, p);
    EXPECT_EQ(t.code(), Code::kInvalidArgument) << name;
    EXPECT_NE(t.message().find("is the training input"), std::string::npos) << t.message();
  }
  // Inside the model directory (also below it, through ..), or any model's.
  const std::string model = dir_ + "/model", other = dir_ + "/other";
  ASSERT_TRUE(MakeDirs(model + "/sub").ok());
  ASSERT_TRUE(MakeDirs(other + "/deep/er").ok());
  WriteAll(other + "/model_params.json", "{}");
  p.model_dir = model;
  for (std::string target : {model + "/x.csv", model + "/sub/x.csv", model + "/sub/../y.csv",
                             other + "/x.csv", other + "/deep/er/x.csv"}) {
    Status t = CheckOutputTarget(target, p);
    EXPECT_EQ(t.code(), Code::kInvalidArgument) << target;
    EXPECT_NE(t.message().find("is inside the model directory"), std::string::npos) << target;
  }
  EXPECT_TRUE(CheckOutputTarget(dir_ + "/beside.csv", p).ok());
}

TEST_F(GenerateResume, PartialFilesAreNeverFollowedOrWrittenThrough) {
  const std::string out = dir_ + "/o.txt", victim = dir_ + "/victim";
  WriteAll(victim, "secret");
  // A symlink at the partial name: refused, fresh and resumed.
  ASSERT_EQ(::symlink("victim", PartialPath(out).c_str()), 0);
  auto s = OutputSink::Open(out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("is a symbolic link; refusing to follow it"),
            std::string::npos);
  EXPECT_FALSE(OutputSink::OpenForResume(out, 0, 0).ok());
  EXPECT_EQ(ReadAll(victim), "secret");
  // A hard link there (a stale partial file, as far as the name shows): replaced by
  // a new file, the linked data untouched.
  ASSERT_EQ(::unlink(PartialPath(out).c_str()), 0);
  ASSERT_EQ(::link(victim.c_str(), PartialPath(out).c_str()), 0);
  {
    auto sink = OutputSink::Open(out);
    ASSERT_TRUE(sink.ok()) << sink.status().ToString();
    ASSERT_TRUE((*sink)->Write("generated\n").ok());
    ASSERT_TRUE((*sink)->Finish().ok());
  }
  EXPECT_EQ(ReadAll(victim), "secret");
  EXPECT_EQ(ReadAll(out), "generated\n");
  // A symlink at the final name of an in-place resume: refused too.
  ASSERT_EQ(::unlink(out.c_str()), 0);
  ASSERT_EQ(::symlink("victim", out.c_str()), 0);
  EXPECT_FALSE(OutputSink::OpenForResume(out, 0, 0).ok());
  EXPECT_EQ(ReadAll(victim), "secret");
}

TEST_F(GenerateResume, SinkResumeVerifiesAndTruncates) {
  std::string out = dir_ + "/s.txt";
  uint64_t bytes;
  uint32_t crc;
  {
    auto sink = OutputSink::Open(out);
    ASSERT_TRUE(sink.ok());
    EXPECT_EQ((*sink)->partial_path(), out + ".partial");
    ASSERT_TRUE((*sink)->Write("one\ntwo\n").ok());
    ASSERT_TRUE((*sink)->Sync().ok());
    bytes = (*sink)->committed();
    crc = (*sink)->crc32();
    EXPECT_EQ(bytes, 8u);
    // A second writer of the same output is refused while this one runs.
    auto again = OutputSink::Open(out);
    ASSERT_FALSE(again.ok());
    EXPECT_NE(again.status().message().find("another process is writing"), std::string::npos);
    ASSERT_TRUE((*sink)->Write("three\n").ok());
    ASSERT_TRUE((*sink)->Flush().ok());
    EXPECT_EQ(ReadAll(out + ".partial"), "one\ntwo\nthree\n");
  }  // Abort: a fresh sink's partial file is removed
  EXPECT_FALSE(PathExists(out + ".partial"));
  // As a run killed inside a write leaves it: a record past the checkpoint
  // and a torn one.
  WriteAll(out + ".partial", "one\ntwo\nthree\nfo");
  {
    auto sink = OutputSink::OpenForResume(out, bytes, crc);
    ASSERT_TRUE(sink.ok()) << sink.status().ToString();
    EXPECT_EQ((*sink)->committed(), 8u);
    ASSERT_TRUE((*sink)->Write("3\n").ok());
    (*sink)->Abort();  // a resumed file is kept by Abort
  }
  EXPECT_EQ(ReadAll(out + ".partial"), "one\ntwo\n");
  {
    auto sink = OutputSink::OpenForResume(out, bytes, crc);
    ASSERT_TRUE(sink.ok());
    ASSERT_TRUE((*sink)->Write("3\n").ok());
    ASSERT_TRUE((*sink)->Finish().ok());
  }
  EXPECT_EQ(ReadAll(out), "one\ntwo\n3\n");
  EXPECT_FALSE(PathExists(out + ".partial"));
  // Resume in place (the final name holds a stopped run's output).
  {
    auto sink = OutputSink::OpenForResume(out, bytes, crc);
    ASSERT_TRUE(sink.ok()) << sink.status().ToString();
    EXPECT_FALSE(PathExists(out));
    EXPECT_TRUE(PathExists(out + ".partial"));
    ASSERT_TRUE((*sink)->Finish().ok());
  }
  EXPECT_EQ(ReadAll(out), "one\ntwo\n");
  // Changed bytes, a short file, nothing at all: clear errors, files untouched.
  WriteAll(out, "one\nTWO\n");
  auto changed = OutputSink::OpenForResume(out, bytes, crc);
  EXPECT_EQ(changed.status().code(), Code::kCorrupt);
  EXPECT_NE(changed.status().message().find("do not match the checksum"), std::string::npos);
  EXPECT_EQ(ReadAll(out), "one\nTWO\n");
  WriteAll(out, "one\n");
  auto shorter = OutputSink::OpenForResume(out, bytes, crc);
  EXPECT_EQ(shorter.status().code(), Code::kCorrupt);
  EXPECT_NE(shorter.status().message().find("fewer than the 8"), std::string::npos);
  std::remove(out.c_str());
  EXPECT_EQ(OutputSink::OpenForResume(out, bytes, crc).status().code(), Code::kNotFound);
  EXPECT_EQ(OutputSink::OpenForResume("-", 0, 0).status().code(), Code::kInvalidArgument);
}

// ---------------- whole runs ----------------

RunOptions BaseOptions(const std::string& output) {
  RunOptions o;
  o.gen.num_lines = 400;
  o.gen.seed = 7;
  o.gen.predict_batch_size = 5;
  o.gen.max_invalid = 100000;
  o.format = OutputFormat::kCsv;
  o.parallelism = 2;
  o.output = output;
  o.checkpoint_interval_s = 0.005;  // many checkpoints: many resume points
  o.output_policy.overwrite = true;  // some runs write the same file again
  return o;
}

struct RunResult {
  Status status;
  GenerateSummary summary;
  std::vector<std::string> warnings;
};

RunResult DoRun(const GenerationModel& m, const RunOptions& o) {
  RunResult r;
  GenerateEvents ev;
  ev.warning = [&](const std::string& w) { r.warnings.push_back(w); };
  r.status = RunGeneration(m, o, ev, &r.summary);
  return r;
}

// Runs generation in a forked child that SIGKILLs itself once `kill_after`
// records were written (RunOptions::test_kill_after_records).
void RunKilled(const GenerationModel& m, RunOptions o, int64_t kill_after) {
  o.test_kill_after_records = kill_after;
  ::fflush(nullptr);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    GenerateSummary s;
    Status st = RunGeneration(m, o, {}, &s);
    ::_exit(st.ok() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
}

// Records of a CSV file (the CsvReader must read it whole).
int64_t CsvRecords(const std::string& path) {
  auto rd = CsvReader::Open(path);
  EXPECT_TRUE(rd.ok()) << rd.status().ToString();
  if (!rd.ok()) return -1;
  std::vector<std::string> f;
  int64_t n = 0;
  while (true) {
    auto more = (*rd)->Next(&f);
    EXPECT_TRUE(more.ok()) << path << ": " << more.status().ToString();
    if (!more.ok() || !*more) break;
    EXPECT_EQ(f.size(), 3u);
    ++n;
  }
  return n;
}

TEST_F(GenerateResume, KilledRunResumesToTheUninterruptedBytes) {
  FakeTokenizer tok;
  auto m = FakeGenerationModel(tok, {"x", "y", "z"});
  std::string ref_path = dir_ + "/ref.csv";
  RunResult ref = DoRun(m, BaseOptions(ref_path));
  ASSERT_TRUE(ref.status.ok()) << ref.status.ToString();
  EXPECT_FALSE(PathExists(ProgressPath(ref_path)));
  EXPECT_FALSE(PathExists(PartialPath(ref_path)));
  const std::string want = ReadAll(ref_path);
  ASSERT_EQ(CsvRecords(ref_path), 400);

  for (int64_t kill_after : {1, 150, 399}) {
    SCOPED_TRACE(kill_after);
    std::string out = fmt::format("{}/cut{}.csv", dir_, kill_after);
    RunOptions o = BaseOptions(out);
    o.checkpoint_interval_s = 0;  // at every turn of the loop: resume mid-run
    RunKilled(m, o, kill_after);
    // Killed: no final file, a partial of whole records, a progress file
    // that covers a prefix of it.
    EXPECT_FALSE(PathExists(out));
    ASSERT_TRUE(PathExists(PartialPath(out)));
    auto cp = ReadCheckpoint(ProgressPath(out));
    ASSERT_TRUE(cp.ok() && cp->has_value()) << cp.status().ToString();
    std::string partial = ReadAll(PartialPath(out));
    int64_t in_partial = CsvRecords(PartialPath(out));
    EXPECT_GE(in_partial, kill_after);
    EXPECT_EQ(want.compare(0, partial.size(), partial), 0) << "partial is not a prefix";
    EXPECT_LE((*cp)->records, in_partial);
    if (kill_after > 1) {
      EXPECT_GT((*cp)->records, 0);
    }
    EXPECT_LE((*cp)->bytes, partial.size());
    // A torn write at the end (a kill inside write()): dropped on resume.
    WriteAll(PartialPath(out), partial + "\"torn,rec");
    // Parallelism is not part of the settings: resume with 1 worker.
    o.parallelism = 1;
    o.resume = true;
    RunResult r = DoRun(m, o);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.summary.resumed_records, (*cp)->records);
    EXPECT_EQ(r.summary.valid, 400);
    EXPECT_TRUE(r.summary.complete);
    EXPECT_EQ(ReadAll(out), want);
    EXPECT_FALSE(PathExists(PartialPath(out)));
    EXPECT_FALSE(PathExists(ProgressPath(out)));
  }
}

TEST_F(GenerateResume, PrefixModeAndJsonlResume) {
  FakeTokenizer tok;
  auto m = FakeGenerationModel(tok, {"x", "y", "z"});
  for (bool prefixes : {false, true}) {
    SCOPED_TRACE(prefixes);
    RunOptions o = BaseOptions(dir_ + "/ref.jsonl");
    o.format = OutputFormat::kJsonl;  // invalid records too
    o.gen.num_lines = 200;
    if (prefixes)
      for (int i = 0; i < 150; ++i) o.gen.prefixes.push_back(i % 2 ? "a," : "b,c,");
    RunResult ref = DoRun(m, o);
    ASSERT_TRUE(ref.status.ok()) << ref.status.ToString();
    ASSERT_GT(ref.summary.invalid, 0);
    std::string want = ReadAll(o.output);
    o.output = dir_ + "/cut.jsonl";
    o.checkpoint_interval_s = 0;
    RunKilled(m, o, 90);
    o.resume = true;
    RunResult r = DoRun(m, o);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_GT(r.summary.resumed_records, 0);
    EXPECT_EQ(ReadAll(o.output), want);
  }
}

TEST_F(GenerateResume, StoppedRunResumesInPlace) {
  FakeTokenizer tok;
  auto m = FakeGenerationModel(tok, {"x", "y", "z"});
  RunOptions o = BaseOptions(dir_ + "/ref.csv");
  ASSERT_TRUE(DoRun(m, o).status.ok());
  std::string want = ReadAll(o.output);
  // Too many invalid records: the truncated output is renamed into place,
  // with its progress file; a larger budget resumes it.
  o.output = dir_ + "/stopped.csv";
  o.gen.max_invalid = 20;
  RunResult stopped = DoRun(m, o);
  ASSERT_EQ(stopped.status.code(), Code::kResourceExhausted);
  EXPECT_TRUE(stopped.summary.resumable);
  EXPECT_TRUE(PathExists(o.output));
  EXPECT_TRUE(PathExists(ProgressPath(o.output)));
  EXPECT_EQ(want.compare(0, ReadAll(o.output).size(), ReadAll(o.output)), 0);
  o.gen.max_invalid = 100000;  // not a resume setting
  o.resume = true;
  RunResult r = DoRun(m, o);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.summary.resumed_valid, stopped.summary.valid);
  EXPECT_EQ(ReadAll(o.output), want);
  EXPECT_FALSE(PathExists(ProgressPath(o.output)));
  // Cancelled (Ctrl-C): the same.
  std::atomic<bool> cancel{true};
  o.resume = false;
  o.cancel = &cancel;
  o.output = dir_ + "/cancelled.csv";
  RunResult c = DoRun(m, o);
  ASSERT_EQ(c.status.code(), Code::kCancelled);
  EXPECT_TRUE(c.summary.resumable);
  o.cancel = nullptr;
  o.resume = true;
  r = DoRun(m, o);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(ReadAll(o.output), want);
}

TEST_F(GenerateResume, MismatchedSettingsAndFreshStarts) {
  FakeTokenizer tok;
  auto m = FakeGenerationModel(tok, {"x", "y", "z"});
  RunOptions o = BaseOptions(dir_ + "/out.csv");
  o.resume_settings["model_weights_crc32"] = 1234;
  RunKilled(m, o, 100);
  const std::string partial = ReadAll(PartialPath(o.output));
  const std::string progress = ReadAll(ProgressPath(o.output));
  // Every setting the records depend on must match; nothing is touched.
  std::vector<std::pair<std::string, std::function<void(RunOptions&)>>> changes = {
      {"seed", [](RunOptions& x) { x.gen.seed = 8; }},
      {"num_lines", [](RunOptions& x) { x.gen.num_lines = 401; }},
      {"gen_temp", [](RunOptions& x) { x.gen.temperature = 0.9; }},
      {"format", [](RunOptions& x) { x.format = OutputFormat::kText; }},
      {"predict_batch_size", [](RunOptions& x) { x.gen.predict_batch_size = 6; }},
      {"start_string", [](RunOptions& x) { x.gen.start_string = "a,"; }},
      {"model_weights_crc32", [](RunOptions& x) { x.resume_settings["model_weights_crc32"] = 9; }},
  };
  for (auto& [name, change] : changes) {
    RunOptions x = o;
    x.resume = true;
    change(x);
    RunResult r = DoRun(m, x);
    EXPECT_EQ(r.status.code(), Code::kInvalidArgument) << name;
    EXPECT_NE(r.status.message().find(name + " = "), std::string::npos) << r.status.message();
    EXPECT_NE(r.status.message().find(ProgressPath(o.output)), std::string::npos);
    EXPECT_EQ(ReadAll(PartialPath(o.output)), partial) << name;
    EXPECT_EQ(ReadAll(ProgressPath(o.output)), progress) << name;
  }
  // A changed partial file is refused.
  std::string changed = partial;
  changed[2] = 'Y';  // in the header: always inside the checkpoint
  WriteAll(PartialPath(o.output), changed);
  RunOptions x = o;
  x.resume = true;
  RunResult r = DoRun(m, x);
  EXPECT_EQ(r.status.code(), Code::kCorrupt) << r.status.ToString();
  // Without resume: overwritten from the first record, with a warning.
  RunResult fresh = DoRun(m, o);
  ASSERT_TRUE(fresh.status.ok()) << fresh.status.ToString();
  ASSERT_EQ(fresh.warnings.size(), 1u);
  EXPECT_NE(fresh.warnings[0].find("interrupted run"), std::string::npos) << fresh.warnings[0];
  EXPECT_EQ(fresh.summary.resumed_records, 0);
  EXPECT_FALSE(PathExists(PartialPath(o.output)));
  EXPECT_FALSE(PathExists(ProgressPath(o.output)));
  std::string want = ReadAll(o.output);
  // Resume with nothing to resume: a new run, with a warning.
  std::remove(o.output.c_str());
  x = o;
  x.resume = true;
  r = DoRun(m, x);
  ASSERT_TRUE(r.status.ok());
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("nothing to resume"), std::string::npos);
  EXPECT_EQ(ReadAll(o.output), want);
  // Standard output cannot be resumed.
  x.output = "-";
  EXPECT_EQ(DoRun(m, x).status.code(), Code::kInvalidArgument);
}

TEST_F(GenerateResume, DevicesAreWrittenDirectly) {
  FakeTokenizer tok;
  auto m = FakeGenerationModel(tok, {"x", "y", "z"});
  RunOptions o = BaseOptions("/dev/null");
  RunResult r = DoRun(m, o);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  struct stat st;
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null was replaced";
  EXPECT_FALSE(PathExists("/dev/null.partial"));
  EXPECT_FALSE(PathExists("/dev/null.progress.json"));
  o.resume = true;
  r = DoRun(m, o);
  EXPECT_EQ(r.status.code(), Code::kInvalidArgument);
  EXPECT_NE(r.status.message().find("not a regular file"), std::string::npos);
  // A full device: a clear write error.
  o = BaseOptions("/dev/full");
  r = DoRun(m, o);
  EXPECT_EQ(r.status.code(), Code::kIo);
  EXPECT_NE(r.status.message().find("/dev/full: write failed: No space left on device"),
            std::string::npos)
      << r.status.message();
  EXPECT_EQ(r.summary.valid, 0);  // nothing reached the output
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

}  // namespace
}  // namespace ds
