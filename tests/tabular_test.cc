// Tests for src/tabular: association measures, batch planning, tabular.json,
// table I/O, and end-to-end training / generation with tiny networks
// (conditioning gain, seed fields, value forms, per-batch invalid budget).
#include "tabular/tabular.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "io/csv.h"
#include "tabular/association.h"
#include "tabular/plan.h"
#include "util/fs.h"
#include "util/rng.h"

namespace ds {
namespace {

using Rows = std::vector<std::vector<std::string>>;

class TempDir {
 public:
  TempDir() {
    char t[] = "/tmp/tabular_test_XXXXXX";
    path_ = ::mkdtemp(t);
  }
  ~TempDir() { (void)RemoveTree(path_); }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void WriteCsv(const std::string& path, const std::vector<std::string>& header, const Rows& rows,
              char d = ',') {
  std::string s;
  AppendCsvRecord(&s, header, d);
  for (const auto& r : rows) AppendCsvRecord(&s, r, d);
  ASSERT_TRUE(WriteFileAtomic(path, s).ok());
}

// Tiny, fast networks (char tokenizer, 1 thread per batch process).
Config TinyConfig(int epochs) {
  Config c;
  // String keys through Config::Set (assigning literals here trips GCC 12's -Wrestrict).
  EXPECT_TRUE(c.Set("tokenizer", "char").ok());
  EXPECT_TRUE(c.Set("field_delimiter", ",").ok());
  c.epochs = epochs;
  c.embedding_dim = 16;
  c.rnn_units = 32;
  c.num_layers = 1;
  c.batch_size = 8;
  c.seq_length = 32;
  c.learning_rate = 0.02;
  c.early_stopping = false;
  c.validation_split = false;
  c.seed = 11;
  c.predict_batch_size = 16;
  return c;
}

// ---------------------------------------------------------------------------
// Association measures: closed-form cases.

TEST(AssociationTest, PearsonClosedForms) {
  std::vector<double> x, y, z;
  for (int i = 0; i < 100; ++i) {
    x.push_back(i);
    y.push_back(-3.0 * i + 7);
    z.push_back((i % 2) ? 1.0 : -1.0);  // orthogonal to a symmetric ramp? no: check below
  }
  EXPECT_NEAR(AbsPearson(x, y), 1.0, 1e-12);
  // Symmetric design: x' = i - 49.5 over pairs (i, 99 - i) has zero covariance with
  // w = (i - 49.5)^2.
  std::vector<double> xc, w;
  for (int i = 0; i < 100; ++i) {
    xc.push_back(i - 49.5);
    w.push_back((i - 49.5) * (i - 49.5));
  }
  EXPECT_NEAR(AbsPearson(xc, w), 0.0, 1e-12);
  // Missing values are skipped pairwise.
  std::vector<double> xm = x, ym = y;
  xm[3] = NAN;
  ym[50] = NAN;
  EXPECT_NEAR(AbsPearson(xm, ym), 1.0, 1e-12);
  // Constant side: 0.
  EXPECT_EQ(AbsPearson(x, std::vector<double>(100, 2.0)), 0.0);
  // Known value: r of (1,2,3,4,5) and (2,1,4,3,5) = 0.8.
  EXPECT_NEAR(AbsPearson({1, 2, 3, 4, 5}, {2, 1, 4, 3, 5}), 0.8, 1e-12);
}

TEST(AssociationTest, CramersVClosedForms) {
  std::vector<int32_t> a, b, c;
  for (int i = 0; i < 400; ++i) {
    a.push_back(i % 4);
    b.push_back(i % 4);        // identical
    c.push_back((i / 4) % 3);  // balanced, independent of a (every pair equally often)
  }
  // Identical: phi2 = 3; with the bias correction V = sqrt((3 - 9/399) / (4 - 9/399 - 1)) = 1.
  EXPECT_NEAR(CramersV(a, 4, b, 4), 1.0, 1e-12);
  // Exactly independent table: chi2 = 0 -> 0 (the correction is clamped).
  EXPECT_NEAR(CramersV(a, 4, c, 3), 0.0, 1e-12);
  // 2x2 hand computation: [[30, 10], [10, 30]], n = 80: chi2 = 20, phi2 = 0.25,
  // phi2c = 0.25 - 1/79, rc = cc = 2 - 1/79 -> V = sqrt((0.25 - 1/79) / (1 - 1/79)).
  std::vector<int32_t> p, q;
  auto add = [&](int x, int y, int n) {
    for (int i = 0; i < n; ++i) p.push_back(x), q.push_back(y);
  };
  add(0, 0, 30), add(0, 1, 10), add(1, 0, 10), add(1, 1, 30);
  EXPECT_NEAR(CramersV(p, 2, q, 2), std::sqrt((0.25 - 1.0 / 79) / (1 - 1.0 / 79)), 1e-12);
}

TEST(AssociationTest, CorrelationRatioClosedForms) {
  std::vector<int32_t> g;
  std::vector<double> exact, flat;
  for (int i = 0; i < 90; ++i) {
    g.push_back(i % 3);
    exact.push_back(10.0 * (i % 3));    // determined by the group
    flat.push_back(double(i / 3 % 5));  // same distribution in every group
  }
  EXPECT_NEAR(CorrelationRatio(g, 3, exact), 1.0, 1e-12);
  EXPECT_NEAR(CorrelationRatio(g, 3, flat), 0.0, 1e-12);
  // Hand computation: groups {1, 3} and {5, 7}: mean 4, between = 2*(2-4)^2 + 2*(6-4)^2 = 16,
  // total = 9 + 1 + 1 + 9 = 20 -> eta = sqrt(0.8).
  EXPECT_NEAR(CorrelationRatio({0, 0, 1, 1}, 2, {1, 3, 5, 7}), std::sqrt(0.8), 1e-12);
}

TEST(AssociationTest, ProfilesFollowTheColumnRules) {
  std::vector<std::string> header = {"n", "cat", "id", "dec"};
  Rows rows;
  for (int i = 0; i < 200; ++i)
    rows.push_back({i % 7 == 0 ? "" : std::to_string(i), i % 2 ? "yes" : "no",
                    fmt::format("user{}", i), fmt::format("{}.5", i % 10)});
  ColumnRules rules = LearnColumnRules(header, rows);
  auto p = ProfileColumns(rules, rows);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].kind, AssocKind::kNumeric);
  EXPECT_TRUE(std::isnan(p[0].num[0]));
  EXPECT_EQ(p[0].num[1], 1.0);
  EXPECT_EQ(p[1].kind, AssocKind::kCategorical);
  EXPECT_EQ(p[1].levels, 2);
  EXPECT_EQ(p[2].kind, AssocKind::kNone);  // unique ids: free text
  EXPECT_EQ(p[3].kind, AssocKind::kNumeric);
  // Sampling keeps max_rows evenly spaced rows.
  ProfileOptions small;
  small.max_rows = 50;
  auto q = ProfileColumns(rules, rows, small);
  EXPECT_EQ(q[0].num.size(), 50u);
  EXPECT_EQ(q[0].num[1], 4.0);  // row 4
  auto m = AssociationMatrix(p);
  EXPECT_EQ(m[0], 1.0);
  EXPECT_EQ(m[1 * 4 + 2], 0.0);  // with a free-text column
  EXPECT_EQ(m[1 * 4 + 3], m[3 * 4 + 1]);
}

// ---------------------------------------------------------------------------
// Planning

std::vector<PlanColumn> Columns(int k, ColumnType type = ColumnType::kCategory) {
  std::vector<PlanColumn> c(static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) {
    c[size_t(i)].name = fmt::format("c{}", i);
    c[size_t(i)].type = type;
  }
  return c;
}

std::vector<double> Identity(int k) {
  std::vector<double> a(size_t(k * k), 0.0);
  for (int i = 0; i < k; ++i) a[size_t(i * k + i)] = 1;
  return a;
}

void Relate(std::vector<double>* a, int k, int i, int j, double v) {
  (*a)[size_t(i * k + j)] = (*a)[size_t(j * k + i)] = v;
}

std::vector<std::string> Names(std::initializer_list<int> ids) {
  std::vector<std::string> v;
  for (int i : ids) v.push_back(fmt::format("c{}", i));
  return v;
}

TEST(PlanTest, OrderGroupingIsTheReference) {
  TabularConfig cfg;
  cfg.grouping = "order";
  cfg.condition_columns = 0;
  auto b = PlanBatches(Columns(35), Identity(35), cfg);
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(b->size(), 3u);
  EXPECT_EQ((*b)[0].columns.size(), 15u);
  EXPECT_EQ((*b)[1].columns.size(), 15u);
  EXPECT_EQ((*b)[2].columns.size(), 5u);
  EXPECT_EQ((*b)[1].columns[0], "c15");
  EXPECT_EQ((*b)[2].dir, "batch_2");
}

TEST(PlanTest, AutoGroupingPutsRelatedColumnsTogether) {
  const int k = 6;
  auto a = Identity(k);
  Relate(&a, k, 0, 3, 0.9);
  Relate(&a, k, 1, 4, 0.8);
  Relate(&a, k, 2, 5, 0.7);
  Relate(&a, k, 0, 1, 0.1);
  TabularConfig cfg;
  cfg.batch_columns = 2;
  cfg.condition_columns = 0;
  auto b = PlanBatches(Columns(k), a, cfg);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->size(), 3u);
  EXPECT_EQ((*b)[0].columns, Names({0, 3}));
  EXPECT_EQ((*b)[1].columns, Names({1, 4}));
  EXPECT_EQ((*b)[2].columns, Names({2, 5}));
  // Balanced sizes: 7 columns in batches of at most 3 -> 3, 2, 2 (not 3, 3, 1).
  cfg.batch_columns = 3;
  auto c = PlanBatches(Columns(7), Identity(7), cfg);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->size(), 3u);
  EXPECT_EQ((*c)[0].columns.size(), 3u);
  EXPECT_EQ((*c)[1].columns.size(), 2u);
  EXPECT_EQ((*c)[2].columns.size(), 2u);
}

