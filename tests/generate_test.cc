// In-process generation: sampler, continuous batching, stop rules, start
// strings, validation, scheduler, output formats. Uses the fakes of
// generate_fakes.h (no real network or tokenizer).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "backend/cpu/vmath.h"
#include "generate/batch_sampler.h"
#include "generate/generator.h"
#include "generate/output.h"
#include "generate/sampler.h"
#include "generate/scheduler.h"
#include "generate_fakes.h"

namespace ds {
namespace {

using testing::FakeBackend;
using testing::FakeGenerationModel;
using testing::FakeModelSpec;
using testing::FakeTokenizer;

std::vector<GeneratedRecord> GenerateAll(const GenerationModel& m, const GenerateOptions& o,
                                         Status* final_status = nullptr) {
  auto g = RecordGenerator::Create(m, o);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  std::vector<GeneratedRecord> out;
  if (!g.ok()) return out;
  GeneratedRecord r;
  while (true) {
    auto more = (*g)->Next(&r);
    if (!more.ok()) {
      if (final_status) *final_status = more.status();
      break;
    }
    if (!*more) break;
    out.push_back(r);
  }
  return out;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TempPath(const std::string& name) {
  return fmt::format("{}/gen_{}_{}", ::testing::TempDir(), getpid(), name);
}

// ---------------- sampler ----------------

std::vector<double> Softmax(const std::vector<float>& l, double t) {
  double mx = -INFINITY;
  for (float x : l) mx = std::max(mx, double(x));
  std::vector<double> p(l.size());
  double s = 0;
  for (size_t i = 0; i < l.size(); ++i) s += p[i] = std::exp((l[i] - mx) / t);
  for (auto& x : p) x /= s;
  return p;
}

TEST(Sampler, LowTemperaturePicksArgmax) {
  std::vector<float> l = {0.1f, 2.5f, 2.4f, -1.0f, 2.49f};
  std::vector<float> scratch(size_t(SampleScratchSize(int(l.size()))));
  Philox rng(1, 2);
  for (double t : {1e-6, 1e-4, 0.0}) {
    for (int k = 0; k < 100; ++k)
      EXPECT_EQ(SampleToken(l.data(), int(l.size()), t, rng, scratch.data()), 1);
  }
  // T = 0.01 is not greedy but the gap 0.01 / 0.01 = 1 nat still favours id 1;
  // at T = 1e-3 the gap is 10 nats: practically always the argmax.
  int hits = 0;
  for (int k = 0; k < 1000; ++k) hits += SampleToken(l.data(), 5, 1e-3, rng, scratch.data()) == 1;
  EXPECT_GE(hits, 995);
}

TEST(Sampler, FrequenciesMatchSoftmax) {
  std::vector<float> l = {1.0f, 0.0f, -0.5f, 2.0f, 0.3f, -INFINITY};
  std::vector<float> scratch(size_t(SampleScratchSize(int(l.size()))));
  for (double t : {1.0, 2.0, 0.5}) {
    Philox rng(7, uint64_t(t * 10));
    const int n = 200000;
    std::vector<int> count(l.size());
    for (int k = 0; k < n; ++k) ++count[size_t(SampleToken(l.data(), 6, t, rng, scratch.data()))];
    auto p = Softmax(l, t);
    for (size_t i = 0; i < l.size(); ++i) {
      double f = double(count[i]) / n;
      double sigma = std::sqrt(p[i] * (1 - p[i]) / n);
      EXPECT_NEAR(f, p[i], 5 * sigma + 1e-9) << "T=" << t << " id " << i;
    }
    EXPECT_EQ(count[5], 0);  // masked
  }
}

// Ranges wider than one block of 16 ids (the draw walks block sums, then the
// ids of one block): 53 ids, a third of them masked, blocks of very unequal
// weight (one nearly empty, one holding most of the mass), and ties.
TEST(Sampler, FrequenciesMatchSoftmaxAcrossBlocks) {
  std::vector<float> l(53);
  for (size_t i = 0; i < l.size(); ++i) l[i] = i % 3 == 1 ? -INFINITY : float(i % 7) * 0.4f - 1.0f;
  for (size_t i = 16; i < 32; ++i) l[i] = i == 20 ? -9.0f : -INFINITY;  // block 1: one tiny id
  l[40] = l[41] = 3.0f;                                                   // a tie, most of the mass
  std::vector<float> scratch(size_t(SampleScratchSize(int(l.size()))));
  for (double t : {1.0, 0.7}) {
    Philox rng(11, uint64_t(t * 10));
    const int n = 300000;
    std::vector<int> count(l.size());
    for (int k = 0; k < n; ++k)
      ++count[size_t(SampleToken(l.data(), int(l.size()), t, rng, scratch.data()))];
    const auto p = Softmax(l, t);
    double chi2 = 0;
    int dof = -1;
    for (size_t i = 0; i < l.size(); ++i) {
      if (l[i] == -INFINITY) {
        EXPECT_EQ(count[i], 0) << "masked id " << i;
        continue;
      }
      const double f = double(count[i]) / n;
      EXPECT_NEAR(f, p[i], 5 * std::sqrt(p[i] * (1 - p[i]) / n) + 1e-9) << "T=" << t << " id " << i;
      if (p[i] * n >= 5) chi2 += (count[i] - p[i] * n) * (count[i] - p[i] * n) / (p[i] * n), ++dof;
    }
    EXPECT_LT(chi2, dof + 5 * std::sqrt(2.0 * dof)) << "T=" << t << " dof " << dof;
  }
  Philox rng(3, 3);
  EXPECT_EQ(SampleToken(l.data(), int(l.size()), 0.0, rng, scratch.data()), 40);  // lowest on ties
}

// The vector max behind the sampler and the softmax: -inf for an empty or all
// -inf row (an OpenMP max reduction under clang gives -FLT_MAX there, a value
// no logit holds, and the argmax walked off the row), NaN never wins, and the
// tail past the last 16-lane block counts.
TEST(Sampler, MaxOfAllMinusInfinityIsMinusInfinity) {
  std::vector<float> l(37, -INFINITY);
  EXPECT_EQ(cpu::MaxOf(l.data(), 0), -INFINITY);
  EXPECT_EQ(cpu::MaxOf(l.data(), 37), -INFINITY);
  l[3] = NAN;
  l[20] = -FLT_MAX;
  EXPECT_EQ(cpu::MaxOf(l.data(), 37), -FLT_MAX);
  l[36] = 2.5f;  // in the tail
  l[5] = 2.0f;
  EXPECT_EQ(cpu::MaxOf(l.data(), 37), 2.5f);
  EXPECT_EQ(cpu::MaxOf(l.data(), 36), 2.0f);
}

TEST(Sampler, EverythingMaskedGivesMinusOne) {
  std::vector<float> l(4, -INFINITY), scratch(size_t(SampleScratchSize(4)));
  Philox rng(1, 1);
  EXPECT_EQ(SampleToken(l.data(), 4, 1.0, rng, scratch.data()), -1);
}

// ---------------- batch sampler ----------------

TEST(BatchSampler, ContinuousBatchingKeepsSlotsBusy) {
  FakeTokenizer tok;
  const int slots = 8, records = 200;
  FakeModelSpec spec;
  spec.end_logit = 1.5f;  // mean length ~ 10 tokens, long tail
  FakeBackend backend(tok.vocab_size(), slots, spec);
  SamplerOptions so;
  so.seed = 3;
  BatchSampler s(tok, backend, so, {});
  for (int i = 0; i < records; ++i) s.Submit(GenTask{uint64_t(i), -1});
  tok.kind_calls = tok.text_calls = 0;
  std::vector<GeneratedRecord> done;
  int guard = 0;
  while (!s.idle() && ++guard < 100000) s.Step(&done);
  ASSERT_EQ(done.size(), size_t(records));
  std::map<uint64_t, int64_t> len;
  int64_t total = 0;
  for (auto& r : done) {
    len[r.id] = r.tokens;
    total += r.tokens;
    EXPECT_TRUE(r.valid) << r.explain;
  }
  EXPECT_EQ(len.size(), size_t(records));  // every attempt exactly once
  EXPECT_EQ(s.tokens_sampled(), total);
  // Each record needs (tokens) steps of a slot (the <n> input, then every
  // sampled token but the last). Continuous batching: the batch stays full
  // until the queue is empty, so steps ~ total / slots plus one record's tail.
  int64_t longest = 0;
  for (auto& [id, n] : len) longest = std::max(longest, n);
  EXPECT_EQ(s.rows_stepped(), total);
  EXPECT_EQ(s.rows_stepped() + s.idle_rows(), s.steps() * slots);  // full_batch
  EXPECT_LE(s.steps(), (total + slots - 1) / slots + longest);
  // Static batching (groups of `slots` run until their slowest ends) would
  // need the sum of per-group maxima.
  int64_t static_steps = 0;
  for (int g = 0; g < records; g += slots) {
    int64_t mx = 0;
    for (int i = g; i < std::min(records, g + slots); ++i) mx = std::max(mx, len[uint64_t(i)]);
    static_steps += mx;
  }
  EXPECT_LT(double(s.steps()), 0.8 * double(static_steps));
  // Incremental detokenization: O(1) tokenizer calls per token, never a
  // re-decode of the line so far.
  EXPECT_LE(tok.kind_calls + tok.text_calls, 2 * total);
}

TEST(BatchSampler, RecordDependsOnlyOnSeedAndId) {
  FakeTokenizer tok;
  SamplerOptions so;
  so.seed = 99;
  so.delimiter = ',';
  auto run = [&](int slots, std::vector<uint64_t> ids) {
    FakeBackend backend(tok.vocab_size(), slots, {});
    BatchSampler s(tok, backend, so, {});
    for (auto id : ids) s.Submit(GenTask{id, -1});
    std::vector<GeneratedRecord> done;
    while (!s.idle()) s.Step(&done);
    std::map<uint64_t, std::string> m;
    for (auto& r : done) m[r.id] = r.text;
    return m;
  };
  auto a = run(1, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto b = run(4, {9, 3, 0, 7, 1, 8, 2, 6, 5, 4});
  auto c = run(16, {5, 6, 7, 8, 9, 0, 1, 2, 3, 4});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  std::set<std::string> distinct;
  for (auto& [id, t] : a) distinct.insert(t);
  EXPECT_GT(distinct.size(), 5u);  // different ids give different records
}

TEST(BatchSampler, GenCharsCapsRecordLength) {
  FakeTokenizer tok;
  FakeModelSpec spec;
  spec.end_logit = -INFINITY;  // never ends by itself
  FakeBackend backend(tok.vocab_size(), 4, spec);
  SamplerOptions so;
  so.gen_chars = 17;
  BatchSampler s(tok, backend, so, {});
  for (int i = 0; i < 20; ++i) s.Submit(GenTask{uint64_t(i), -1});
  std::vector<GeneratedRecord> done;
  while (!s.idle()) s.Step(&done);
  ASSERT_EQ(done.size(), 20u);
  for (auto& r : done) {
    EXPECT_TRUE(r.valid);
    size_t chars = 0;
    for (auto& f : r.fields) chars += f.size();  // the fake's characters are ASCII
    EXPECT_EQ(chars, 17u) << r.text;
  }
}

TEST(BatchSampler, MaxTokensMakesAnInvalidRecord) {
  FakeTokenizer tok;
  FakeModelSpec spec;
  spec.end_logit = -INFINITY;
  FakeBackend backend(tok.vocab_size(), 2, spec);
  SamplerOptions so;
  so.max_tokens = 30;
  BatchSampler s(tok, backend, so, {});
  s.Submit(GenTask{0, -1});
  std::vector<GeneratedRecord> done;
  while (!s.idle()) s.Step(&done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FALSE(done[0].valid);
  EXPECT_EQ(done[0].tokens, 30);
  EXPECT_NE(done[0].explain.find("no end of record after 30 tokens"), std::string::npos);
}

class BanLetters : public TokenFilter {
 public:
  explicit BanLetters(const FakeTokenizer& t) : tok_(t) {}
  void Begin(int) override { ++begins; }
  void Accept(int, int32_t token) override { accepted.push_back(token); }
  void Mask(int, float* logits) override {
    for (const char* c : {"a", "b", "c", "x"}) logits[tok_.Id(c)] = -INFINITY;
  }
  const FakeTokenizer& tok_;
  int begins = 0;
  std::vector<int32_t> accepted;
};

TEST(BatchSampler, TokenFilterMasksTokens) {
  FakeTokenizer tok;
  FakeBackend backend(tok.vocab_size(), 3, {});
  BanLetters f(tok);
  BatchSampler s(tok, backend, SamplerOptions{}, {}, &f);
  for (int i = 0; i < 30; ++i) s.Submit(GenTask{uint64_t(i), -1});
  std::vector<GeneratedRecord> done;
  while (!s.idle()) s.Step(&done);
  EXPECT_EQ(f.begins, 30);
  int64_t tokens = 0;
  for (auto& r : done) {
    tokens += r.tokens;
    for (char c : r.text) EXPECT_TRUE(c != 'a' && c != 'b' && c != 'c' && c != 'x') << r.text;
  }
  EXPECT_EQ(int64_t(f.accepted.size()), tokens);
}

// ---------------- start strings ----------------

TEST(StartStrings, MustEndWithDelimiter) {
  FakeTokenizer tok;
  auto m = FakeGenerationModel(tok, {"x", "y", "z"});
  GenerateOptions o;
  o.start_string = "a1";
  auto g = RecordGenerator::Create(m, o);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Code::kInvalidArgument);
  EXPECT_NE(g.status().message().find("must end with the field delimiter ','"), std::string::npos)
      << g.status().message();

  o.start_string.reset();
  o.prefixes = {"a,", "b", "c,"};
  o.prefixes_source = "prefixes.txt";
  g = RecordGenerator::Create(m, o);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("prefixes.txt:2:"), std::string::npos)
      << g.status().message();

  o.prefixes = {"a,", "q,"};  // 'q' is not in the vocabulary
  g = RecordGenerator::Create(m, o);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("prefixes.txt:2:"), std::string::npos);
}

TEST(StartStrings, StartStringPrefixesEveryRecord) {
  FakeTokenizer tok;
  auto m = FakeGenerationModel(tok, {"x", "y", "z"});
  GenerateOptions o;
  o.num_lines = 20;
  o.predict_batch_size = 4;
  o.max_invalid = 100000;
  o.start_string = "ab,1,";
  auto recs = GenerateAll(m, o);
  int valid = 0;
  for (auto& r : recs) {
    ASSERT_GE(r.fields.size(), 2u);
    EXPECT_EQ(r.fields[0], "ab");
    EXPECT_EQ(r.fields[1], "1");
    EXPECT_EQ(r.text.rfind("ab,1,", 0), 0u);
    valid += r.valid;
  }
  EXPECT_EQ(valid, 20);
}

TEST(StartStrings, OneValidRecordPerPrefixInOrder) {
  FakeTokenizer tok;
  auto m = FakeGenerationModel(tok, {"x", "y", "z"});
  GenerateOptions o;
  o.predict_batch_size = 3;
  o.max_invalid = 100000;
  o.num_lines = 1;  // ignored with prefixes
  o.prefixes = {"a,", "b,b,", "c,", "1,2,", "a,", "x,"};
  auto recs = GenerateAll(m, o);
  std::vector<GeneratedRecord> valid;
  int invalid = 0;
  for (auto& r : recs) {
    if (r.valid)
      valid.push_back(r);
    else
      ++invalid;
  }
  ASSERT_EQ(valid.size(), o.prefixes.size());
  for (size_t i = 0; i < valid.size(); ++i) {
    EXPECT_EQ(valid[i].prefix, int32_t(i));
    EXPECT_EQ(valid[i].text.rfind(o.prefixes[i], 0), 0u) << valid[i].text;
    EXPECT_EQ(valid[i].fields.size(), 3u);
  }
  EXPECT_GT(invalid, 0);  // the fake makes wrong field counts: retries happened
  // Released in prefix order: invalid tries of prefix i come before its valid one.
  int32_t last = 0;
  for (auto& r : recs) {
    EXPECT_GE(r.prefix, last);
    last = r.prefix;
  }
}

// ---------------- validation / max_invalid ----------------

TEST(Validation, FieldCountExplainAndBudget) {
  FakeTokenizer tok;
  auto m = FakeGenerationModel(tok, {"x", "y", "z"});
  GenerateOptions o;
  o.num_lines = 30;
  o.predict_batch_size = 5;
  o.max_invalid = 100000;
  auto recs = GenerateAll(m, o);
  int valid = 0, invalid = 0;
  for (auto& r : recs) {
    if (r.valid) {
      ++valid;
      EXPECT_EQ(r.fields.size(), 3u);
      EXPECT_TRUE(r.explain.empty());
    } else {
      ++invalid;
      EXPECT_EQ(r.explain, fmt::format("expected 3 fields, got {}", r.fields.size()));
    }
  }
  EXPECT_EQ(valid, 30);
  ASSERT_GT(invalid, 3);

  o.max_invalid = 3;
  Status st;
  recs = GenerateAll(m, o, &st);
  EXPECT_EQ(st.code(), Code::kResourceExhausted);
  EXPECT_NE(st.message().find("too many invalid"), std::string::npos);
  int inv = 0;
  for (auto& r : recs) inv += !r.valid;
  EXPECT_EQ(inv, 4);  // the 4th invalid record crossed max_invalid = 3

  // Field count check switched off: every record is valid.
  m.rules->set_checks(RuleChecks{.field_count = false});
  o.max_invalid = 0;
  recs = GenerateAll(m, o, &st);
  EXPECT_EQ(recs.size(), 30u);
  for (auto& r : recs) EXPECT_TRUE(r.valid);
}

TEST(Generator, SameSeedSameRecordsWhateverTheSlots) {
  FakeTokenizer tok;
  auto m = FakeGenerationModel(tok, {"x", "y", "z"});
  GenerateOptions o;
  o.num_lines = 40;
  o.seed = 5;
  o.max_invalid = 100000;
  std::vector<std::string> ref;
  for (int slots : {1, 3, 64}) {
    o.predict_batch_size = slots;
    std::vector<std::string> got;
    for (auto& r : GenerateAll(m, o)) got.push_back((r.valid ? "+" : "-") + r.text);
    if (ref.empty())
      ref = got;
    else
      EXPECT_EQ(got, ref) << "slots " << slots;
  }
  o.seed = 6;
  std::vector<std::string> other;
  for (auto& r : GenerateAll(m, o)) other.push_back((r.valid ? "+" : "-") + r.text);
  EXPECT_NE(other, ref);
}

TEST(Generator, GreedyGivesIdenticalRecords) {
  FakeTokenizer tok;
  FakeModelSpec spec;
  spec.min_len = 6;
  spec.end_logit = 10;  // the argmax once allowed
  auto m = FakeGenerationModel(tok, {}, spec);
  GenerateOptions o;
  o.num_lines = 10;
  o.temperature = 1e-6;
  auto recs = GenerateAll(m, o);
  ASSERT_EQ(recs.size(), 10u);
  for (auto& r : recs) {
    EXPECT_TRUE(r.valid);
    EXPECT_EQ(r.tokens, 7);  // 6 text tokens, then <n>
    EXPECT_EQ(r.text, recs[0].text);
  }
}

// ---------------- scheduler ----------------

GeneratedRecord Rec(uint64_t id, bool valid, int32_t prefix = -1) {
  GeneratedRecord r;
  r.id = id;
  r.valid = valid;
  r.prefix = prefix;
  r.text = std::to_string(id);
  return r;
}

TEST(Scheduler, CountModeReleasesInIdOrder) {
  AttemptScheduler s({.target = 3, .max_invalid = 10, .window = 8});
  std::vector<GenTask> t;
  s.Issue(100, &t);
  ASSERT_EQ(t.size(), 3u);  // need 3, nothing invalid seen yet
  GeneratedRecord r;
  s.Complete(Rec(2, true));
  s.Complete(Rec(1, false));
  EXPECT_FALSE(s.Pop(&r));  // 0 missing
  s.Complete(Rec(0, true));
  ASSERT_TRUE(s.Pop(&r));
  EXPECT_EQ(r.id, 0u);
  ASSERT_TRUE(s.Pop(&r));
  EXPECT_EQ(r.id, 1u);
  ASSERT_TRUE(s.Pop(&r));
  EXPECT_EQ(r.id, 2u);
  EXPECT_FALSE(s.finished());
  t.clear();
  s.Issue(100, &t);  // one more needed; the valid share is 2/3
  ASSERT_GE(t.size(), 1u);
  EXPECT_EQ(t[0].id, 3u);
  // Lost attempts come back first.
  s.Requeue(t[0]);
  std::vector<GenTask> t2;
  s.Issue(1, &t2);
  EXPECT_EQ(t2[0].id, 3u);
  s.Complete(Rec(3, true));
  s.Complete(Rec(3, true));  // duplicate: ignored
  ASSERT_TRUE(s.Pop(&r));
  EXPECT_TRUE(s.finished());
  EXPECT_EQ(s.released_valid(), 3);
  EXPECT_EQ(s.released_invalid(), 1);
}

TEST(Scheduler, PrefixModeRetriesAndOrders) {
  AttemptScheduler s({.num_prefixes = 3, .max_invalid = 10, .window = 2});
  std::vector<GenTask> t;
  s.Issue(100, &t);
  ASSERT_EQ(t.size(), 2u);  // window of 2 prefixes
  EXPECT_EQ(t[0].prefix, 0);
  EXPECT_EQ(t[1].prefix, 1);
  GeneratedRecord r;
  s.Complete(Rec(AttemptScheduler::PrefixAttemptId(1, 0), true, 1));
  EXPECT_FALSE(s.Pop(&r));
  s.Complete(Rec(AttemptScheduler::PrefixAttemptId(0, 0), false, 0));
  ASSERT_TRUE(s.Pop(&r));
  EXPECT_FALSE(r.valid);
  t.clear();
  s.Issue(100, &t);  // the retry of prefix 0
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].id, AttemptScheduler::PrefixAttemptId(0, 1));
  s.Complete(Rec(t[0].id, true, 0));
  ASSERT_TRUE(s.Pop(&r));
  EXPECT_EQ(r.prefix, 0);
  ASSERT_TRUE(s.Pop(&r));
  EXPECT_EQ(r.prefix, 1);
  t.clear();
  s.Issue(100, &t);  // prefix 2 admitted once the window moved
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].prefix, 2);
  s.Complete(Rec(t[0].id, true, 2));
  ASSERT_TRUE(s.Pop(&r));
  EXPECT_TRUE(s.finished());
}

