// Tests of src/evaluate: closed-form metric cases, the CSV table reader, the
// quality scores on real data and its baselines, the privacy checks, the
// report outputs, and the SDMetrics cross-check (against committed golden values;
// live too where sdmetrics is installed).
#include "evaluate/evaluate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "evaluate/metrics.h"
#include "evaluate/privacy.h"
#include "evaluate/table.h"
#include "util/rng.h"

namespace ds {
namespace {

namespace fs = std::filesystem;
const std::string kData = DS_TEST_DATA "/evaluate/";

Table MustRead(const std::string& path) {
  auto t = ReadTable(path, ',');
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).ValueOrThrow();
}

std::string TempDir(const std::string& name) {
  fs::path p =
      fs::temp_directory_path() / ("ds_eval_test_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(p);
  return p.string();
}

// ---- metrics: closed-form cases ----

TEST(Metrics, JensenShannonClosedForm) {
  EXPECT_DOUBLE_EQ(JensenShannonDistance({1, 2, 3}, {1, 2, 3}), 0.0);
  EXPECT_NEAR(JensenShannonDistance({1, 2, 3}, {10, 20, 30}), 0.0, 1e-12);  // scale-free
  EXPECT_NEAR(JensenShannonDistance({1, 0}, {0, 1}), 1.0, 1e-12);           // disjoint
  // p = (1/2, 1/2), q = (1, 0), m = (3/4, 1/4):
  // JSD = H(m) - (H(p) + H(q)) / 2 = 0.811278 - 0.5, distance = sqrt(0.311278) = 0.557923.
  const double hm = -(0.75 * std::log2(0.75) + 0.25 * std::log2(0.25));
  EXPECT_NEAR(JensenShannonDistance({1, 1}, {1, 0}), std::sqrt(hm - 0.5), 1e-12);
  EXPECT_NEAR(JensenShannonDistance({1, 1}, {1, 0}), 0.557923, 1e-6);
  EXPECT_DOUBLE_EQ(JensenShannonDistance({0, 0}, {0, 0}), 0.0);
  EXPECT_DOUBLE_EQ(JensenShannonDistance({1, 0}, {0, 0}), 1.0);
  // Symmetric.
  EXPECT_DOUBLE_EQ(JensenShannonDistance({3, 1, 0}, {1, 1, 2}),
                   JensenShannonDistance({1, 1, 2}, {3, 1, 0}));
}

TEST(Metrics, TheilsUClosedForm) {
  // X = a a b b, Y = 0 1 2 2: Y determines X, so U(X|Y) = 1.
  // H(Y) = 1.5 bits, H(Y|X) = 0.5 bits (Y is a fair coin when X = a), U(Y|X) = 2/3.
  const int32_t x[] = {0, 0, 1, 1}, y[] = {0, 1, 2, 2};
  EXPECT_NEAR(TheilsU(x, 2, y, 3, 4), 1.0, 1e-12);
  EXPECT_NEAR(TheilsU(y, 3, x, 2, 4), 2.0 / 3.0, 1e-12);
  // Independent: X = a a b b, Z = 0 1 0 1.
  const int32_t z[] = {0, 1, 0, 1};
  EXPECT_NEAR(TheilsU(x, 2, z, 2, 4), 0.0, 1e-12);
  // Constant X: fully "explained" by convention.
  const int32_t c[] = {0, 0, 0, 0};
  EXPECT_DOUBLE_EQ(TheilsU(c, 1, y, 3, 4), 1.0);
}

TEST(Metrics, CorrelationRatioClosedForm) {
  // Groups a: {1, 3} (mean 2), b: {5, 7} (mean 6); overall mean 4.
  // SS_between = 2*4 + 2*4 = 16, SS_total = 9+1+1+9 = 20, eta = sqrt(0.8).
  const int32_t c[] = {0, 0, 1, 1};
  const double y[] = {1, 3, 5, 7};
  EXPECT_NEAR(CorrelationRatio(c, 2, y, 4), std::sqrt(0.8), 1e-12);
  const double y2[] = {1, 1, 5, 5};  // fully determined by the group
  EXPECT_NEAR(CorrelationRatio(c, 2, y2, 4), 1.0, 1e-12);
  const double y3[] = {1, 5, 1, 5};  // equal group means
  EXPECT_NEAR(CorrelationRatio(c, 2, y3, 4), 0.0, 1e-12);
  const double y4[] = {1, 3, NAN, 7};  // missing skipped: a {1, 3}, b {7}
  // mean 11/3; SS_between = 2 (2 - 11/3)^2 + (7 - 11/3)^2; SS_total = sum (y - 11/3)^2.
  const double m = 11.0 / 3, sb = 2 * (2 - m) * (2 - m) + (7 - m) * (7 - m),
               st = (1 - m) * (1 - m) + (3 - m) * (3 - m) + (7 - m) * (7 - m);
  EXPECT_NEAR(CorrelationRatio(c, 2, y4, 4), std::sqrt(sb / st), 1e-12);
}

TEST(Metrics, PearsonClosedForm) {
  const double x[] = {1, 2, 3, 4}, y[] = {2, 4, 6, 8}, z[] = {4, 3, 2, 1};
  EXPECT_NEAR(PearsonCorrelation(x, y, 4), 1.0, 1e-12);
  EXPECT_NEAR(PearsonCorrelation(x, z, 4), -1.0, 1e-12);
  const double w[] = {1, 2, NAN, 4}, v[] = {1, 3, 100, 2};  // pairs (1,1) (2,3) (4,2)
  // means 7/3 and 2: sxy = (-4/3)(-1) + (-1/3)(1) + (5/3)(0) = 1,
  // sxx = 16/9 + 1/9 + 25/9 = 42/9, syy = 2.
  EXPECT_NEAR(PearsonCorrelation(w, v, 4), 1.0 / std::sqrt(42.0 / 9 * 2), 1e-12);
  const double k[] = {5, 5, 5, 5};
  EXPECT_DOUBLE_EQ(PearsonCorrelation(x, k, 4), 0.0);
}

TEST(Metrics, KsAndTvComplementClosedForm) {
  // ECDFs of {1,2,3,4} and {3,4,5,6} differ most at 2: 0.5 - 0.
  EXPECT_NEAR(KSComplement({1, 2, 3, 4}, {3, 4, 5, 6}), 0.5, 1e-12);
  // Ties: {1,1,2} vs {1,2,2}: at 1, 2/3 - 1/3.
  EXPECT_NEAR(KolmogorovSmirnovStatistic({1, 1, 2}, {1, 2, 2}), 1.0 / 3, 1e-12);
  EXPECT_NEAR(KSComplement({1, NAN, 2}, {1, 2}), 1.0, 1e-12);  // NaN dropped
  EXPECT_TRUE(std::isnan(KSComplement({NAN}, {1.0})));
  // a a b b vs a b b b: TV = (|1/2 - 1/4| + |1/2 - 3/4|) / 2 = 1/4.
  EXPECT_NEAR(TVComplement({0, 0, 1, 1}, {0, 1, 1, 1}), 0.75, 1e-12);
  EXPECT_NEAR(TVComplement({0, 0, -1}, {1, -1}), 0.0, 1e-12);   // disjoint, missing dropped
  EXPECT_NEAR(TVComplement({0, 1}, {0, 1, 2, 2}), 0.5, 1e-12);  // value unseen in real
}

TEST(Metrics, PcaOnKnownTwoDimensionalData) {
  // Points +-a u1 and +-b u2 with u1 = (1,1)/sqrt2, u2 = (1,-1)/sqrt2, a = 3, b = 1:
  // covariance = (2 a^2 u1 u1^T + 2 b^2 u2 u2^T) / (n - 1), n = 4.
  const double s = 1 / std::sqrt(2.0);
  std::vector<double> x = {3 * s, 3 * s, -3 * s, -3 * s, s, -s, -s, s};  // [4, 2]
  Pca2 p = FitPca2(x, 4, 2);
  EXPECT_NEAR(p.eigenvalues[0], 2 * 9 / 3.0, 1e-9);
  EXPECT_NEAR(p.eigenvalues[1], 2 * 1 / 3.0, 1e-9);
  EXPECT_NEAR(p.total_variance, 20 / 3.0, 1e-9);
  EXPECT_NEAR(p.components[0], s, 1e-9);  // sign: largest entry positive (first on ties)
  EXPECT_NEAR(p.components[1], s, 1e-9);
  EXPECT_NEAR(p.components[2], s, 1e-9);
  EXPECT_NEAR(p.components[3], -s, 1e-9);
  double out[2];
  p.Project(&x[0], out);  // the first point is 3 u1
  EXPECT_NEAR(out[0], 3, 1e-9);
  EXPECT_NEAR(out[1], 0, 1e-9);
  // Shifted data: the mean is removed first.
  for (size_t i = 0; i < x.size(); i += 2) x[i] += 10, x[i + 1] -= 4;
  Pca2 q = FitPca2(x, 4, 2);
  EXPECT_NEAR(q.mean[0], 10, 1e-12);
  EXPECT_NEAR(q.mean[1], -4, 1e-12);
  EXPECT_NEAR(q.eigenvalues[0], 6, 1e-9);
}

TEST(Metrics, PcaFindsTopComponentsInHigherDimension) {
  // d = 20 (more than the 8 iteration vectors): rows +-s_i e_i with
  // s = 5 (axis 7), 3 (axis 13), 1 elsewhere; eigenvalues 2 s^2 / (n - 1).
  const size_t d = 20, n = 2 * d;
  std::vector<double> x(n * d, 0.0);
  for (size_t i = 0; i < d; ++i) {
    double sc = i == 7 ? 5 : i == 13 ? 3 : 1;
    x[(2 * i) * d + i] = sc;
    x[(2 * i + 1) * d + i] = -sc;
  }
  Pca2 p = FitPca2(x, n, d);
  EXPECT_NEAR(p.eigenvalues[0], 50.0 / 39, 1e-8);
  EXPECT_NEAR(p.eigenvalues[1], 18.0 / 39, 1e-8);
  EXPECT_NEAR(p.components[7], 1.0, 1e-6);
  EXPECT_NEAR(p.components[d + 13], 1.0, 1e-6);
}

// ---- privacy building blocks ----

TEST(Privacy, NearestDistancesMatchBruteForce) {
  Philox rng(5, 0);
  EncodedRecords ref, q;
  ref.rows = 1000;
  q.rows = 37;
  for (int c = 0; c < 3; ++c) {
    std::vector<float> a(ref.rows), b(q.rows);
    for (float& v : a) v = rng.Uniform() < 0.05 ? kMissingScaled : rng.Uniform() * 1.2f;
    for (float& v : b) v = rng.Uniform() < 0.05 ? kMissingScaled : rng.Uniform() * 1.2f - 0.1f;
    ref.num.push_back(a);
    q.num.push_back(b);
  }
  for (int c = 0; c < 2; ++c) {
    std::vector<int32_t> a(ref.rows), b(q.rows);
    for (int32_t& v : a) v = int32_t(rng.Below(4));
    for (int32_t& v : b) v = int32_t(rng.Below(5));
    ref.cat.push_back(a);
    q.cat.push_back(b);
  }
  std::vector<size_t> rows;
  for (size_t i = 0; i < q.rows; i += 1) rows.push_back(q.rows - 1 - i);
  std::vector<float> d1 = NearestDistances(ref, q, rows, 1), d2 = NearestDistances(ref, q, rows, 2);
  for (size_t i = 0; i < rows.size(); ++i) {
    double best = 1e9;
    for (size_t j = 0; j < ref.rows; ++j) {
      double s = 0;
      for (int c = 0; c < 3; ++c) {
        float a = ref.num[size_t(c)][j], b = q.num[size_t(c)][rows[i]];
        bool ma = a == kMissingScaled, mb = b == kMissingScaled;
        s += ma && mb ? 0 : (ma || mb) ? 1 : std::min(1.0, std::fabs(double(a) - b));
      }
      for (int c = 0; c < 2; ++c) s += ref.cat[size_t(c)][j] != q.cat[size_t(c)][rows[i]];
      best = std::min(best, s / 5);
    }
    EXPECT_NEAR(d1[i], best, 1e-5) << i;
    EXPECT_EQ(d1[i], d2[i]);
  }
}

TEST(Privacy, RocAucClosedForm) {
  EXPECT_DOUBLE_EQ(RocAuc({3, 4}, {1, 2}), 1.0);
  EXPECT_DOUBLE_EQ(RocAuc({1, 2}, {3, 4}), 0.0);
  EXPECT_DOUBLE_EQ(RocAuc({1, 1}, {1, 1}), 0.5);    // all tied
  EXPECT_DOUBLE_EQ(RocAuc({1, 3}, {2, 2}), 0.5);    // 1 of 2 pairs won per member
  EXPECT_DOUBLE_EQ(RocAuc({2, 3}, {1, 2}), 0.875);  // (1 + 0.5 + 1 + 1) / 4
}

// ---- table reader ----

TEST(Table, ParsesRfc4180EdgeCases) {
  Table t = MustRead(kData + "quoted.csv");
  ASSERT_EQ(t.num_cols(), 3u);
  ASSERT_EQ(t.num_rows(), 2u);
  EXPECT_EQ(t.columns[1].name, "quote \"this\"");
  EXPECT_EQ(t.columns[1].values[0], "a, b");
  EXPECT_EQ(t.columns[2].values[0], "line one\nline two");
  EXPECT_EQ(t.columns[2].values[1], "");
  EXPECT_EQ(t.columns[2].missing, 1u);
  EXPECT_EQ(t.columns[0].type, ColumnKind::kNumeric);
}

TEST(Table, ErrorsNameFileAndLine) {
  auto bad = ReadTable(kData + "bad_quote.csv", ',');
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad_quote.csv:2:"), std::string::npos)
      << bad.status().message();
  auto ragged = ReadTable(kData + "ragged.csv", ',');
  ASSERT_FALSE(ragged.ok());
  EXPECT_NE(ragged.status().message().find("ragged.csv:3: expected 3 fields, found 2"),
            std::string::npos)
      << ragged.status().message();
  auto missing = ReadTable(kData + "no_such_file.csv", ',');
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  auto dup = ParseTable("a,a\n1,2\n", ',', "dup.csv");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("'a' appears more than once"), std::string::npos);
  EXPECT_FALSE(ParseTable("", ',', "empty.csv").ok());
}

// evaluate reads tables with the training reader (io/csv.h): what train
// accepts, evaluate accepts (a literal quote in an unquoted field, CRLF, a
// BOM), and its strict checks (invalid UTF-8) apply with file:line.
TEST(Table, ReadsWhatTrainingReads) {
  auto t = ParseTable("height,n\r\n5'10\",1\r\n\"a \"\"b\"\"\",2\r\n", ',', "mem.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->num_rows(), 2u);
  EXPECT_EQ(t->columns[0].values[0], "5'10\"");
  EXPECT_EQ(t->columns[0].values[1], "a \"b\"");
  auto bad = ParseTable("a,b\n1,\xff\n", ',', "latin1.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("latin1.csv:2: field 2 'b': invalid UTF-8"),
            std::string::npos)
      << bad.status().message();
}

TEST(Table, InfersTypesAndRoundTrips) {
  auto t = ParseTable("\xEF\xBB\xBFzip;n;cat\n02134;1.5;x\n10001;-2e3;y\n;;x\n", ';', "mem");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->columns[0].name, "zip");                     // BOM stripped
  EXPECT_EQ(t->columns[0].type, ColumnKind::kCategorical);  // leading zero: identifier
  EXPECT_EQ(t->columns[1].type, ColumnKind::kNumeric);
  EXPECT_EQ(t->columns[1].missing, 1u);
  EXPECT_EQ(t->columns[2].type, ColumnKind::kCategorical);
  std::vector<std::string> many;
  for (int i = 0; i < 200; ++i) many.push_back("free text " + std::to_string(i));
  EXPECT_EQ(InferColumnKind(many), ColumnKind::kText);
  many.resize(40);
  EXPECT_EQ(InferColumnKind(many), ColumnKind::kCategorical);
  double v;
  EXPECT_TRUE(ParseNumber("-3.5e2", &v));
  EXPECT_DOUBLE_EQ(v, -350);
  EXPECT_FALSE(ParseNumber("nan", &v));
  EXPECT_FALSE(ParseNumber(" 7", &v));
  EXPECT_FALSE(ParseNumber("0x10", &v));
  EXPECT_FALSE(ParseNumber("1e999", &v));

  std::string dir = TempDir("roundtrip");
  Table q = MustRead(kData + "quoted.csv");
  ASSERT_TRUE(WriteTable(q, dir + "/q.csv", ',').ok());
  Table back = MustRead(dir + "/q.csv");
  ASSERT_EQ(back.num_cols(), q.num_cols());
  for (size_t c = 0; c < q.num_cols(); ++c) {
    EXPECT_EQ(back.columns[c].name, q.columns[c].name);
    EXPECT_EQ(back.columns[c].values, q.columns[c].values);
  }
  fs::remove_all(dir);
}

TEST(Table, SplitIsAPartition) {
  Table t = MustRead(kData + "penguins_train.csv"), a, b;
  SplitTable(t, 0.8, 42, &a, &b);
  EXPECT_EQ(a.num_rows() + b.num_rows(), t.num_rows());
  EXPECT_EQ(a.num_rows(), size_t(std::llround(0.8 * double(t.num_rows()))));
  std::multiset<std::string> all, parts;
  for (size_t r = 0; r < t.num_rows(); ++r)
    all.insert(t.columns[2].values[r] + t.columns[5].values[r]);
  for (const Table* p : {&a, &b})
    for (size_t r = 0; r < p->num_rows(); ++r)
      parts.insert(p->columns[2].values[r] + p->columns[5].values[r]);
  EXPECT_EQ(all, parts);
  Table a2, b2;
  SplitTable(t, 0.8, 42, &a2, &b2);  // reproducible
  EXPECT_EQ(a2.columns[0].values, a.columns[0].values);
}

// ---- quality scores on real data ----

class TelcoQuality : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto t = ReadTable(std::string(DS_SOURCE_DIR) + "/examples/telco_churn_2k.csv", ',');
    if (!t.ok()) return;
    SplitTable(*t, 0.8, 42, &train_, &test_);
    loaded_ = true;
  }
  void SetUp() override {
    ASSERT_TRUE(loaded_) << "examples/telco_churn_2k.csv not readable";
  }
  static EvalReport Eval(const Table& synth) {
    EvalOptions opt;
    opt.privacy = false;
    return Evaluate(train_, synth, nullptr, opt).ValueOrThrow();
  }
  static inline Table train_, test_;
  static inline bool loaded_ = false;
};