TEST(PlanTest, SeedColumnsLeadBatchZero) {
  for (std::string grouping : {"auto", "order"}) {
    TabularConfig cfg;
    cfg.grouping = grouping;
    cfg.batch_columns = 3;
    cfg.seed_columns = {"c7", "c4"};
    auto b = PlanBatches(Columns(8), Identity(8), cfg);
    ASSERT_TRUE(b.ok()) << b.status().message();
    ASSERT_GE((*b)[0].columns.size(), 2u);
    EXPECT_EQ((*b)[0].columns[0], "c7") << grouping;
    EXPECT_EQ((*b)[0].columns[1], "c4") << grouping;
  }
  TabularConfig cfg;
  cfg.seed_columns = {"nope"};
  auto e = PlanBatches(Columns(3), Identity(3), cfg);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("no column 'nope'"), std::string::npos);
  cfg.seed_columns = {"c1", "c1"};
  EXPECT_FALSE(PlanBatches(Columns(3), Identity(3), cfg).ok());
}

TEST(PlanTest, ExplicitHeaderGroups) {
  TabularConfig cfg;
  cfg.condition_columns = 0;
  cfg.batch_columns = 2;
  cfg.header_groups = {{"c3", "c1"}, {"c0"}};
  cfg.seed_columns = {"c5"};
  auto b = PlanBatches(Columns(6), Identity(6), cfg);
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(b->size(), 3u);                      // two groups, then c2 c4 in one batch of 2
  EXPECT_EQ((*b)[0].columns, Names({5, 3, 1}));  // seed column added in front
  EXPECT_EQ((*b)[1].columns, Names({0}));
  EXPECT_EQ((*b)[2].columns, Names({2, 4}));
  // A seed column in a later group.
  cfg.seed_columns = {"c0"};
  auto e = PlanBatches(Columns(6), Identity(6), cfg);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("must be in the first group"), std::string::npos);
  // A column in two groups; an unknown column.
  cfg.seed_columns = {};
  cfg.header_groups = {{"c1"}, {"c1"}};
  EXPECT_FALSE(PlanBatches(Columns(6), Identity(6), cfg).ok());
  cfg.header_groups = {{"zz"}};
  EXPECT_FALSE(PlanBatches(Columns(6), Identity(6), cfg).ok());
}

