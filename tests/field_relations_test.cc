// Order relations between numeric columns (tokenize/field_relations.h): the exact
// comparison, what is learned (and what is not: chance, ranges that imply it, too few
// rows), and the field tokenizer keeping them: every value the mask lets through obeys
// them and every value that obeys them stays reachable (exhaustive walks), CheckFields,
// save / load and corrupt files.
#include "tokenize/field_relations.h"

#include <fmt/core.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "tokenize/field_tokenizer.h"
#include "util/rng.h"

namespace ds {
namespace {

TEST(FieldRelations, ExactComparisonAndRescaling) {
  EXPECT_EQ(CompareScaled(150, 2, 15, 1), 0);  // 1.50 == 1.5
  EXPECT_EQ(CompareScaled(151, 2, 15, 1), 1);
  EXPECT_EQ(CompareScaled(-151, 2, -15, 1), -1);
  EXPECT_EQ(CompareScaled(99999999999999999LL, 0, 999999999999999991LL, 1), -1);
  EXPECT_EQ(CeilRescale(251, 2, 0), 3);    // v >= 2.51 -> 3
  EXPECT_EQ(FloorRescale(251, 2, 0), 2);   // v <= 2.51 -> 2
  EXPECT_EQ(CeilRescale(-251, 2, 0), -2);  // v >= -2.51 -> -2
  EXPECT_EQ(FloorRescale(-251, 2, 0), -3);
  EXPECT_EQ(CeilRescale(300, 2, 0), 3);
  EXPECT_EQ(FloorRescale(3, 0, 2), 300);
  EXPECT_EQ(CeilRescale(INT64_MAX / 2, 0, 5), INT64_MAX);  // saturates
}

// Rows of (a, b = a + gap, c independent, x small, y large, e = a), some missing.
struct Table {
  std::vector<std::vector<int64_t>> rows;  // [row][column]
};

Table MakeTable(int n, uint64_t seed) {
  Philox rng(seed, 3);
  Table t;
  for (int i = 0; i < n; ++i) {
    const int64_t a = rng.Below(1000), b = a + rng.Below(300), c = rng.Below(1000);
    t.rows.push_back({a, b, c, int64_t(rng.Below(10)), 100 + int64_t(rng.Below(100)), a});
    if (i % 9 == 4) t.rows.back()[1] = RelationLearner::kMissing;
  }
  return t;
}

std::vector<FieldRelation> Learn(const Table& t, RelationOptions o = {}) {
  const int k = int(t.rows[0].size());
  std::vector<int> cols, dec(size_t(k), 0);
  for (int i = 0; i < k; ++i) cols.push_back(i);
  RelationLearner l(cols, dec, o);
  for (const auto& r : t.rows) l.AddRow(r.data());
  return l.Finish();
}

TEST(FieldRelations, LearnsOnlyRelationsTheDataShowsAndTheRangesDoNotImply) {
  const auto rel = Learn(MakeTable(500, 1));
  // a <= b, e <= b (e == a), and a <= e, e <= a (equal columns: both directions). Not
  // x <= anything (its range alone implies it against a, b, c only rarely: x < 10),
  // not c (independent), not x <= y (implied by the ranges: no row could break it).
  const std::vector<FieldRelation> want = {{0, 1}, {0, 5}, {5, 0}, {5, 1}};
  EXPECT_EQ(rel, want);
  // Too few rows with both values: nothing.
  EXPECT_TRUE(Learn(MakeTable(15, 2)).empty());
  RelationOptions strict;
  strict.min_expected_violations = 1e9;
  EXPECT_TRUE(Learn(MakeTable(500, 1), strict).empty());
  // One row that breaks it drops the relation.
  Table t = MakeTable(500, 1);
  t.rows[321][0] = t.rows[321][1] + 1;
  t.rows[321][5] = t.rows[321][0];
  const std::vector<FieldRelation> rest = {{0, 5}, {5, 0}};
  EXPECT_EQ(Learn(t), rest);
}

// x <= a on every row, but only by chance: one row of a (8) lies below x's largest value
// (9), so independent columns would break it in n P = 0.1 of the 100 rows. Kept by default
// (a model left free writes rows no training row resembles); not at a threshold of 3.
TEST(FieldRelations, KeepsAChanceRelationTheRangesDoNotImply) {
  Table t;
  for (int i = 0; i < 100; ++i) t.rows.push_back({i % 10, i == 0 ? 8 : 9 + (i * 37) % 1000});
  std::vector<int> cols = {0, 1}, dec = {0, 0};
  auto learn = [&](RelationOptions o) {
    RelationLearner l(cols, dec, o);
    for (const auto& r : t.rows) l.AddRow(r.data());
    return l.Finish();
  };
  EXPECT_EQ(learn({}), (std::vector<FieldRelation>{{0, 1}}));
  RelationOptions old;
  old.min_expected_violations = 3;
  EXPECT_TRUE(learn(old).empty());
  // The ranges alone imply it (a >= 9 on every row): nothing to keep.
  t.rows[0][1] = 9;
  EXPECT_TRUE(learn({}).empty());
}

TEST(FieldRelations, DifferentDecimalsCompareByValue) {
  std::vector<int> cols = {0, 1};
  std::vector<int> dec = {2, 0};  // lo in cents, hi in units
  RelationLearner l(cols, dec);
  Philox rng(4, 1);
  for (int i = 0; i < 400; ++i) {
    const int64_t hi = 1 + rng.Below(100);
    const int64_t lo = int64_t(rng.Below(uint32_t(hi * 100 + 1)));  // lo <= hi exactly
    const int64_t row[2] = {lo, hi};
    l.AddRow(row);
  }
  EXPECT_EQ(l.Finish(), (std::vector<FieldRelation>{{0, 1}}));
}

// ------------------------------------------------------ in the field tokenizer --

const std::vector<std::string> kHeader = {"total", "part", "price", "cap", "tag"};

// part <= total (integers, wide: bins and digits), price <= cap (2 decimals against 0),
// tag a category.
std::vector<std::vector<std::string>> Records(int n) {
  Philox rng(11, 2);
  std::vector<std::vector<std::string>> r;
  for (int i = 0; i < n; ++i) {
    const int64_t total = 5 + rng.Below(4000), part = rng.Below(uint32_t(total + 1));
    const int64_t cap = 1 + rng.Below(60), cents = rng.Below(uint32_t(cap * 100 + 1));
    r.push_back({std::to_string(total), std::to_string(part),
                 fmt::format("{}.{:02d}", cents / 100, cents % 100), std::to_string(cap),
                 i % 3 ? "x" : "y"});
  }
  r[7][1] = "NA";  // a missing spelling: the relation skips it
  return r;
}

std::unique_ptr<FieldTokenizer> Train(bool relations, bool header_order = true) {
  FieldTokenizerOptions o;
  o.relations = relations;
  o.header_order = header_order;
  auto t = FieldTokenizer::Train(kHeader, Records(600), o);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(*t) : nullptr;
}

// Every value of column `col` (the one at the cursor) the mask lets through, by a
// depth-first walk over the legal tokens.
void Walk(const FieldTokenizer& t, const FieldTokenizer::Cursor& c, int col,
          std::vector<std::string>* fields, std::set<std::string>* out) {
  std::vector<float> logits(size_t(t.vocab_size()), 0.0f);
  t.Mask(c, logits.data());
  int lo, hi;
  t.AllowedRange(c, &lo, &hi);
  for (int id = lo; id < hi; ++id) {
    if (std::isinf(logits[size_t(id)])) continue;
    FieldTokenizer::Cursor next = c;
    const size_t before = fields->size();
    t.Advance(&next, id, fields);
    ASSERT_FALSE(next.broken) << "the mask let through an illegal id " << id;
    if (fields->size() > before) {
      out->insert((*fields)[size_t(col)]);
      fields->resize(before);
    } else {
      Walk(t, next, col, fields, out);
    }
  }
}

// The values of column 1 reachable after column 0 = v (header order).
std::set<std::string> Reachable(const FieldTokenizer& t, const std::string& v) {
  FieldTokenizer::Cursor c;
  std::vector<std::string> fields;
  t.Begin(&c, &fields);
  std::vector<int32_t> ids;
  EXPECT_TRUE(t.EncodeColumnField(0, v, &ids).ok());
  for (int32_t id : ids) t.Advance(&c, id, &fields);
  std::set<std::string> out;
  Walk(t, c, 1, &fields, &out);
  return out;
}

TEST(FieldRelations, TokenizerLearnsThem) {
  auto t = Train(true);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->relations(), (std::vector<FieldRelation>{{1, 0}, {2, 3}}));
  EXPECT_NE(t->Describe().find("relations kept: part <= total, price <= cap"), std::string::npos)
      << t->Describe();
  EXPECT_TRUE(Train(false)->relations().empty());
}

TEST(FieldRelations, MaskKeepsExactlyTheValuesThatObeyThem) {
  auto t = Train(true);
  auto free = Train(false);
  ASSERT_TRUE(t && free);
  const auto& part = t->columns()[1];
  const auto& tot = t->columns()[0];
  const int64_t lo = part.edges.front(), hi = part.edges.back() - 1;
  for (int64_t total : {tot.edges.front(), int64_t(137), int64_t(1000), tot.edges.back() - 1}) {
    std::set<std::string> got = Reachable(*t, std::to_string(total));
    std::set<std::string> want;
    for (int64_t v = lo; v <= std::min(hi, total); ++v) want.insert(std::to_string(v));
    for (const auto& m : part.missing) want.insert(m);
    EXPECT_EQ(got, want) << "total " << total;
    // Without relations the same walk reaches values above the total.
    if (total < hi) {
      EXPECT_GT(Reachable(*free, std::to_string(total)).size(), got.size()) << total;
    }
  }
}

TEST(FieldRelations, LowerBoundsWhenTheLargerColumnComesSecond) {
  // The smaller column first (price, 2 decimals), then cap (integers): a lower bound.
  std::vector<std::vector<std::string>> recs;
  Philox rng(3, 9);
  for (int i = 0; i < 500; ++i) {
    const int64_t cents = rng.Below(5000), cap = (cents + 99) / 100 + rng.Below(20);
    recs.push_back({fmt::format("{}.{:02d}", cents / 100, cents % 100), std::to_string(cap)});
  }
  FieldTokenizerOptions o;
  o.header_order = true;
  auto t = FieldTokenizer::Train({"price", "cap"}, recs, o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ((*t)->relations(), (std::vector<FieldRelation>{{0, 1}}));
  const auto& cap = (*t)->columns()[1];
  for (size_t r : {0, 1, 2, 3, 4}) {  // values seen in training (so in range)
    const std::string price = recs[r][0];
    const double p = std::stod(price);
    std::set<std::string> want;
    for (int64_t v = cap.edges.front(); v < cap.edges.back(); ++v)
      if (double(v) >= p) want.insert(std::to_string(v));
    EXPECT_EQ(Reachable(**t, price), want) << price;
  }
}

TEST(FieldRelations, CheckFieldsRejectsABrokenRelation) {
  auto t = Train(true);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->CheckFields({"100", "100", "1.00", "1", "x"}), "");
  EXPECT_EQ(t->CheckFields({"100", "NA", "1.00", "1", "x"}), "");  // missing: no relation
  const std::string why = t->CheckFields({"100", "101", "1.00", "1", "x"});
  EXPECT_NE(why.find("field 2 'part' = 101 is greater than field 1 'total' = 100"),
            std::string::npos)
      << why;
  EXPECT_NE(t->CheckFields({"100", "5", "1.01", "1", "x"}), "");
  EXPECT_EQ(Train(false)->CheckFields({"100", "101", "1.00", "1", "x"}), "");
}

TEST(FieldRelations, SavedLoadedAndCheckedOnLoad) {
  auto t = Train(true);
  ASSERT_TRUE(t);
  const std::string dir = ::testing::TempDir() + "/field_relations";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(t->Save(dir).ok());
  auto l = LoadTokenizer(dir);
  ASSERT_TRUE(l.ok()) << l.status().message();
  auto* lf = dynamic_cast<FieldTokenizer*>(l->get());
  ASSERT_TRUE(lf);
  EXPECT_EQ(lf->relations(), t->relations());
  EXPECT_EQ(Reachable(*lf, "137"), Reachable(*t, "137"));
  nlohmann::json j;
  std::ifstream(dir + "/tokenizer.json") >> j;
  nlohmann::json old = j;
  old["field"].erase("relations");  // a model from before: none
  auto o = FieldTokenizer::Load(old, dir);
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(dynamic_cast<FieldTokenizer*>(o->get())->relations().empty());
  for (const nlohmann::json& bad :
       {nlohmann::json::array({{0, 0}}), nlohmann::json::array({{0, 9}}),
        nlohmann::json::array({{0, 4}}), nlohmann::json::array({{-1, 1}}),
        nlohmann::json::array({{0}}), nlohmann::json::array({"0,1"})}) {
    nlohmann::json b = j;
    b["field"]["relations"] = bad;
    auto r = FieldTokenizer::Load(b, dir);
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_EQ(r.status().code(), Code::kCorrupt) << bad.dump();
  }
  std::filesystem::remove_all(dir);
}

TEST(FieldRelations, DatesKeepTheirOrder) {
  EXPECT_LT(DateKey({2020, 12, 31, 23, 59, 59}), DateKey({2021, 1, 1, 0, 0, 0}));
  EXPECT_EQ(DateKey(DateFromKey(DateKey({1999, 2, 28, 7, 5, 3}))),
            DateKey({1999, 2, 28, 7, 5, 3}));
  // start <= end on every row (end = start + 0..60 days); `other` has other parts.
  std::vector<std::vector<std::string>> recs;
  Philox rng(8, 1);
  auto fmt_date = [](int y, int m, int d) { return fmt::format("{}-{:02d}-{:02d}", y, m, d); };
  for (int i = 0; i < 400; ++i) {
    int y = 2019 + int(rng.Below(3)), m = 1 + int(rng.Below(12)), d = 1 + int(rng.Below(28));
    const std::string start = fmt_date(y, m, d);
    for (int k = int(rng.Below(61)); k > 0; --k)
      if (++d > DaysInMonth(y, m)) d = 1, m = m == 12 ? (++y, 1) : m + 1;
    // `other` is always later, but has a time: no relation with the dates.
    recs.push_back({start, fmt_date(y, m, d), fmt::format("2030-01-01 {:02d}:00", int(rng.Below(24)))});
  }
  FieldTokenizerOptions o;
  o.header_order = true;
  auto t = FieldTokenizer::Train({"start", "end", "other"}, recs, o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ((*t)->relations(), (std::vector<FieldRelation>{{0, 1}}));
  const auto& end = (*t)->columns()[1];
  for (size_t r : {0, 1, 2, 3}) {
    const std::string& start = recs[r][0];
    std::set<std::string> want;
    for (int y = end.year_lo; y <= end.year_hi; ++y)
      for (int m = 1; m <= 12; ++m)
        for (int d = 1; d <= DaysInMonth(y, m); ++d)
          if (fmt_date(y, m, d) >= start) want.insert(fmt_date(y, m, d));  // ISO sorts as dates
    EXPECT_EQ(Reachable(**t, start), want) << start;
  }
  EXPECT_EQ((*t)->columns()[2].type.type, FieldType::kDatetime);
  EXPECT_NE((*t)->CheckFields({"2020-03-02", "2020-03-01", "2030-01-01 10:00"}), "");
  EXPECT_EQ((*t)->CheckFields({"2020-03-01", "2020-03-01", "2030-01-01 10:00"}), "");
}

}  // namespace
}  // namespace ds
