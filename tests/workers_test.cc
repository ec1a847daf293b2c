// Generation in worker processes (RunGeneration) with the fake model:
// reproducibility across parallelism, a killed worker, max_invalid, Ctrl-C,
// output formats, parallelism semantics.
#include "generate/workers.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "generate_fakes.h"
#include "io/csv.h"

namespace ds {
namespace {

using testing::FakeGenerationModel;
using testing::FakeModelSpec;
using testing::FakeTokenizer;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TempPath(const std::string& name) {
  return fmt::format("{}/workers_{}_{}", ::testing::TempDir(), getpid(), name);
}

std::vector<std::vector<std::string>> ReadCsv(const std::string& path,
                                              std::vector<std::string>* header) {
  auto rd = CsvReader::Open(path);
  EXPECT_TRUE(rd.ok()) << rd.status().ToString();
  std::vector<std::vector<std::string>> rows;
  if (!rd.ok()) return rows;
  *header = (*rd)->header();
  std::vector<std::string> f;
  while (true) {
    auto more = (*rd)->Next(&f);
    EXPECT_TRUE(more.ok()) << more.status().ToString();
    if (!more.ok() || !*more) break;
    rows.push_back(f);
  }
  return rows;
}

struct RunOut {
  Status status;
  GenerateSummary summary;
  std::string output;
  std::vector<std::string> warnings;
};

RunOut DoRun(const GenerationModel& m, RunOptions o, const std::string& name,
             std::function<void(const GenerateProgress&)> progress = nullptr) {
  RunOut r;
  o.output = TempPath(name);
  GenerateEvents ev;
  ev.warning = [&](const std::string& w) { r.warnings.push_back(w); };
  ev.progress = progress;
  if (progress) ev.progress_interval_s = 0;
  r.status = RunGeneration(m, o, ev, &r.summary);
  r.output = ReadAll(o.output);
  std::remove(o.output.c_str());
  std::remove((o.output + ".progress.json").c_str());  // left by runs that stopped early
  return r;
}

TEST(Parallelism, Semantics) {
  EXPECT_EQ(ResolveParallelism(0, 8).value(), 8);
  EXPECT_EQ(ResolveParallelism(3, 8).value(), 3);
  EXPECT_EQ(ResolveParallelism(-2, 8).value(), 6);
  EXPECT_EQ(ResolveParallelism(-20, 8).value(), 1);
  EXPECT_EQ(ResolveParallelism(0.5, 8).value(), 4);
  EXPECT_EQ(ResolveParallelism(0.01, 8).value(), 1);
  EXPECT_FALSE(ResolveParallelism(2.5, 8).ok());
  EXPECT_FALSE(ResolveParallelism(-1.5, 8).ok());
  EXPECT_GE(AvailableCpus(), 1);
}

RunOptions BaseOptions() {
  RunOptions o;
  o.gen.num_lines = 150;
  o.gen.seed = 7;
  o.gen.predict_batch_size = 6;
  o.gen.max_invalid = 100000;
  o.format = OutputFormat::kJsonl;  // every attempt, valid or not: the strictest comparison
  return o;
}

TEST(Workers, SameSeedSameBytesWhateverTheParallelism) {
  FakeTokenizer tok;
  auto m = FakeGenerationModel(tok, {"x", "y", "z"});
  RunOptions o = BaseOptions();
  std::string ref;
  for (int p : {1, 2, 3}) {
    o.parallelism = p;
    RunOut r = DoRun(m, o, fmt::format("p{}.jsonl", p));
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.summary.workers, p);
    EXPECT_EQ(r.summary.valid, 150);
    EXPECT_GT(r.summary.invalid, 0);
    EXPECT_TRUE(r.summary.complete);
    if (p == 1)
      ref = r.output;
    else
      EXPECT_EQ(r.output, ref) << "parallelism " << p;
  }
  // The in-process generator yields the same records in the same order.
  std::string in_process;
  auto g = RecordGenerator::Create(m, o.gen);
  ASSERT_TRUE(g.ok());
  GeneratedRecord rec;
  while (true) {
    auto more = (*g)->Next(&rec);
    ASSERT_TRUE(more.ok());
    if (!*more) break;
    nlohmann::json j;
    j["id"] = rec.id;
    j["valid"] = rec.valid;
    j["text"] = rec.text;
    j["explain"] = rec.explain;
    j["fields"] = rec.fields;
    in_process += j.dump() + "\n";
  }
  EXPECT_EQ(in_process, ref);
  // Another seed: other records.
  o.gen.seed = 8;
  o.parallelism = 2;
  RunOut other = DoRun(m, o, "seed8.jsonl");
  ASSERT_TRUE(other.status.ok());
  EXPECT_NE(other.output, ref);
}

TEST(Workers, PrefixesAcrossWorkers) {
  FakeTokenizer tok;
  auto m = FakeGenerationModel(tok, {"x", "y", "z"});
  RunOptions o = BaseOptions();
  o.format = OutputFormat::kCsv;
  for (int i = 0; i < 40; ++i) o.gen.prefixes.push_back(fmt::format("{},", "abc"[i % 3]));
  std::string ref;
  for (int p : {1, 3}) {
    o.parallelism = p;
    RunOut r = DoRun(m, o, fmt::format("prefix{}.csv", p));
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.summary.valid, 40);
    if (p == 1) ref = r.output;
    EXPECT_EQ(r.output, ref);
  }
  std::string path = TempPath("prefix_check.csv");
  { std::ofstream(path, std::ios::binary) << ref; }
  std::vector<std::string> header;
  auto rows = ReadCsv(path, &header);
  std::remove(path.c_str());
  EXPECT_EQ(header, (std::vector<std::string>{"x", "y", "z"}));
  ASSERT_EQ(rows.size(), 40u);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(rows[size_t(i)].size(), 3u);
    EXPECT_EQ(rows[size_t(i)][0], std::string(1, "abc"[i % 3]));
  }
}