TEST(PlanTest, ConditioningChoosesCoveringRelatedColumns) {
  const int k = 6;
  auto a = Identity(k);
  // Batch 0 = c0 c1 c2 (header groups), batch 1 = c3 c4 c5.
  Relate(&a, k, 0, 3, 0.9);  // c0 explains c3
  Relate(&a, k, 0, 4, 0.2);
  Relate(&a, k, 1, 3, 0.85);  // c1 is redundant with c0 for c3
  Relate(&a, k, 2, 5, 0.6);   // c2 explains c5
  TabularConfig cfg;
  cfg.header_groups = {{"c0", "c1", "c2"}, {"c3", "c4", "c5"}};
  cfg.condition_columns = 3;
  auto b = PlanBatches(Columns(k), a, cfg);
  ASSERT_TRUE(b.ok());
  // c0 first (gain 1.1), then c2 (0.6); c1 adds only 0.0 over c0's cover: below min gain.
  // The most useful one is placed last, next to the batch's columns, which follow by
  // decreasing relation to the conditioning columns.
  EXPECT_EQ((*b)[1].condition, Names({2, 0}));
  EXPECT_EQ((*b)[1].columns, Names({3, 5, 4}));
  EXPECT_TRUE((*b)[0].condition.empty());
  cfg.condition_columns = 1;
  EXPECT_EQ(PlanBatches(Columns(k), a, cfg)->at(1).condition, Names({0}));
  // Free-text columns are never conditioning columns.
  auto cols = Columns(k);
  cols[0].type = ColumnType::kText;
  cfg.condition_columns = 3;
  EXPECT_EQ(PlanBatches(cols, a, cfg)->at(1).condition, Names({2, 1}));
  // A numeric column whose batch can write a digit batch 1 never saw is not a candidate.
  cols = Columns(k, ColumnType::kInteger);
  for (auto& c : cols)
    for (char ch : std::string("123")) c.ascii.set(size_t(ch));
  cols[1].ascii.set('9');  // batch 0 can write '9', batch 1 never saw it
  // c0 and c2 could come out with a '9'; c1 holds '9' itself, so as a
  // conditioning column it brings the '9' into batch 1's data.
  EXPECT_EQ(PlanBatches(cols, a, cfg)->at(1).condition, Names({1}));
  cols[4].ascii.set('9');
  EXPECT_EQ(PlanBatches(cols, a, cfg)->at(1).condition, Names({2, 0}));
}