// ---------------- output ----------------

TEST(Output, CsvQuotingAndHeader) {
  std::string path = TempPath("q.csv");
  auto sink = OutputSink::Open(path);
  ASSERT_TRUE(sink.ok());
  RecordWriter w(OutputFormat::kCsv, {"name", "note, with comma"}, ',', sink->get());
  ASSERT_TRUE(w.Begin().ok());
  GeneratedRecord r;
  r.fields = {"plain", "a,b"};
  ASSERT_TRUE(w.Write(r).ok());
  r.fields = {"say \"hi\"", "line1\nline2"};
  ASSERT_TRUE(w.Write(r).ok());
  r.valid = false;  // not written to csv
  r.fields = {"bad", "bad"};
  ASSERT_TRUE(w.Write(r).ok());
  EXPECT_FALSE(access(path.c_str(), F_OK) == 0);  // only the temporary exists
  ASSERT_TRUE((*sink)->Finish().ok());
  EXPECT_EQ(ReadAll(path),
            "name,\"note, with comma\"\n"
            "plain,\"a,b\"\n"
            "\"say \"\"hi\"\"\",\"line1\nline2\"\n");
  std::remove(path.c_str());
}

TEST(Output, JsonlCarriesValidAndExplain) {
  std::string path = TempPath("r.jsonl");
  auto sink = OutputSink::Open(path);
  ASSERT_TRUE(sink.ok());
  RecordWriter w(OutputFormat::kJsonl, {"a", "b"}, ',', sink->get());
  ASSERT_TRUE(w.Begin().ok());
  GeneratedRecord r;
  r.fields = {"x\"y", "1"};
  r.text = "x\"y,1";
  ASSERT_TRUE(w.Write(r).ok());
  r.id = 7;
  r.valid = false;
  r.fields = {"z"};
  r.text = "z";
  r.explain = "expected 2 fields, got 1";
  ASSERT_TRUE(w.Write(r).ok());
  ASSERT_TRUE((*sink)->Finish().ok());
  std::istringstream in(ReadAll(path));
  std::string line;
  std::vector<nlohmann::json> js;
  while (std::getline(in, line)) js.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(js.size(), 2u);
  EXPECT_EQ(js[0]["valid"], true);
  EXPECT_EQ(js[0]["text"], "x\"y,1");
  EXPECT_EQ(js[0]["fields"], nlohmann::json::array({"x\"y", "1"}));
  EXPECT_EQ(js[0]["explain"], "");
  EXPECT_EQ(js[0]["id"], 0);
  EXPECT_EQ(js[1]["valid"], false);
  EXPECT_EQ(js[1]["id"], 7);
  EXPECT_EQ(js[1]["explain"], "expected 2 fields, got 1");
  std::remove(path.c_str());
}

TEST(Output, TextLinesAndAbort) {
  std::string path = TempPath("t.txt");
  {
    auto sink = OutputSink::Open(path);
    ASSERT_TRUE(sink.ok());
    RecordWriter w(OutputFormat::kText, {}, 0, sink->get());
    ASSERT_TRUE(w.Begin().ok());
    GeneratedRecord r;
    r.fields = {"hello there"};
    r.text = "hello there";
    ASSERT_TRUE(w.Write(r).ok());
    r.valid = false;
    ASSERT_TRUE(w.Write(r).ok());
    ASSERT_TRUE((*sink)->Finish().ok());
    EXPECT_EQ(ReadAll(path), "hello there\n");
  }
  std::remove(path.c_str());
  {
    auto sink = OutputSink::Open(path);
    ASSERT_TRUE(sink.ok());
    ASSERT_TRUE((*sink)->Write("x\n").ok());
    (*sink)->Abort();
  }
  EXPECT_FALSE(access(path.c_str(), F_OK) == 0);
  EXPECT_EQ(OutputFormatName(ParseOutputFormat("jsonl").value()), std::string("jsonl"));
  EXPECT_FALSE(ParseOutputFormat("xml").ok());
}

}  // namespace
}  // namespace ds
