// Column typing (schema/column_type.h): the number parser, the date formats
// and the inference rules on closed cases, plus overrides.
#include "schema/column_type.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ds {
namespace {

ColumnSchema Infer(const std::vector<std::string>& vals, const std::string& forced = "") {
  std::vector<std::string_view> v(vals.begin(), vals.end());
  auto r = InferColumnType(v, forced);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : ColumnSchema();
}

TEST(ColumnType, NumberParser) {
  ScaledNumber n;
  ASSERT_TRUE(ParseNumber("12.50", &n));
  EXPECT_EQ(n.scaled, 1250);
  EXPECT_EQ(n.decimals, 2);
  ASSERT_TRUE(ParseNumber("-0.5", &n));
  EXPECT_EQ(n.scaled, -5);
  ASSERT_TRUE(ParseNumber("0", &n));
  EXPECT_EQ(n.scaled, 0);
  ASSERT_TRUE(ParseNumber("99999999999999999", &n));  // 17 digits
  for (const char* bad : {"", "-", "007", "+1", "1.", ".5", "1e3", "-0", "1,5", " 1", "1 ",
                          "999999999999999999", "1.1234567890", "abc", "0x1F"})
    EXPECT_FALSE(ParseNumber(bad, &n)) << bad;
  EXPECT_EQ(FormatNumber(1250, 2, false), "12.50");
  EXPECT_EQ(FormatNumber(1250, 2, true), "12.5");
  EXPECT_EQ(FormatNumber(1200, 2, true), "12");
  EXPECT_EQ(FormatNumber(-5, 2, false), "-0.05");
  EXPECT_EQ(FormatNumber(0, 1, true), "0");
  EXPECT_EQ(FormatNumber(-7, 0, false), "-7");
  EXPECT_EQ(Rescale(ScaledNumber{15, 1}, 3), 1500);
}

TEST(ColumnType, Dates) {
  EXPECT_EQ(DaysInMonth(2024, 2), 29);
  EXPECT_EQ(DaysInMonth(2023, 2), 28);
  EXPECT_EQ(DaysInMonth(1900, 2), 28);
  EXPECT_EQ(DaysInMonth(2000, 2), 29);
  EXPECT_EQ(DaysInMonth(2023, 4), 30);
  auto iso = DateFormat::Parse("%Y-%m-%d");
  ASSERT_TRUE(iso.ok());
  DateTime d;
  EXPECT_TRUE(iso->Read("2024-02-29", &d));
  EXPECT_EQ(d.year, 2024);
  EXPECT_EQ(d.day, 29);
  EXPECT_FALSE(iso->Read("2023-02-29", &d));  // not a real date
  EXPECT_FALSE(iso->Read("1998-10-00", &d));
  EXPECT_FALSE(iso->Read("2023-13-01", &d));
  EXPECT_FALSE(iso->Read("2023-1-01", &d));   // padded format
  EXPECT_EQ(iso->Write({2024, 3, 7}), "2024-03-07");
  auto us = DateFormat::Parse("%-m/%-d/%Y");
  ASSERT_TRUE(us.ok());
  EXPECT_TRUE(us->Read("3/7/2024", &d));
  EXPECT_EQ(d.month, 3);
  EXPECT_FALSE(us->Read("03/07/2024", &d));  // leading zero in an unpadded format
  EXPECT_EQ(us->Write({2024, 12, 25}), "12/25/2024");
  auto dt = DateFormat::Parse("%Y-%m-%d %H:%M:%S");
  ASSERT_TRUE(dt.ok());
  ASSERT_EQ(dt->parts().size(), 6u);
  EXPECT_TRUE(dt->Read("2020-01-31 23:59:59", &d));
  EXPECT_FALSE(dt->Read("2020-01-31 24:00:00", &d));
  EXPECT_FALSE(DateFormat::Parse("%Y-%q").ok());
  EXPECT_FALSE(DateFormat::Parse("%H:%M").ok());  // no date
}

TEST(ColumnType, Inference) {
  EXPECT_EQ(Infer({"1", "2", "30", "-4"}).type, FieldType::kInteger);
  auto dec = Infer({"1.50", "2.25", "3.00"});
  EXPECT_EQ(dec.type, FieldType::kDecimal);
  EXPECT_EQ(dec.decimals, 2);
  EXPECT_FALSE(dec.trim);
  auto trim = Infer({"29.85", "1889.5", "108", "0.05"});
  EXPECT_EQ(trim.type, FieldType::kDecimal);
  EXPECT_EQ(trim.decimals, 2);
  EXPECT_TRUE(trim.trim);
  // Mixed styles ("1.5" and "1.50") cannot be written back exactly: not decimal.
  EXPECT_NE(Infer({"1.5", "1.50", "2.25"}).type, FieldType::kDecimal);
  // Scaled to the column's precision, a value would need more than 17 digits.
  EXPECT_NE(Infer({"12345678901234567", "0.5"}).type, FieldType::kDecimal);
  EXPECT_EQ(Infer({"12345678901234567", "5"}).type, FieldType::kInteger);
  // Leading zeros are not integers (zip codes).
  EXPECT_NE(Infer({"02134", "10001", "02139"}).type, FieldType::kInteger);
  auto missing = Infer({"1", "", "NA", "4"});
  EXPECT_EQ(missing.type, FieldType::kInteger);
  EXPECT_EQ(missing.missing, 2);
  auto iso = Infer({"2014-09-05", "2015-02-28", ""});
  EXPECT_EQ(iso.type, FieldType::kDatetime);
  EXPECT_EQ(iso.format, "%Y-%m-%d");
  EXPECT_EQ(Infer({"2014-09-05 10:00:00", "2015-02-28 23:10:59"}).format, "%Y-%m-%d %H:%M:%S");
  EXPECT_EQ(Infer({"09/05/2014", "12/28/2015"}).format, "%m/%d/%Y");
  EXPECT_EQ(Infer({"9/5/2014", "12/28/2015"}).format, "%-m/%-d/%Y");
  EXPECT_EQ(Infer({"28/09/2014", "05/12/2015"}).format, "%d/%m/%Y");  // 28 is not a month
  EXPECT_NE(Infer({"2014-02-30", "2015-02-28"}).type, FieldType::kDatetime);  // not real
  EXPECT_EQ(Infer({"", "", ""}).type, FieldType::kEmpty);
  auto k = Infer({"x", "x", "x"});
  EXPECT_EQ(k.type, FieldType::kConstant);
  EXPECT_EQ(k.constant, "x");
  EXPECT_EQ(Infer({"NA", "NA"}).type, FieldType::kConstant);
  EXPECT_EQ(Infer({"Yes", "No", "Yes", "No", ""}).type, FieldType::kCategorical);
  std::vector<std::string> ids, text;
  for (int i = 0; i < 100; ++i) {
    ids.push_back("ID-" + std::to_string(i * 7919));
    text.push_back("a sentence number " + std::to_string(i));
  }
  EXPECT_EQ(Infer(ids).type, FieldType::kId);
  EXPECT_EQ(Infer(text).type, FieldType::kText);
}

TEST(ColumnType, Overrides) {
  EXPECT_EQ(Infer({"1", "2", "3"}, "categorical").type, FieldType::kCategorical);
  auto d = Infer({"1", "2", "3.5"}, "decimal");
  EXPECT_EQ(d.type, FieldType::kDecimal);
  EXPECT_EQ(d.decimals, 1);
  EXPECT_EQ(Infer({"05.03.2024", "31.12.2023"}, "datetime:%d.%m.%Y").format, "%d.%m.%Y");
  EXPECT_EQ(Infer({"02134", "10001"}, "text").type, FieldType::kText);
  std::vector<std::string_view> v = {"1", "abc"};
  auto bad = InferColumnType(v, "integer");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'abc'"), std::string::npos) << bad.status().message();
  EXPECT_EQ(InferColumnType(v, "float").status().code(), Code::kInvalidArgument);
  EXPECT_FALSE(InferColumnType(v, "datetime:%Q").ok());
  auto m = ParseFieldTypes("a=integer;b c=datetime:%d.%m.%Y;");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->at("a"), "integer");
  EXPECT_EQ(m->at("b c"), "datetime:%d.%m.%Y");
  EXPECT_FALSE(ParseFieldTypes("a").ok());
  EXPECT_FALSE(ParseFieldTypes("=text").ok());
}

TEST(ColumnType, ValueFits) {
  auto t = Infer({"1.50", "2.25"});
  EXPECT_TRUE(ValueFitsType(t, "3.10"));
  EXPECT_FALSE(ValueFitsType(t, "3.1"));  // fixed style
  EXPECT_FALSE(ValueFitsType(t, "3.105"));
  EXPECT_TRUE(ValueFitsType(t, "NA"));
  auto d = Infer({"2020-01-01", "2020-03-04"});
  EXPECT_TRUE(ValueFitsType(d, "2024-02-29"));
  EXPECT_FALSE(ValueFitsType(d, "Octinesal"));
}

}  // namespace
}  // namespace ds