TEST(PlanTest, ParseHeaderGroupsAndLists) {
  auto g = ParseHeaderGroups(" a, b ;c");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, (std::vector<std::vector<std::string>>{{"a", "b"}, {"c"}}));
  auto j = ParseHeaderGroups(R"([["x,y", "z"], ["w;v"]])");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)[0][0], "x,y");
  EXPECT_EQ((*j)[1][0], "w;v");
  EXPECT_FALSE(ParseHeaderGroups("a;;b").ok());
  EXPECT_FALSE(ParseHeaderGroups("a,,b").ok());
  EXPECT_FALSE(ParseHeaderGroups("[[1]]").ok());
  EXPECT_TRUE(ParseHeaderGroups("")->empty());
  EXPECT_EQ(ParseColumnList("a, b").value(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ParseColumnList(R"(["a,b"])").value(), (std::vector<std::string>{"a,b"}));
}

TEST(PlanTest, SpecJsonRoundTripAndChecks) {
  TabularSpec s;
  s.header = {"a", "b", "c"};
  s.delimiter = ';';
  s.batch_delimiter = '\x1f';
  s.rows = 10;
  s.grouping = "auto";
  s.batch_columns = 2;
  s.condition_columns = 1;
  s.seed_columns = {"b"};
  s.seed = 42;
  s.batches = {{"batch_0", {}, {"b", "a"}}, {"batch_1", {"a"}, {"c"}}};
  ASSERT_TRUE(s.Check("t").ok());
  auto r = TabularSpec::FromJson(s.ToJson(), "t");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->ToJson(), s.ToJson());
  EXPECT_EQ(r->batch_delimiter, '\x1f');
  EXPECT_EQ(r->seedable(), (std::vector<std::string>{"b", "a"}));
  auto broken = [&](auto edit) {
    auto j = s.ToJson();
    edit(j);
    return TabularSpec::FromJson(j, "t.json");
  };
  EXPECT_EQ(broken([](auto& j) { j["batches"][1]["dir"] = "../x"; }).status().code(),
            Code::kCorrupt);
  EXPECT_FALSE(
      broken([](auto& j) { j["batches"][1]["columns"] = {"a"}; }).ok());  // twice, c missing
  EXPECT_FALSE(broken([](auto& j) { j["batches"][0]["condition"] = {"c"}; }).ok());  // later batch
  EXPECT_FALSE(broken([](auto& j) { j["seed_columns"] = {"a"}; }).ok());  // not leading batch 0
  EXPECT_FALSE(broken([](auto& j) { j["version"] = 99; }).ok());
  EXPECT_FALSE(broken([](auto& j) { j["delimiter"] = "\""; }).ok());
  EXPECT_FALSE(broken([](auto& j) { j.erase("header"); }).ok());
}