// One CPU worker runs in this process (no fork): its backend is built here,
// and the records are those of forked workers, byte for byte.
TEST(Workers, OneCpuWorkerRunsInProcess) {
  FakeTokenizer tok;
  auto m = FakeGenerationModel(tok, {"x", "y", "z"});
  int built_here = 0;
  auto make = m.make_backend;
  m.make_backend = [&built_here, make](int slots) {
    ++built_here;  // a forked worker increments its own copy
    return make(slots);
  };
  RunOptions o = BaseOptions();
  o.parallelism = 1;
  RunOut one = DoRun(m, o, "inproc1.jsonl");
  ASSERT_TRUE(one.status.ok()) << one.status.ToString();
  EXPECT_EQ(built_here, 1);
  EXPECT_EQ(one.summary.workers, 1);
  EXPECT_GT(one.summary.tokens, 0);
  built_here = 0;
  o.parallelism = 2;
  RunOut two = DoRun(m, o, "inproc2.jsonl");
  ASSERT_TRUE(two.status.ok());
  EXPECT_EQ(built_here, 0);
  EXPECT_EQ(one.output, two.output);
  // The kill test hook keeps a worker process (it SIGKILLs itself).
  o.parallelism = 1;
  o.test_kill_worker_after = 1000000;
  RunOut hooked = DoRun(m, o, "inproc3.jsonl");
  ASSERT_TRUE(hooked.status.ok());
  EXPECT_EQ(built_here, 0);
  EXPECT_EQ(hooked.output, one.output);
}

TEST(Workers, KilledWorkerLosesAndDuplicatesNothing) {
  FakeTokenizer tok;
  auto m = FakeGenerationModel(tok, {"x", "y", "z"});
  RunOptions o = BaseOptions();
  o.parallelism = 1;
  RunOut ref = DoRun(m, o, "ref.jsonl");
  ASSERT_TRUE(ref.status.ok());
  o.parallelism = 2;
  o.test_kill_worker_after = 9;  // worker 0 SIGKILLs itself mid-chunk
  RunOut r = DoRun(m, o, "killed.jsonl");
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.summary.worker_failures, 1);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("killed by signal 9"), std::string::npos) << r.warnings[0];
  EXPECT_NE(r.warnings[0].find("re-run"), std::string::npos);
  EXPECT_EQ(r.summary.valid, 150);
  EXPECT_EQ(r.output, ref.output);  // same records, none lost, none twice
  // With a single worker that dies, the run fails with a clear error and a
  // well-formed (empty or partial) output.
  o.parallelism = 1;
  RunOut dead = DoRun(m, o, "dead.jsonl");
  EXPECT_FALSE(dead.status.ok());
  EXPECT_NE(dead.status.message().find("every generation worker died"), std::string::npos);
  EXPECT_EQ(ref.output.compare(0, dead.output.size(), dead.output), 0);
}

