// Column rules: type inference, learned ranges and categories, validation
// with explanations, switches, JSON round trip and hostile JSON.
#include "schema/column_rules.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/csv.h"

namespace ds {
namespace {

using Rows = std::vector<std::vector<std::string>>;

TEST(RuleNumbers, IntegerAndDecimalSyntax) {
  int64_t i;
  EXPECT_TRUE(ParseRuleInteger("0", &i));
  EXPECT_TRUE(ParseRuleInteger("-42", &i));
  EXPECT_EQ(i, -42);
  EXPECT_TRUE(ParseRuleInteger("+7", &i));
  EXPECT_FALSE(ParseRuleInteger("007", &i));  // a code, not a number
  EXPECT_FALSE(ParseRuleInteger("1.0", &i));
  EXPECT_FALSE(ParseRuleInteger("", &i));
  EXPECT_FALSE(ParseRuleInteger("-", &i));
  EXPECT_FALSE(ParseRuleInteger("1234567890123456789", &i));  // 19 digits
  double d;
  int dec;
  bool exp;
  EXPECT_TRUE(ParseRuleDecimal("39.10", &d, &dec, &exp));
  EXPECT_DOUBLE_EQ(d, 39.1);
  EXPECT_EQ(dec, 2);
  EXPECT_FALSE(exp);
  EXPECT_TRUE(ParseRuleDecimal("-.5", &d, &dec, &exp));
  EXPECT_DOUBLE_EQ(d, -0.5);
  EXPECT_TRUE(ParseRuleDecimal("12", &d, &dec, &exp));
  EXPECT_EQ(dec, 0);
  EXPECT_TRUE(ParseRuleDecimal("1.5e-3", &d, &dec, &exp));
  EXPECT_TRUE(exp);
  EXPECT_DOUBLE_EQ(d, 0.0015);
  EXPECT_FALSE(ParseRuleDecimal("1.", &d, &dec, &exp));
  EXPECT_FALSE(ParseRuleDecimal("01.5", &d, &dec, &exp));
  EXPECT_FALSE(ParseRuleDecimal("1e", &d, &dec, &exp));
  EXPECT_FALSE(ParseRuleDecimal("nan", &d, &dec, &exp));
  EXPECT_FALSE(ParseRuleDecimal("1e999", &d, &dec, &exp));  // not finite
}

Rows Sample() {
  // id: integers; price: decimals (<= 2 places); kind: 3 categories; zip:
  // leading-zero codes; note: free text; opt: sometimes empty, "NA" once.
  Rows rows;
  const char* kinds[] = {"red", "green", "blue"};
  for (int i = 0; i < 60; ++i) {
    rows.push_back(
        {fmt::format("{}", 10 + i), fmt::format("{}.{}{}", i % 7, i % 10, i % 3 == 0 ? "5" : ""),
         kinds[i % 3], fmt::format("{}{}", i % 2 ? "0" : "1", 1000 + i),
         fmt::format("note number {}", i * 7919), i % 4 == 0 ? std::string() : fmt::format("{}", i),
         i == 5 ? std::string("NA") : fmt::format("{}", i % 5)});
  }
  return rows;
}
const std::vector<std::string> kHeader = {"id", "price", "kind", "zip", "note", "opt", "small"};

TEST(ColumnRules, LearnsTypesRangesCategories) {
  ColumnRules r = LearnColumnRules(kHeader, Sample());
  ASSERT_EQ(r.field_count(), 7u);
  const auto& c = r.columns();
  EXPECT_EQ(c[0].type, ColumnType::kInteger);
  EXPECT_EQ(c[0].int_min, 10);
  EXPECT_EQ(c[0].int_max, 69);
  EXPECT_FALSE(c[0].empty_allowed);
  EXPECT_EQ(c[1].type, ColumnType::kDecimal);
  EXPECT_EQ(c[1].max_decimals, 2);
  EXPECT_DOUBLE_EQ(c[1].min, 0.05);  // i = 0
  EXPECT_DOUBLE_EQ(c[1].max, 6.85);  // i = 48
  EXPECT_EQ(c[2].type, ColumnType::kCategory);
  EXPECT_EQ(c[2].categories, (std::vector<std::string>{"blue", "green", "red"}));
  EXPECT_EQ(c[3].type, ColumnType::kText);  // leading zeros: codes, and all distinct
  EXPECT_EQ(c[4].type, ColumnType::kText);
  EXPECT_EQ(c[5].type, ColumnType::kInteger);
  EXPECT_TRUE(c[5].empty_allowed);
  EXPECT_EQ(c[6].type, ColumnType::kInteger);  // few values, numeric: a range, not a set
  EXPECT_EQ(c[6].missing_values, std::vector<std::string>{"NA"});
  EXPECT_EQ(r.learned_rows(), 60);
}

TEST(ColumnRules, CategoryThresholds) {
  // 40 values each seen twice: category. One singleton among 100 rows (1%):
  // still a category. Mostly-unique values: text. 60 distinct values: text.
  Rows twice, rare, unique, many;
  for (int i = 0; i < 80; ++i) twice.push_back({fmt::format("v{}", i % 40)});
  for (int i = 0; i < 99; ++i) rare.push_back({fmt::format("k{}", i % 3)});
  rare.push_back({"rare"});
  for (int i = 0; i < 30; ++i) unique.push_back({fmt::format("u{}", i % 20)});
  for (int i = 0; i < 600; ++i) many.push_back({fmt::format("m{}", i % 60)});
  EXPECT_EQ(LearnColumnRules({"c"}, twice).columns()[0].type, ColumnType::kCategory);
  EXPECT_EQ(LearnColumnRules({"c"}, rare).columns()[0].type, ColumnType::kCategory);
  EXPECT_EQ(LearnColumnRules({"c"}, unique).columns()[0].type, ColumnType::kText);
  EXPECT_EQ(LearnColumnRules({"c"}, many).columns()[0].type, ColumnType::kText);
  RuleOptions o;
  o.max_categories = 100;
  EXPECT_EQ(LearnColumnRules({"c"}, many, o).columns()[0].type, ColumnType::kCategory);
  o.store_values = false;  // no data values kept
  auto nv = LearnColumnRules({"c", "n"}, Rows{{"a", "1"}, {"a", "2"}, {"b", "3"}, {"b", "4"}}, o);
  EXPECT_EQ(nv.columns()[0].type, ColumnType::kText);
  EXPECT_TRUE(nv.columns()[0].categories.empty());
  EXPECT_EQ(nv.columns()[1].type, ColumnType::kInteger);
  EXPECT_FALSE(nv.columns()[1].has_range);
  EXPECT_EQ(nv.Validate({"zzz", "99"}), "");
  EXPECT_NE(nv.Validate({"zzz", "x"}), "");
  auto j = nv.ToJson();
  EXPECT_FALSE(j["columns"][1].contains("min"));
  EXPECT_EQ(j.dump().find("\"a\""), std::string::npos);
}

TEST(ColumnRules, ValidateExplainsEachRule) {
  ColumnRules r = LearnColumnRules(kHeader, Sample());
  std::vector<std::string> ok = {"12", "3.25", "red", "01234", "anything", "", "NA"};
  EXPECT_EQ(r.Validate(ok), "");
  auto with = [&](size_t i, std::string v) {
    auto f = ok;
    f[i] = std::move(v);
    return r.Validate(f);
  };
  EXPECT_EQ(r.Validate({"1", "2"}), "expected 7 fields, got 2");
  EXPECT_EQ(with(0, "1x"), "field 1 'id': '1x' is not an integer");
  EXPECT_EQ(with(0, "70"), "field 1 'id': 70 is outside the training range [10, 69]");
  EXPECT_EQ(with(0, ""), "field 1 'id': empty, but the column was never empty in training");
  EXPECT_EQ(with(1, "3.255"), "field 2 'price': 3.255 has 3 decimal places, at most 2 in training");
  EXPECT_EQ(with(1, "7.5"), "field 2 'price': 7.5 is outside the training range [0.05, 6.85]");
  EXPECT_EQ(with(1, "3,2"), "field 2 'price': '3,2' is not a decimal number");
  EXPECT_EQ(with(1, "4"), "");  // an integer in a decimal column
  EXPECT_EQ(with(2, "purple"),
            "field 3 'kind': 'purple' is not one of the 3 categories seen in training");
  EXPECT_EQ(with(3, "x"), "");  // text
  EXPECT_EQ(with(6, "NA"), "");
  EXPECT_EQ(with(6, "N/A"), "field 7 'small': 'N/A' is not an integer");  // not seen in training

  // Every rule can be switched off.
  RuleChecks ch;
  ch.range = false;
  r.set_checks(ch);
  EXPECT_EQ(with(0, "70"), "");
  EXPECT_NE(with(0, "1x"), "");
  ch.type = false;
  r.set_checks(ch);
  EXPECT_EQ(with(0, "1x"), "");
  EXPECT_EQ(with(1, "3.255"), "");
  ch.category = false;
  r.set_checks(ch);
  EXPECT_EQ(with(2, "purple"), "");
  ch.empty = false;
  r.set_checks(ch);
  EXPECT_EQ(with(0, ""), "");
  ch.field_count = false;
  r.set_checks(ch);
  EXPECT_EQ(r.Validate({"1", "2"}), "");
}

TEST(ColumnRules, JsonRoundTrip) {
  ColumnRules r = LearnColumnRules(kHeader, Sample());
  nlohmann::json j = r.ToJson();
  auto back = ColumnRules::FromJson(nlohmann::json::parse(j.dump()), "rules.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToJson(), j);
  for (auto v : std::vector<std::vector<std::string>>{{"12", "3.25", "red", "01234", "x", "", "NA"},
                                                      {"70", "3.25", "red", "01234", "x", "", "1"},
                                                      {"12", "3.255", "blue", "0", "x", "5", "2"},
                                                      {"12", "3.25", "pink", "0", "x", "5", "2"}})
    EXPECT_EQ(back->Validate(v), r.Validate(v));
}

TEST(ColumnRules, HostileJsonIsRejected) {
  ColumnRules r = LearnColumnRules(kHeader, Sample());
  nlohmann::json good = r.ToJson();
  auto expect_bad = [&](nlohmann::json j, const std::string& what) {
    auto res = ColumnRules::FromJson(j, "rules.json");
    ASSERT_FALSE(res.ok()) << what;
    EXPECT_EQ(res.status().code(), Code::kCorrupt);
    EXPECT_NE(res.status().message().find("rules.json"), std::string::npos);
  };
  expect_bad(nlohmann::json::array(), "not an object");
  auto j = good;
  j["format"] = "other";
  expect_bad(j, "format");
  j = good;
  j["version"] = 2;
  expect_bad(j, "version");
  j = good;
  j["columns"][0]["type"] = "blob";
  expect_bad(j, "type");
  j = good;
  j["columns"][0]["min"] = 100;  // min > max
  expect_bad(j, "range");
  j = good;
  j["columns"][0]["min"] = "ten";
  expect_bad(j, "min type");
  j = good;
  j["columns"][0].erase("max");
  expect_bad(j, "min without max");
  j = good;
  j["columns"][1]["max_decimals"] = -5;
  expect_bad(j, "decimals");
  j = good;
  j["columns"][2]["categories"] = {1, 2};
  expect_bad(j, "categories");
  j = good;
  j["columns"][2].erase("empty_allowed");
  expect_bad(j, "empty_allowed");
  j = good;
  j["columns"][2]["missing_values"] = {""};
  expect_bad(j, "empty missing value");
  j = good;
  j["columns"] = 5;
  expect_bad(j, "columns");
}

TEST(ColumnRules, PenguinsFromBundledData) {
  auto rd = CsvReader::Open(std::string(DS_TEST_DATA) + "/datasets/penguins.csv");
  ASSERT_TRUE(rd.ok()) << rd.status().ToString();
  Rows rows;
  std::vector<std::string> f;
  while (true) {
    auto more = (*rd)->Next(&f);
    ASSERT_TRUE(more.ok());
    if (!*more) break;
    rows.push_back(f);
  }
  ColumnRules r = LearnColumnRules((*rd)->header(), rows);
  const auto& c = r.columns();
  ASSERT_EQ(c.size(), 8u);
  EXPECT_EQ(c[0].type, ColumnType::kCategory);  // species
  EXPECT_EQ(c[0].categories, (std::vector<std::string>{"Adelie", "Chinstrap", "Gentoo"}));
  EXPECT_EQ(c[1].type, ColumnType::kCategory);  // island
  EXPECT_EQ(c[2].type, ColumnType::kDecimal);   // bill_length_mm
  EXPECT_EQ(c[2].max_decimals, 1);
  EXPECT_TRUE(c[2].empty_allowed);
  EXPECT_EQ(c[4].type, ColumnType::kInteger);   // flipper_length_mm
  EXPECT_EQ(c[6].type, ColumnType::kCategory);  // sex
  EXPECT_TRUE(c[6].empty_allowed);
  EXPECT_EQ(c[7].type, ColumnType::kInteger);  // year
  EXPECT_EQ(c[7].int_min, 2007);
  EXPECT_EQ(c[7].int_max, 2009);
  // Every training record is valid under its own rules.
  for (const auto& row : rows) EXPECT_EQ(r.Validate(row), "");
  EXPECT_NE(r.Validate({"Adelie", "Torgersen", "39.1", "18.7", "181", "3750", "male", "2031"}), "");
}

}  // namespace
}  // namespace ds