TEST(PlanTest, AmesIsCutIntoRelatedBatches) {
  auto t = ReadRowTable(std::string(DS_TEST_DATA) + "/datasets/ames_600.csv.gz", ',');
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->header.size(), 74u);
  ColumnRules rules = LearnColumnRules(t->header, t->rows);
  auto assoc = AssociationMatrix(ProfileColumns(rules, t->rows));
  std::vector<PlanColumn> cols(74);
  for (size_t c = 0; c < 74; ++c) {
    cols[c].name = t->header[c];
    cols[c].type = rules.columns()[c].type;
    for (const auto& r : t->rows)
      for (unsigned char ch : r[c])
        if (ch < 128) cols[c].ascii.set(ch);
  }
  TabularConfig cfg;
  auto b = PlanBatches(cols, assoc, cfg);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->size(), 5u);
  std::map<std::string, size_t> batch_of;
  for (size_t i = 0; i < b->size(); ++i) {
    EXPECT_LE((*b)[i].columns.size(), 15u);
    EXPECT_GE((*b)[i].columns.size(), 14u);
    for (const auto& c : (*b)[i].columns) batch_of[c] = i;
    if (i > 0) {
      EXPECT_FALSE((*b)[i].condition.empty()) << "batch " << i;
    }
    EXPECT_LE((*b)[i].condition.size(), 3u);
  }
  EXPECT_EQ(batch_of.size(), 74u);
  EXPECT_EQ((*b)[0].columns[0], "MS_SubClass");  // the first column stays seedable
  // Strongly related pairs share a batch.
  EXPECT_EQ(batch_of["Garage_Cars"], batch_of["Garage_Area"]);
  EXPECT_EQ(batch_of["Exterior_1st"], batch_of["Exterior_2nd"]);
  // The within-batch share of total association beats header-order batches.
  auto within = [&](const std::vector<TabularBatch>& bs) {
    std::map<std::string, size_t> idx, bo;
    for (size_t c = 0; c < 74; ++c) idx[t->header[c]] = c;
    for (size_t i = 0; i < bs.size(); ++i)
      for (const auto& c : bs[i].columns) bo[c] = i;
    double in = 0, all = 0;
    for (size_t i = 0; i < 74; ++i)
      for (size_t j = i + 1; j < 74; ++j) {
        double a = assoc[i * 74 + j];
        all += a * a;
        if (bo[t->header[i]] == bo[t->header[j]]) in += a * a;
      }
    return in / all;
  };
  cfg.grouping = "order";
  double ordered = within(PlanBatches(cols, assoc, cfg).value());
  double automatic = within(*b);
  EXPECT_GT(automatic, ordered + 0.05) << automatic << " vs " << ordered;
}

// ---------------------------------------------------------------------------
// Row table I/O

TEST(TableTest, ReadWriteRoundTripAndErrors) {
  TempDir dir;
  std::vector<std::string> header = {"code", "note", "x"};
  Rows rows = {{"007", "a, b", "1.50"}, {"", "say \"hi\"", ""}, {"012", "two\nlines", "-3"}};
  WriteCsv(dir / "t.csv", header, rows);
  auto t = ReadRowTable(dir / "t.csv", ',');
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->header, header);
  EXPECT_EQ(t->rows, rows);
  ASSERT_TRUE(WriteRowTable(dir / "u.csv", t->header, t->rows, ';').ok());
  auto u = ReadRowTable(dir / "u.csv", ';');
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->rows, rows);
  EXPECT_EQ(ReadRowTable(dir / "t.csv", ',', 2).value().rows.back(), rows[1]);  // max_rows

  ASSERT_TRUE(WriteFileAtomic(dir / "ragged.csv", "a,b\n1,2\n3\n").ok());
  auto r = ReadRowTable(dir / "ragged.csv", ',');
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ragged.csv:3: 1 fields, the header has 2"),
            std::string::npos)
      << r.status().message();
  ASSERT_TRUE(WriteFileAtomic(dir / "dup.csv", "a,a\n1,2\n").ok());
  EXPECT_NE(ReadRowTable(dir / "dup.csv", ',').status().message().find("duplicate column"),
            std::string::npos);
  ASSERT_TRUE(WriteFileAtomic(dir / "empty.csv", "a,b\n").ok());
  EXPECT_FALSE(ReadRowTable(dir / "empty.csv", ',').ok());
}