TEST(Workers, TooManyInvalidStopsWithWellFormedOutput) {
  FakeTokenizer tok;
  auto m = FakeGenerationModel(tok, {"x", "y", "z"});
  RunOptions o = BaseOptions();
  o.format = OutputFormat::kCsv;
  o.gen.num_lines = 100000;
  o.gen.max_invalid = 25;
  o.parallelism = 2;
  RunOut r = DoRun(m, o, "invalid.csv");
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.code(), Code::kResourceExhausted);
  EXPECT_NE(r.status.message().find("too many invalid"), std::string::npos);
  EXPECT_EQ(r.summary.invalid, 26);
  EXPECT_FALSE(r.summary.complete);
  EXPECT_GT(r.summary.valid, 0);
  std::string path = TempPath("invalid_check.csv");
  { std::ofstream(path, std::ios::binary) << r.output; }
  std::vector<std::string> header;
  auto rows = ReadCsv(path, &header);
  std::remove(path.c_str());
  EXPECT_EQ(header.size(), 3u);
  EXPECT_EQ(int64_t(rows.size()), r.summary.valid);
  for (auto& row : rows) EXPECT_EQ(row.size(), 3u);
  // The same seed stops at the same record whatever the parallelism.
  o.parallelism = 3;
  RunOut r3 = DoRun(m, o, "invalid3.csv");
  EXPECT_EQ(r3.output, r.output);
}

TEST(Workers, CancelKeepsATruncatedWellFormedOutput) {
  FakeTokenizer tok;
  auto m = FakeGenerationModel(tok, {"x", "y", "z"});
  RunOptions o = BaseOptions();
  o.format = OutputFormat::kCsv;
  o.parallelism = 1;
  RunOut full = DoRun(m, o, "full.csv");
  ASSERT_TRUE(full.status.ok());
  std::atomic<bool> cancel{false};
  o.cancel = &cancel;
  o.parallelism = 2;
  RunOut r = DoRun(m, o, "cancel.csv", [&](const GenerateProgress& p) {
    if (p.valid >= 20) cancel = true;
  });
  EXPECT_EQ(r.status.code(), Code::kCancelled);
  EXPECT_GE(r.summary.valid, 20);
  EXPECT_LT(r.summary.valid, 150);
  // A prefix of the complete output, ending at a record boundary.
  EXPECT_EQ(full.output.compare(0, r.output.size(), r.output), 0);
  ASSERT_FALSE(r.output.empty());
  EXPECT_EQ(r.output.back(), '\n');
  std::string path = TempPath("cancel_check.csv");
  { std::ofstream(path, std::ios::binary) << r.output; }
  std::vector<std::string> header;
  auto rows = ReadCsv(path, &header);
  std::remove(path.c_str());
  EXPECT_EQ(int64_t(rows.size()), r.summary.valid);
}

TEST(Workers, ProgressAndFormats) {
  FakeTokenizer tok;
  auto m = FakeGenerationModel(tok, {"x", "y", "z"});
  RunOptions o = BaseOptions();
  o.parallelism = 2;
  std::vector<GenerateProgress> reports;
  o.format = OutputFormat::kText;
  RunOut text = DoRun(m, o, "f.txt", [&](const GenerateProgress& p) { reports.push_back(p); });
  ASSERT_TRUE(text.status.ok());
  ASSERT_FALSE(reports.empty());
  EXPECT_TRUE(reports.back().final);
  EXPECT_EQ(reports.back().valid, 150);
  EXPECT_EQ(reports.back().wanted, 150);
  EXPECT_GT(reports.back().tokens_per_s, 0);
  EXPECT_GT(reports.back().valid_share, 0);
  EXPECT_LE(reports.back().valid_share, 1);
  EXPECT_EQ(FormatProgress(reports.back()).rfind("150/150 valid (", 0), 0u)
      << FormatProgress(reports.back());
  EXPECT_NE(FormatSummary(text.summary).find("150 valid and "), std::string::npos);
  o.format = OutputFormat::kCsv;
  RunOut csv = DoRun(m, o, "f.csv");
  o.format = OutputFormat::kJsonl;
  RunOut jsonl = DoRun(m, o, "f.jsonl");
  ASSERT_TRUE(csv.status.ok() && jsonl.status.ok());
  // The three formats describe the same valid records.
  std::vector<std::string> from_jsonl;
  std::istringstream in(jsonl.output);
  std::string line;
  int invalid = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["valid"]) {
      from_jsonl.push_back(j["text"]);
    } else {
      EXPECT_FALSE(j["explain"].get<std::string>().empty());
      ++invalid;
    }
  }
  EXPECT_EQ(invalid, jsonl.summary.invalid);
  // The fake's fields may hold '\n': compare as a whole instead of by line.
  std::string joined;
  for (auto& t : from_jsonl) joined += t + "\n";
  EXPECT_EQ(text.output, joined);
  std::string path = TempPath("fmt_check.csv");
  { std::ofstream(path, std::ios::binary) << csv.output; }
  std::vector<std::string> header;
  auto rows = ReadCsv(path, &header);
  std::remove(path.c_str());
  ASSERT_EQ(rows.size(), from_jsonl.size());
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(JoinFields(rows[i], ','), from_jsonl[i]);
}

