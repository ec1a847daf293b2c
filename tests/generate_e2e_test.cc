// Generation with the real pieces: the CPU inference backend, a char
// tokenizer, a model directory on disk (LoadModel, memory-mapped weights) and
// worker processes. Random weights: the records are noise, but every property
// checked here (row independence, reproducibility, prefixes, rules) holds for
// any weights.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backend/backend.h"
#include "generate/generate.h"
#include "model/model_dir.h"
#include "model/network.h"
#include "model/tensor_file.h"
#include "tokenize/tokenizer.h"
#include "util/fs.h"
#include "util/rng.h"

namespace ds {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<float> RandomParams(const NetworkSpec& spec, uint64_t seed) {
  ParamLayout layout = ParamLayout::For(spec);
  std::vector<float> p(layout.total);
  InitParams(spec, "glorot_uniform", seed, p.data());
  return p;
}

// The logits of a record must not depend on the other rows of the step nor on
// the record's row: with BatchSampler's full_batch policy (every step runs all
// slots) this is what makes generation reproducible across workers.
void CheckRowIndependence(int threads) {
  NetworkSpec spec;
  spec.vocab_size = 100;
  const int slots = 64, V = spec.vocab_size;
  std::vector<float> params = RandomParams(spec, 3);
  auto a = MakeCpuInferBackend(spec, params.data(), slots);
  auto b = MakeCpuInferBackend(spec, params.data(), slots);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int s = 0; s < slots; ++s) {
    (*a)->ResetSlot(s);
    (*b)->ResetSlot(s);
  }
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  Philox rng(5, uint64_t(threads));
  std::vector<float> la(size_t(slots) * V), lb(size_t(slots) * V);
  std::vector<int> ids(static_cast<size_t>(slots));
  for (int s = 0; s < slots; ++s) ids[size_t(s)] = s;
  const int sa = 17, sb = 40;  // the record's slot (= row) in a and in b
  int mismatches = 0;
  for (int step = 0; step < 40; ++step) {
    std::vector<int32_t> ta(static_cast<size_t>(slots)), tb(static_cast<size_t>(slots));
    for (int s = 0; s < slots; ++s) {
      ta[size_t(s)] = int32_t(rng.Below(uint64_t(V)));
      tb[size_t(s)] = int32_t(rng.Below(uint64_t(V)));
    }
    const int32_t tok = int32_t(rng.Below(uint64_t(V)));
    ta[sa] = tok;
    tb[sb] = tok;
    (*a)->Step(ids.data(), ta.data(), slots, la.data());
    (*b)->Step(ids.data(), tb.data(), slots, lb.data());
    mismatches += std::memcmp(&la[size_t(sa) * V], &lb[size_t(sb) * V], V * sizeof(float)) != 0;
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(mismatches, 0) << "threads " << threads;
}

TEST(GenerateE2E, CpuLogitsOfARowIgnoreTheOtherRows) {
  CheckRowIndependence(1);  // what a worker process runs
  CheckRowIndependence(2);
}

class GenerateModelDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fmt::format("{}/gen_e2e_{}", ::testing::TempDir(), getpid());
    // Outputs beside the model directory: generate never writes inside one.
    out_ = dir_ + "_out";
    ASSERT_TRUE(MakeDirs(out_).ok());
    ASSERT_TRUE(RemoveTree(dir_).ok());
    ASSERT_TRUE(MakeDirs(dir_).ok());
    header_ = {"species", "island", "mass"};
    std::vector<std::vector<std::string>> records;
    const char* sp[] = {"Adelie", "Gentoo", "Chinstrap"};
    const char* is[] = {"Biscoe", "Dream", "Torgersen"};
    for (int i = 0; i < 60; ++i)
      records.push_back({sp[i % 3], is[(i / 3) % 3], fmt::format("{}", 3000 + 37 * i)});
    TokenizerConfig tc;
    tc.type = "char";
    auto tok = TrainTokenizer(tc, records);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    ASSERT_TRUE((*tok)->Save(dir_).ok());
    Config cfg;
    cfg.field_delimiter = ",";
    cfg.tokenizer = "char";
    ModelMeta meta;
    meta.spec.vocab_size = (*tok)->vocab_size();
    meta.spec.embedding_dim = 32;
    meta.spec.rnn_units = 32;
    meta.header = header_;
    meta.delimiter = ',';
    std::vector<float> params = RandomParams(meta.spec, 9);
    // Make <n> likely so that records stay short.
    ParamLayout layout = ParamLayout::For(meta.spec);
    params[layout.offset("dense.b") + size_t((*tok)->end_id())] = 3.0f;
    meta.weights_crc = Crc32(params.data(), params.size() * sizeof(float));
    ASSERT_TRUE(WriteTensorFile(dir_ + "/weights.bin",
                                {TensorSection{"params", params.data(), params.size()}})
                    .ok());
    ColumnRules rules = LearnColumnRules(header_, records);
    ASSERT_TRUE(WriteFileAtomic(dir_ + "/column_rules.json", rules.ToJson().dump()).ok());
    ASSERT_TRUE(WriteModelParams(dir_, cfg, meta).ok());
  }
  void TearDown() override {
    (void)RemoveTree(dir_);
    (void)RemoveTree(out_);
  }

  GenerateCommand Command(double parallelism, const std::string& out) {
    GenerateCommand c;
    c.model_dir = dir_;
    c.run.output = out;
    c.run.parallelism = parallelism;
    c.run.gen.seed = 11;
    c.num_lines = 25;
    c.predict_batch_size = 8;
    c.max_invalid = 1000000;
    c.format = OutputFormat::kJsonl;
    c.checks.category = false;  // random weights: keep it cheap to be valid
    c.checks.range = false;
    c.checks.type = false;
    return c;
  }

  std::string dir_, out_;
  std::vector<std::string> header_;
};