TEST(TableTest, SeedFieldParsing) {
  auto s = ParseSeedFields({"species=Adelie", "note=a=b"});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->columns, (std::vector<std::string>{"species", "note"}));
  EXPECT_EQ(s->rows[0], (std::vector<std::string>{"Adelie", "a=b"}));  // first '=' splits
  EXPECT_FALSE(s->per_row);
  EXPECT_FALSE(ParseSeedFields({"novalue"}).ok());
  EXPECT_FALSE(ParseSeedFields({"=x"}).ok());
  EXPECT_FALSE(ParseSeedFields({"a=1", "a=2"}).ok());
  auto e = ParseSeedFields({"a="});  // seeding a missing (empty) value is allowed
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->rows[0][0], "");
}

// ---------------------------------------------------------------------------
// End to end (tiny networks)

// x in {A..F} uniformly, y = lowercase(x) (a cross-batch relationship), z a
// free number.
void WritePairTable(const std::string& path, int n) {
  Rows rows;
  Philox rng(5, 0);
  for (int i = 0; i < n; ++i) {
    char x = char('A' + rng.Below(6));
    rows.push_back(
        {std::string(1, x), std::string(1, char(x - 'A' + 'a')), std::to_string(rng.Below(10))});
  }
  WriteCsv(path, {"x", "y", "z"}, rows);
}

double Agreement(const RowTable& t) {
  int ok = 0;
  for (const auto& r : t.rows)
    ok += r[1].size() == 1 && r[0].size() == 1 && r[1][0] == r[0][0] - 'A' + 'a';
  return double(ok) / double(t.rows.size());
}

class PairModel : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    WritePairTable(*dir_ / "pair.csv", 1200);
    for (int cond : {1, 0}) {
      TabularTrainOptions o;
      o.config = TinyConfig(6);
      o.tabular.header_groups = {{"x"}, {"y", "z"}};  // x and y in different batches
      o.tabular.condition_columns = cond;
      o.tabular.min_condition_gain = 0.05;
      o.input_path = *dir_ / "pair.csv";
      o.model_dir = *dir_ / (cond ? "cond" : "indep");
      auto r = TrainTabular(o, nullptr);
      ASSERT_TRUE(r.ok()) << r.status().message();
      ASSERT_EQ(r->batches.size(), 2u);
      EXPECT_EQ(r->batches[1].epochs_run, 6);
    }
  }
  static void TearDownTestSuite() { delete dir_; }
  static RowTable Generate(const std::string& model, TabularGenerateOptions o, Status* st = nullptr) {
    o.model_dir = *dir_ / model;
    o.output = *dir_ / "out.csv";
    o.overwrite = true;  // every call writes the same file
    o.parallelism = 1;
    TabularGenerateSummary sum;
    Status s = GenerateTabular(o, nullptr, &sum);
    if (st) *st = s;
    if (!st) {
      EXPECT_TRUE(s.ok()) << s.message();
    }
    if (!s.ok()) return {};
    EXPECT_EQ(sum.batches.size(), 2u);
    auto t = ReadRowTable(o.output, ',');
    EXPECT_TRUE(t.ok());
    return t.ok() ? *t : RowTable{};
  }
  static TempDir* dir_;
};
TempDir* PairModel::dir_ = nullptr;

TEST_F(PairModel, SpecDescribesTheBatches) {
  auto spec = ReadTabularSpec(*dir_ / "cond");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->header, (std::vector<std::string>{"x", "y", "z"}));
  ASSERT_EQ(spec->batches.size(), 2u);
  EXPECT_EQ(spec->batches[1].condition, (std::vector<std::string>{"x"}));
  EXPECT_EQ(spec->batch_delimiter, ',');  // no value holds a comma
  EXPECT_TRUE(IsTabularModel(*dir_ / "cond"));
  EXPECT_TRUE(LooksLikeModel(*dir_ / "cond/batch_1"));
  EXPECT_FALSE(PathExists(*dir_ / "cond/.tabular-tmp"));
  EXPECT_TRUE(ReadTabularSpec(*dir_ / "indep")->batches[1].condition.empty());
}

TEST_F(PairModel, ConditioningKeepsCrossBatchRelationships) {
  TabularGenerateOptions o;
  o.num_lines = 300;
  o.seed = 9;
  RowTable cond = Generate("cond", o);
  RowTable indep = Generate("indep", o);
  ASSERT_EQ(cond.rows.size(), 300u);
  ASSERT_EQ(indep.rows.size(), 300u);
  EXPECT_EQ(cond.header, (std::vector<std::string>{"x", "y", "z"}));  // header order restored
  double a = Agreement(cond), b = Agreement(indep);
  // Independent batches agree by chance (about 1/6).
  EXPECT_GT(a, 0.9) << a;
  EXPECT_LT(b, 0.45) << b;
  // Reproducible: the same seed gives the same table.
  RowTable again = Generate("cond", o);
  EXPECT_EQ(again.rows, cond.rows);
}