TEST_F(TelcoQuality, HeldOutSplitScoresHigh) {
  EvalReport r = Eval(test_);
  EXPECT_GT(r.quality.overall, 85);
  EXPECT_GT(r.quality.distribution.score, 90);
  EXPECT_GT(r.quality.correlation.score, 85);
  EXPECT_GT(r.quality.deep_structure.score, 85);
  EXPECT_EQ(r.quality.grade, "Excellent");
  EXPECT_EQ(r.column_scores.size(), 20u);
  EXPECT_EQ(r.matrix_columns.size(), 20u);
  EXPECT_EQ(r.pair_scores.size(), 20u * 19 / 2);
  // The real table against itself is perfect.
  EvalReport self = Eval(train_);
  EXPECT_NEAR(self.quality.overall, 100, 1e-9);
  EXPECT_NEAR(self.quality.correlation.distance, 0, 1e-12);
}

TEST_F(TelcoQuality, ShufflingColumnsDropsOnlyCorrelation) {
  EvalReport held = Eval(test_);
  EvalReport shuffled = Eval(ShuffleColumns(test_, 9));
  // Same values per column: identical distributions, per column too.
  EXPECT_NEAR(shuffled.quality.distribution.score, held.quality.distribution.score, 1e-9);
  for (size_t c = 0; c < held.column_scores.size(); ++c)
    EXPECT_NEAR(shuffled.column_scores[c].js_distance, held.column_scores[c].js_distance, 1e-12);
  EXPECT_LT(shuffled.quality.correlation.score, held.quality.correlation.score - 40);
  EXPECT_LT(shuffled.quality.deep_structure.score, held.quality.deep_structure.score - 20);
  EXPECT_LT(shuffled.quality.overall, held.quality.overall - 20);
  // The strongest real association (phone_service / multiple_lines, Theil's U) is gone.
  double worst = 0;
  for (const PairScore& p : shuffled.pair_scores) worst = std::max(worst, p.abs_diff);
  EXPECT_GT(worst, 0.5);
}