// GPU workers report their allocator statistics to the parent (STATS frames):
// one entry per worker, the latest values, printed by FormatWorkerMemory.
TEST(Workers, DeviceMemoryStatsReachTheSummary) {
  FakeTokenizer tok;
  FakeModelSpec spec;
  spec.report_memory = true;
  auto m = FakeGenerationModel(tok, {"x", "y", "z"}, spec);
  RunOptions o = BaseOptions();
  o.parallelism = 2;
  RunOut r = DoRun(m, o, "stats.jsonl");
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.summary.worker_memory.size(), 2u);
  int64_t tokens_seen = 0;
  for (const auto& s : r.summary.worker_memory) {
    EXPECT_EQ(s.limit_bytes, (size_t(1) << 20) + 6);  // predict_batch_size 6 slots
    EXPECT_GT(s.peak_allocated_bytes, 0u);
    EXPECT_EQ(s.peak_reserved_bytes, 2 * s.peak_allocated_bytes);
    tokens_seen += int64_t(s.peak_allocated_bytes / 16);
  }
  // Every sampled token was one backend slot-step in some worker (prompt
  // steps included, so at least the tokens reported).
  EXPECT_GE(tokens_seen, r.summary.tokens);
  std::string line = FormatWorkerMemory(r.summary);
  EXPECT_NE(line.find("2 workers"), std::string::npos) << line;
  EXPECT_NE(line.find("limit 1.00 MiB"), std::string::npos) << line;
  // Host backends report nothing.
  RunOut cpu = DoRun(FakeGenerationModel(tok, {"x", "y", "z"}), o, "nostats.jsonl");
  ASSERT_TRUE(cpu.status.ok());
  EXPECT_TRUE(cpu.summary.worker_memory.empty());
  EXPECT_EQ(FormatWorkerMemory(cpu.summary), "");
}

// A worker that cannot start (its backend fails) sends an ERROR frame: the
// run fails with the worker's own message (it used to arrive empty: the frame
// was written unframed and decoded as a length-prefixed string).
TEST(Workers, WorkerStartFailureCarriesItsMessage) {
  FakeTokenizer tok;
  auto m = FakeGenerationModel(tok, {"x", "y", "z"});
  m.make_backend = [](int) -> Result<std::unique_ptr<InferBackend>> {
    return DS_ERR(kUnavailable, "no backend for this test");
  };
  RunOptions o = BaseOptions();
  o.parallelism = 2;
  RunOut r = DoRun(m, o, "startfail.csv");
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.code(), Code::kInternal);
  EXPECT_NE(r.status.message().find("failed: no backend for this test"), std::string::npos)
      << r.status.message();
  EXPECT_FALSE(r.summary.complete);
}

TEST(Workers, TextModelAndStdoutPathChecks) {
  FakeTokenizer tok;
  auto m = FakeGenerationModel(tok);
  RunOptions o = BaseOptions();
  o.format = OutputFormat::kText;
  o.gen.num_lines = 3;
  o.parallelism = 0;  // all CPUs, but no more workers than records
  RunOut r = DoRun(m, o, "t.txt");
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_LE(r.summary.workers, 3);
  EXPECT_EQ(r.summary.valid, 3);
  // Bad options are reported before any output exists.
  o.gen.temperature = 0;
  GenerateSummary s;
  o.output = TempPath("never.txt");
  Status st = RunGeneration(m, o, {}, &s);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(access(o.output.c_str(), F_OK), 0);
  o.gen.temperature = 1;
  o.output = "/nonexistent-dir/x.txt";
  st = RunGeneration(m, o, {}, &s);
  EXPECT_EQ(st.code(), Code::kIo);
  EXPECT_NE(st.message().find("/nonexistent-dir/x.txt"), std::string::npos);
  o.output = ::testing::TempDir();  // a directory
  st = RunGeneration(m, o, {}, &s);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("is a directory"), std::string::npos);
}

}  // namespace
}  // namespace ds