TEST_F(PairModel, SeedFields) {
  // One seed for every row.
  TabularGenerateOptions o;
  o.num_lines = 40;
  o.seed_fields = {"x=C"};
  RowTable t = Generate("cond", o);
  ASSERT_EQ(t.rows.size(), 40u);
  int lower = 0;
  for (const auto& r : t.rows) {
    EXPECT_EQ(r[0], "C");
    lower += r[1] == "c";
  }
  EXPECT_GE(lower, 34);
  // Per-row seeds: one row per seed, in order.
  WriteCsv(*dir_ / "seeds.csv", {"x"}, {{"F"}, {"A"}, {"A"}, {"D"}, {"B"}});
  TabularGenerateOptions p;
  p.seed_file = *dir_ / "seeds.csv";
  RowTable s = Generate("cond", p);
  ASSERT_EQ(s.rows.size(), 5u);
  std::string xs;
  for (const auto& r : s.rows) xs += r[0];
  EXPECT_EQ(xs, "FAADB");
  // --num-lines that disagrees with the seed rows.
  p.num_lines = 7;
  Status st;
  Generate("cond", p, &st);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  // Errors: a column that is not seedable, an unknown column, a value the rules reject.
  TabularGenerateOptions bad;
  bad.seed_fields = {"y=c"};
  Generate("cond", bad, &st);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot seed column 'y'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("--seed-columns y"), std::string::npos) << st.message();
  bad.seed_fields = {"nope=1"};
  Generate("cond", bad, &st);
  EXPECT_NE(st.message().find("no such column"), std::string::npos) << st.message();
  bad.seed_fields = {"x=Q"};
  Generate("cond", bad, &st);
  EXPECT_EQ(st.code(), Code::kInvalidInput);
  EXPECT_NE(st.message().find("'x'"), std::string::npos) << st.message();
  EXPECT_FALSE(PathExists(*dir_ / "out.csv") && false);
  bad.seed_fields = {"x=A"};
  bad.seed_file = *dir_ / "seeds.csv";
  Generate("cond", bad, &st);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
}

TEST_F(PairModel, MaxInvalidAppliesPerBatch) {
  // gen_chars = 1 truncates every record: too few fields, so every row is invalid.
  TabularGenerateOptions o;
  o.num_lines = 20;
  o.gen_chars = 1;
  o.max_invalid = 5;
  Status st;
  Generate("indep", o, &st);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kResourceExhausted);
  EXPECT_NE(st.message().find("batch 1 (y, z)"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("max-invalid"), std::string::npos) << st.message();
}

TEST_F(PairModel, RefusesToOverwrite) {
  TabularTrainOptions o;
  o.config = TinyConfig(1);
  o.input_path = *dir_ / "pair.csv";
  o.model_dir = *dir_ / "cond";
  auto r = TrainTabular(o, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kAlreadyExists);
  EXPECT_TRUE(IsTabularModel(*dir_ / "cond"));
}