TEST_F(TelcoQuality, UniformRandomColumnsScoreLow) {
  EvalReport held = Eval(test_);
  EvalReport uni = Eval(UniformRandomColumns(train_, test_.num_rows(), 3));
  EXPECT_LT(uni.quality.overall, 60);
  EXPECT_LT(uni.quality.distribution.score, held.quality.distribution.score - 10);
  EXPECT_LT(uni.quality.correlation.score, 40);
  // Skewed numeric columns suffer most: total_charges is far from uniform.
  for (const ColumnScore& c : uni.column_scores)
    if (c.name == "total_charges") {
      EXPECT_LT(c.score, 75);
    }
}

// ---- matching, errors, privacy, outputs ----

Table Small(const std::vector<std::string>& names,
            const std::vector<std::vector<std::string>>& cols, const char* src) {
  Table t;
  t.source = src;
  for (size_t i = 0; i < names.size(); ++i) t.AddColumn(names[i], cols[i]);
  t.InferTypes();
  return t;
}

TEST(Evaluate, ReportsMissingAndExtraColumns) {
  Table real = Small({"a", "b", "c"}, {{"1", "2", "3"}, {"x", "y", "x"}, {"p", "q", "p"}}, "r");
  Table synth = Small({"b", "a", "z"}, {{"x", "x", "y"}, {"1", "3", "3"}, {"0", "0", "0"}}, "s");
  EvalOptions opt;
  auto rep = Evaluate(real, synth, nullptr, opt);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(rep->columns, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(rep->missing_in_synthetic, (std::vector<std::string>{"c"}));
  EXPECT_EQ(rep->extra_in_synthetic, (std::vector<std::string>{"z"}));
  ASSERT_EQ(rep->warnings.size(), 2u);
  EXPECT_NE(rep->warnings[0].find("c"), std::string::npos);

  Table other = Small({"q"}, {{"1"}}, "o");
  auto none = Evaluate(real, other, nullptr, opt);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no column name in common"), std::string::npos);
  Table holdout = Small({"b"}, {{"x"}}, "h");
  auto bad_hold = Evaluate(real, synth, &holdout, opt);
  ASSERT_FALSE(bad_hold.ok());
  EXPECT_NE(bad_hold.status().message().find("h: holdout lacks column 'a'"), std::string::npos);
  Table empty = Small({"a"}, {{}}, "e");
  EXPECT_FALSE(Evaluate(real, empty, nullptr, opt).ok());
}

TEST(Evaluate, TextColumnsAreScoredByLength) {
  // One categorical and one free-text column: no association matrix (one
  // column left), the text column compared through its length histogram.
  std::vector<std::string> src, line, src2, line2;
  for (int i = 0; i < 300; ++i) {
    src.push_back(i % 3 ? "sshd" : "apache");
    line.push_back("failed login from 10.0.0." + std::to_string(i));
    src2.push_back(i % 3 ? "sshd" : "apache");
    line2.push_back(std::string(size_t(5 + i % 7), 'x') + std::to_string(i));
  }
  Table real = Small({"source", "line"}, {src, line}, "r");
  Table same = Small({"source", "line"}, {src, line}, "s");
  Table other = Small({"source", "line"}, {src2, line2}, "o");
  ASSERT_EQ(real.columns[1].type, ColumnKind::kText);
  auto r1 = Evaluate(real, same, nullptr, EvalOptions{}).ValueOrThrow();
  EXPECT_FALSE(r1.quality.correlation.available);
  EXPECT_EQ(r1.matrix_columns.size(), 1u);
  EXPECT_NEAR(r1.quality.overall, 100, 1e-9);
  EXPECT_EQ(r1.privacy.exact_copies, 300u);
  auto r2 = Evaluate(real, other, nullptr, EvalOptions{}).ValueOrThrow();
  EXPECT_NEAR(r2.column_scores[0].js_distance, 0, 1e-12);
  EXPECT_GT(r2.column_scores[1].js_distance, 0.5);  // lengths 24-26 vs 6-14
  EXPECT_EQ(r2.privacy.exact_copies, 0u);
  EXPECT_FALSE(ReportToJson(r2).empty());
  EXPECT_FALSE(ReportToHtml(r2).empty());
}

TEST(Evaluate, InvalidNumbersGetTheirOwnBin) {
  Table real = Small({"n"}, {{"1", "2", "3", "4"}}, "r");
  Table synth = Small({"n"}, {{"1", "2", "oops", "4"}}, "s");
  auto rep = Evaluate(real, synth, nullptr, EvalOptions{}).ValueOrThrow();
  ASSERT_EQ(rep.column_scores.size(), 1u);
  EXPECT_EQ(rep.column_scores[0].invalid_synthetic, 1u);
  EXPECT_GT(rep.column_scores[0].js_distance, 0.3);
  EXPECT_EQ(rep.column_scores[0].bins.back().label, "(invalid)");
  EXPECT_EQ(rep.warnings.size(), 1u);
}

TEST(Evaluate, CountsExactCopies) {
  // Real: 50 distinct rows. Synthetic: 10 copies of real rows (numbers written
  // differently: "7.0" equals "7"), 2 of them repeated, and 30 new rows.
  std::vector<std::string> rn, rc, sn, sc;
  for (int i = 0; i < 50; ++i) rn.push_back(std::to_string(i)), rc.push_back(i % 2 ? "a" : "b");
  for (int i = 0; i < 10; ++i) sn.push_back(std::to_string(i) + ".0"), sc.push_back(rc[size_t(i)]);
  for (int i = 0; i < 2; ++i) sn.push_back(sn[size_t(i)]), sc.push_back(sc[size_t(i)]);
  for (int i = 0; i < 30; ++i) sn.push_back(std::to_string(i)), sc.push_back(i % 2 ? "b" : "a");
  Table real = Small({"n", "c"}, {rn, rc}, "r"), synth = Small({"n", "c"}, {sn, sc}, "s");
  // Holdout: 5 rows, 1 of them also in training.
  Table hold =
      Small({"n", "c"}, {{"3", "100", "101", "102", "103"}, {"a", "a", "a", "a", "b"}}, "h");
  auto rep = Evaluate(real, synth, &hold, EvalOptions{}).ValueOrThrow();
  EXPECT_EQ(rep.privacy.exact_copies, 12u);
  EXPECT_NEAR(rep.privacy.exact_copy_share, 12.0 / 42, 1e-12);
  EXPECT_EQ(rep.privacy.synthetic_duplicates, 2u);
  EXPECT_EQ(rep.privacy.holdout_exact_copies, 1u);
  EXPECT_NEAR(rep.privacy.holdout_exact_copy_share, 0.2, 1e-12);
  EXPECT_FLOAT_EQ(rep.privacy.dcr_synthetic.front(), 0.0f);
}

TEST(Evaluate, PrivacySeparatesCopiesFromFreshSamples) {
  Table all = MustRead(kData + "penguins_train.csv");
  Table hold = MustRead(kData + "penguins_holdout.csv");
  Table fresh = MustRead(kData + "penguins_synth.csv");
  EvalOptions opt;
  // A fresh sample of real data: no memorisation.
  EvalReport good = Evaluate(all, fresh, &hold, opt).ValueOrThrow();
  EXPECT_EQ(good.privacy.exact_copies, 0u);
  EXPECT_NEAR(good.privacy.mia_auc, 0.5, 0.12);
  EXPECT_LT(good.privacy.share_closer_than_holdout_p05, 0.15);
  EXPECT_EQ(good.privacy.verdict, "low risk");
  EXPECT_TRUE(good.has_holdout_baseline);
  // The training rows themselves: every row is a copy, members are found.
  EvalReport copy = Evaluate(all, all, &hold, opt).ValueOrThrow();
  EXPECT_EQ(copy.privacy.exact_copies, all.num_rows());
  EXPECT_GT(copy.privacy.mia_auc, 0.9);
  EXPECT_GT(copy.privacy.mia_advantage, 0.8);
  EXPECT_NEAR(copy.privacy.dcr_synthetic_median, 0.0, 1e-9);
  EXPECT_EQ(copy.privacy.verdict, "high risk");
  EXPECT_NE(copy.verdict.find("high risk"), std::string::npos);
}

TEST(Evaluate, JsonCarriesEveryScore) {
  Table train = MustRead(kData + "penguins_train.csv");
  Table hold = MustRead(kData + "penguins_holdout.csv");
  Table synth = MustRead(kData + "penguins_synth.csv");
  EvalReport r = Evaluate(train, synth, &hold, EvalOptions{}).ValueOrThrow();
  auto j = nlohmann::json::parse(ReportToJson(r));
  EXPECT_DOUBLE_EQ(j["quality"]["overall"].get<double>(), r.quality.overall);
  EXPECT_DOUBLE_EQ(j["quality"]["field_correlation_stability"]["score"].get<double>(),
                   r.quality.correlation.score);
  EXPECT_DOUBLE_EQ(j["quality"]["deep_structure_stability"]["distance"].get<double>(),
                   r.quality.deep_structure.distance);
  EXPECT_DOUBLE_EQ(j["holdout_baseline"]["overall"].get<double>(), r.holdout_baseline.overall);
  ASSERT_EQ(j["column_scores"].size(), r.column_scores.size());
  for (size_t c = 0; c < r.column_scores.size(); ++c) {
    const auto& jc = j["column_scores"][c];
    EXPECT_EQ(jc["name"], r.column_scores[c].name);
    EXPECT_DOUBLE_EQ(jc["js_distance"].get<double>(), r.column_scores[c].js_distance);
    if (r.column_scores[c].type == ColumnKind::kNumeric)
      EXPECT_DOUBLE_EQ(jc["ks_complement"].get<double>(), r.column_scores[c].ks_complement);
    else
      EXPECT_DOUBLE_EQ(jc["tv_complement"].get<double>(), r.column_scores[c].tv_complement);
  }
  const size_t k = r.matrix_columns.size();
  EXPECT_EQ(j["correlation"]["real"].size(), k);
  EXPECT_EQ(j["correlation"]["pairs"].size(), k * (k - 1) / 2);
  EXPECT_EQ(j["privacy"]["exact_copies"].get<size_t>(), r.privacy.exact_copies);
  EXPECT_DOUBLE_EQ(j["privacy"]["membership_inference"]["auc"].get<double>(), r.privacy.mia_auc);
  EXPECT_DOUBLE_EQ(j["privacy"]["dcr"]["holdout_median"].get<double>(),
                   r.privacy.dcr_holdout_median);
  EXPECT_EQ(j["verdict"], r.verdict);
}

TEST(Evaluate, HtmlIsSelfContained) {
  Table train = MustRead(kData + "penguins_train.csv");
  Table hold = MustRead(kData + "penguins_holdout.csv");
  Table synth = MustRead(kData + "penguins_synth.csv");
  synth.columns[0].values[0] = "<script>alert(1)</script>";  // must be escaped
  EvalReport r = Evaluate(train, synth, &hold, EvalOptions{}).ValueOrThrow();
  std::string h = ReportToHtml(r);
  EXPECT_EQ(h.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(h.find("<script"), std::string::npos);
  EXPECT_NE(h.find("&lt;script&gt;"), std::string::npos);
  for (const char* ext : {"http://", "https://", "src=", "href=", "@import", "url("})
    EXPECT_EQ(h.find(ext), std::string::npos) << ext;
  // One bar chart per column, three heatmaps, two scatter plots, DCR + ROC.
  size_t svgs = 0;
  for (size_t p = h.find("<svg"); p != std::string::npos; p = h.find("<svg", p + 1)) ++svgs;
  const size_t columns = r.column_scores.size();
  EXPECT_GE(svgs, columns + 3 + 2 + 2);
  EXPECT_NE(h.find("Synthetic quality score"), std::string::npos);
  EXPECT_NE(h.find("membership inference"), std::string::npos);
  EXPECT_NE(h.find("</html>"), std::string::npos);
}

TEST(Evaluate, RunEvaluateWritesFiles) {
  std::string dir = TempDir("run");
  EvaluateArgs args;
  args.real_path = kData + "penguins_train.csv";
  args.synthetic_path = kData + "penguins_synth.csv";
  args.holdout_path = kData + "penguins_holdout.csv";
  args.report_path = dir + "/report.html";
  args.json_path = dir + "/scores.json";
  std::string text;
  Status s = RunEvaluate(args, &text);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(text.find("Synthetic quality score"), std::string::npos);
  EXPECT_GT(fs::file_size(args.report_path), 10000u);
  std::ifstream jf(args.json_path);
  auto j = nlohmann::json::parse(jf);
  EXPECT_GT(j["quality"]["overall"].get<double>(), 60);
  // The files exist now: refused before anything is read, left as they are.
  const auto json_size = fs::file_size(args.json_path);
  Status again = RunEvaluate(args, &text);
  EXPECT_EQ(again.code(), Code::kAlreadyExists);
  EXPECT_NE(again.message().find("pass --overwrite"), std::string::npos) << again.ToString();
  EXPECT_EQ(fs::file_size(args.json_path), json_size);
  args.overwrite = true;
  EXPECT_TRUE(RunEvaluate(args, &text).ok());
  args.synthetic_path = dir + "/missing.csv";
  Status bad = RunEvaluate(args, &text);
  EXPECT_EQ(bad.code(), Code::kNotFound);
  EXPECT_NE(bad.message().find("missing.csv"), std::string::npos);
  fs::remove_all(dir);
}

// ---- SDMetrics cross-check ----
// The cases: four bundled tables, each split 80/20 (near the ceiling) and
// against uniform random columns (far from it). The committed golden file
// tests/data/golden/sdmetrics.json holds SDMetrics' KSComplement and
// TVComplement for each column of each case (scripts/make_golden.sh writes it
// where sdmetrics is installed); every run compares against it. Where python3
// has sdmetrics the live comparison runs too.

struct SdmCase {
  std::string real, synthetic;  // CSV files
  EvalReport report;
};

std::vector<SdmCase> SdmCases(const std::string& dir) {
  std::vector<SdmCase> cases;
  auto add = [&](const Table& real, const Table& synth) {
    SdmCase c;
    std::string base = dir + "/" + std::to_string(cases.size());
    c.real = base + "_real.csv";
    c.synthetic = base + "_synth.csv";
    EXPECT_TRUE(WriteTable(real, c.real, ',').ok());
    EXPECT_TRUE(WriteTable(synth, c.synthetic, ',').ok());
    EvalOptions opt;
    opt.privacy = false;
    c.report = Evaluate(real, synth, nullptr, opt).ValueOrThrow();
    std::ofstream(base + ".json") << ReportToJson(c.report);
    cases.push_back(std::move(c));
  };
  for (const std::string& path :
       {std::string(DS_SOURCE_DIR) + "/examples/telco_churn_2k.csv",
        std::string(DS_TEST_DATA) + "/datasets/lending_club_400.csv.gz",
        std::string(DS_TEST_DATA) + "/datasets/ames_600.csv.gz",
        std::string(DS_TEST_DATA) + "/datasets/penguins.csv"}) {
    Table t = MustRead(path);
    Table train, test;
    SplitTable(t, 0.8, 42, &train, &test);
    add(train, test);
    add(train, UniformRandomColumns(train, test.num_rows(), 5));
  }
  return cases;
}

// FNV-1a 64 of a file's bytes, as scripts/sdmetrics_crosscheck.py computes it.
std::string Fingerprint(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

double Spearman(const std::vector<double>& a, const std::vector<double>& b) {
  auto ranks = [](const std::vector<double>& v) {
    std::vector<size_t> order(v.size());
    for (size_t i = 0; i < v.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return v[x] < v[y]; });
    std::vector<double> r(v.size());
    for (size_t i = 0; i < order.size();) {
      size_t j = i;
      while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
      for (size_t k = i; k <= j; ++k) r[order[k]] = (double(i) + double(j)) / 2;
      i = j + 1;
    }
    return r;
  };
  std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = double(a.size());
  double ma = 0, mb = 0, cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < a.size(); ++i) ma += ra[i] / n, mb += rb[i] / n;
  for (size_t i = 0; i < a.size(); ++i) {
    cov += (ra[i] - ma) * (rb[i] - mb);
    va += (ra[i] - ma) * (ra[i] - ma);
    vb += (rb[i] - mb) * (rb[i] - mb);
  }
  return cov / std::sqrt(va * vb);
}

TEST(SdMetrics, ComplementsMatchCommittedGolden) {
  const std::string golden_path = std::string(DS_TEST_DATA) + "/golden/sdmetrics.json";
  std::ifstream gf(golden_path);
  ASSERT_TRUE(gf.good()) << golden_path;
  const auto golden = nlohmann::json::parse(gf);
  const double tol = golden.at("tolerance").get<double>();
  EXPECT_LE(tol, 1e-6);
  std::string dir = TempDir("sdm_golden");
  std::vector<SdmCase> cases = SdmCases(dir);
  ASSERT_EQ(golden.at("cases").size(), cases.size()) << "rerun scripts/make_golden.sh";
  std::vector<double> ours, theirs;
  size_t compared = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& g = golden["cases"][i];
    SCOPED_TRACE("case " + std::to_string(i));
    // A different input (a changed split, writer or fixture) makes the golden stale.
    ASSERT_EQ(g.at("real_fnv64").get<std::string>(), Fingerprint(cases[i].real))
        << "inputs changed: rerun scripts/make_golden.sh";
    ASSERT_EQ(g.at("synthetic_fnv64").get<std::string>(), Fingerprint(cases[i].synthetic));
    size_t comparable = 0;
    for (const ColumnScore& c : cases[i].report.column_scores) {
      if (c.type == ColumnKind::kText) continue;
      ++comparable;
      const auto it = std::find_if(g.at("columns").begin(), g.at("columns").end(),
                                   [&](const auto& x) { return x.at("name") == c.name; });
      ASSERT_NE(it, g.at("columns").end()) << c.name << " missing from the golden file";
      const bool numeric = c.type == ColumnKind::kNumeric;
      EXPECT_EQ(it->at("metric").get<std::string>(), numeric ? "KSComplement" : "TVComplement")
          << c.name;
      const double ref = it->at("value").get<double>();
      const double mine = numeric ? c.ks_complement : c.tv_complement;
      EXPECT_NEAR(mine, ref, tol) << c.name;
      ours.push_back(c.score);
      theirs.push_back(ref);
      ++compared;
    }
    EXPECT_EQ(comparable, g.at("columns").size());
  }
  // 20 + 23 + 74 + 8 columns, twice; text columns have no SDMetrics counterpart.
  EXPECT_GT(compared, 200u);
  // The Jensen-Shannon column scores rank the columns like SDMetrics' complements.
  const double rho = Spearman(ours, theirs);
  std::cout << "sdmetrics golden: " << compared << " columns within " << tol
            << ", rank agreement Spearman " << rho << "\n";
  EXPECT_GE(rho, golden.at("min_rank_correlation").get<double>());
  fs::remove_all(dir);
}