TEST_F(GenerateModelDir, ReproducibleAcrossParallelism) {
  std::string ref;
  for (int p : {1, 2, 3}) {
    std::string out = fmt::format("{}/out{}.jsonl", out_, p);
    GenerateSummary sum;
    Status st = GenerateFromModelDir(Command(p, out), {}, &sum);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(sum.valid, 25);
    std::string got = ReadAll(out);
    if (p == 1) ref = got;
    EXPECT_EQ(got, ref) << "parallelism " << p;
  }
  EXPECT_FALSE(ref.empty());
}

TEST_F(GenerateModelDir, StartStringsFileAndRules) {
  std::string prefixes = dir_ + "/prefixes.txt";
  { std::ofstream(prefixes) << "Adelie,\nGentoo,Dream,\nChinstrap,\n"; }
  GenerateCommand c = Command(2, out_ + "/p.csv");
  c.format = OutputFormat::kCsv;
  c.start_strings_file = prefixes;
  GenerateSummary sum;
  Status st = GenerateFromModelDir(c, {}, &sum);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(sum.valid, 3);
  std::string csv = ReadAll(out_ + "/p.csv");
  std::istringstream in(csv);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u) << csv;
  EXPECT_EQ(lines[0], "species,island,mass");
  EXPECT_EQ(lines[1].rfind("Adelie,", 0), 0u);
  EXPECT_EQ(lines[2].rfind("Gentoo,Dream,", 0), 0u);
  EXPECT_EQ(lines[3].rfind("Chinstrap,", 0), 0u);

  // A start string without the trailing delimiter is a clear error.
  c = Command(1, out_ + "/bad.csv");
  c.run.gen.start_string = "Adelie";
  st = GenerateFromModelDir(c, {}, &sum);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("must end with the field delimiter"), std::string::npos);
  EXPECT_FALSE(PathExists(out_ + "/bad.csv"));

  // Full rules on random weights: invalid records carry the rule they broke.
  c = Command(2, out_ + "/rules.jsonl");
  c.checks = RuleChecks{};
  c.constrain = ConstraintLevel::kNone;  // constrained decoding would make every record valid
  c.num_lines = 2;
  c.max_invalid = 40;
  st = GenerateFromModelDir(c, {}, &sum);
  ASSERT_TRUE(st.ok() || st.code() == Code::kResourceExhausted) << st.ToString();
  std::istringstream jin(ReadAll(out_ + "/rules.jsonl"));
  int explained = 0;
  while (std::getline(jin, line)) {
    auto j = nlohmann::json::parse(line);
    if (!j["valid"]) {
      std::string e = j["explain"];
      EXPECT_TRUE(e.find("expected 3 fields") == 0 || e.find("field ") == 0) << e;
      ++explained;
    }
  }
  EXPECT_GT(explained, 0);
}

}  // namespace
}  // namespace ds