TEST(TabularEndToEnd, SeedColumnsAndValueForms) {
  TempDir dir;
  // zip: codes with leading zeros; price: always two decimals; qty: integers;
  // note: text with a delimiter, quotes, a newline; opt: often missing.
  const std::vector<std::string> zips = {"00501", "02134", "07030"};
  const std::vector<std::string> notes = {"a, b", "say \"hi\"", "two\nlines", "plain"};
  Rows rows;
  Philox rng(3, 1);
  for (int i = 0; i < 900; ++i) {
    int z = int(rng.Below(3));
    rows.push_back({zips[size_t(z)], fmt::format("{}.{}0", 1 + z * 3, rng.Below(10)),
                    std::to_string(1 + rng.Below(5)), notes[rng.Below(4)],
                    rng.Below(3) == 0 ? "" : "x"});
  }
  const std::vector<std::string> header = {"zip", "price", "qty", "note", "opt"};
  WriteCsv(dir / "t.csv", header, rows);
  TabularTrainOptions o;
  o.config = TinyConfig(5);
  o.tabular.batch_columns = 2;
  o.tabular.seed_columns = {"note"};
  o.input_path = dir / "t.csv";
  o.model_dir = dir / "m";
  auto r = TrainTabular(o, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->spec.batches.size(), 3u);
  EXPECT_EQ(r->spec.batches[0].columns[0], "note");
  EXPECT_EQ(r->spec.batch_delimiter, '\x1f');  // notes hold commas

  TabularGenerateOptions g;
  g.model_dir = dir / "m";
  g.output = dir / "s.csv";
  g.overwrite = true;  // written again below
  g.num_lines = 200;
  g.seed_fields = {"note=a, b"};  // a seed value holding the table's delimiter
  TabularGenerateSummary sum;
  Status st = GenerateTabular(g, nullptr, &sum);
  ASSERT_TRUE(st.ok()) << st.message();
  auto t = ReadRowTable(dir / "s.csv", ',');
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->header, header);
  ASSERT_EQ(t->rows.size(), 200u);
  const std::regex two_decimals(R"(\d+\.\d0)");
  int price_ok = 0, empty_opt = 0;
  for (const auto& row : t->rows) {
    EXPECT_EQ(row[3], "a, b");
    EXPECT_TRUE(std::find(zips.begin(), zips.end(), row[0]) != zips.end()) << row[0];
    price_ok += std::regex_match(row[1], two_decimals);
    empty_opt += row[4].empty();
    EXPECT_TRUE(row[4].empty() || row[4] == "x");
  }
  EXPECT_GE(price_ok, 190);  // "4.50" stays "4.50", not "4.5"
  EXPECT_GT(empty_opt, 20);  // missing values stay empty fields
  EXPECT_LT(empty_opt, 130);

  // Per-row seeds through a start string of batch 0 (note, then the model's column).
  WriteCsv(dir / "seeds.csv", {"note"}, {{"two\nlines"}, {"say \"hi\""}, {"a, b"}});
  g.seed_fields.clear();
  g.seed_file = dir / "seeds.csv";
  g.num_lines.reset();
  ASSERT_TRUE(GenerateTabular(g, nullptr, &sum).ok());
  auto v = ReadRowTable(dir / "s.csv", ',');
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->rows.size(), 3u);
  EXPECT_EQ(v->rows[0][3], "two\nlines");
  EXPECT_EQ(v->rows[1][3], "say \"hi\"");
  EXPECT_EQ(v->rows[2][3], "a, b");
  g.seed_file.clear();

  // Unseeded: free text with quotes and newlines round-trips through the output.
  g.seed_fields.clear();
  g.num_lines = 300;
  ASSERT_TRUE(GenerateTabular(g, nullptr, &sum).ok());
  auto u = ReadRowTable(dir / "s.csv", ',');
  ASSERT_TRUE(u.ok());
  std::set<std::string> seen;
  for (const auto& row : u->rows) {
    EXPECT_TRUE(std::find(notes.begin(), notes.end(), row[3]) != notes.end()) << row[3];
    seen.insert(row[3]);
  }
  EXPECT_EQ(seen.size(), 4u);
}

TEST(TabularEndToEnd, FailedBatchLeavesNoModel) {
  TempDir dir;
  WriteCsv(dir / "t.csv", {"a", "b"}, {{"1", "2"}, {"3", "4"}});
  TabularTrainOptions o;
  o.config = TinyConfig(1);
  o.config.batch_size = 64;
  o.tabular.batch_columns = 1;
  o.input_path = dir / "t.csv";
  o.model_dir = dir / "m";
  auto r = TrainTabular(o, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("batch "), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("too few"), std::string::npos) << r.status().message();
  EXPECT_FALSE(PathExists(dir / "m"));
}

TEST(TabularEndToEnd, VeryWideGzipTable) {
  // santander: 202 columns, gzip input read directly; header order restored.
  TempDir dir;
  SynthesizeOptions o;
  o.train.config = TinyConfig(2);
  o.train.config.batch_size = 4;
  o.train.tabular.condition_columns = 2;
  o.train.input_path = std::string(DS_TEST_DATA) + "/datasets/santander.csv.gz";
  o.generate.output = dir / "s.csv";
  o.generate.num_lines = 8;
  o.generate.max_invalid = 100000;
  o.generate.checks = RuleChecks{};
  o.generate.checks.type = o.generate.checks.range = o.generate.checks.empty = false;
  SynthesizeSummary sum;
  Status st = Synthesize(o, nullptr, &sum);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(sum.train.spec.batches.size(), 14u);
  auto t = ReadRowTable(dir / "s.csv", ',');
  ASSERT_TRUE(t.ok());
  auto real = ReadRowTable(o.train.input_path, ',');
  EXPECT_EQ(t->header, real->header);
  EXPECT_EQ(t->rows.size(), 8u);
}

}  // namespace
}  // namespace ds