// Live, where python3 has sdmetrics. With DS_WRITE_GOLDEN=PATH set, the script
// also writes the golden file there (scripts/make_golden.sh).
TEST(SdMetrics, KsAndTvComplementsAgreeLive) {
  if (std::system("python3 -c 'import sdmetrics, pandas' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 with sdmetrics not available (the golden comparison ran instead)";
  std::string dir = TempDir("sdm");
  std::string cmd =
      std::string("python3 ") + DS_SOURCE_DIR + "/scripts/sdmetrics_crosscheck.py --tolerance 1e-6";
  if (const char* out = std::getenv("DS_WRITE_GOLDEN")) cmd += std::string(" --write-golden ") + out;
  size_t n = 0;
  for (const SdmCase& c : SdmCases(dir)) {
    cmd += " --real " + c.real + " --synthetic " + c.synthetic + " --json " + dir + "/" +
           std::to_string(n++) + ".json";
  }
  cmd += " > " + dir + "/out.txt 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream out(dir + "/out.txt");
  std::stringstream ss;
  ss << out.rdbuf();
  std::string text = ss.str();
  size_t last = text.rfind('\n', text.size() >= 2 ? text.size() - 2 : 0);
  size_t rank = text.find("rank agreement");
  if (rank != std::string::npos)
    std::cout << "sdmetrics_crosscheck: " << text.substr(rank, text.find('\n', rank) - rank)
              << "\n";
  std::cout << "sdmetrics_crosscheck: " << text.substr(last == std::string::npos ? 0 : last + 1);
  EXPECT_EQ(rc, 0) << ss.str();
  EXPECT_NE(ss.str().find(" 0 failed"), std::string::npos) << ss.str();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ds
