// Column typing (schema/column_type.h): the number parser, the date formats
// and the inference rules on closed cases, plus overrides.
#include "schema/column_type.h"

#include <fmt/core.h>
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
  // Mixed styles ("1.5" and "1.50"): still numbers, compared by value.
  auto mixed = Infer({"1.5", "1.50", "2.25"});
  EXPECT_EQ(mixed.type, FieldType::kDecimal);
  EXPECT_EQ(mixed.decimals, 2);
  EXPECT_TRUE(mixed.normalized);
  EXPECT_FALSE(dec.normalized);
  EXPECT_FALSE(trim.normalized);
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

TEST(ColumnType, DecimalParser) {
  DecimalValue v;
  ASSERT_TRUE(ParseDecimal("1.5E-3", &v));
  EXPECT_EQ(uint64_t(v.mag), 15u);
  EXPECT_EQ(v.scale, 4);
  EXPECT_FALSE(v.plain);
  ASSERT_TRUE(ParseDecimal("9.8988e+12", &v));
  EXPECT_EQ(uint64_t(v.mag), 9898800000000u);
  EXPECT_EQ(v.scale, 0);
  ASSERT_TRUE(ParseDecimal("8.927999999999999", &v));  // float noise: 3 decimals carried
  EXPECT_EQ(v.scale, 15);
  EXPECT_EQ(v.precision, 3);
  int64_t s = 0;
  ASSERT_TRUE(ScaleDecimal(v, 4, &s));
  EXPECT_EQ(s, 89280);
  ASSERT_TRUE(ParseDecimal("0.30000000000000004", &v));
  EXPECT_EQ(v.precision, 1);
  ASSERT_TRUE(ParseDecimal("1.50", &v));  // trailing zeros are written precision
  EXPECT_EQ(v.precision, 2);
  ASSERT_TRUE(ParseDecimal("27.96180937", &v));
  EXPECT_EQ(v.precision, 8);
  ASSERT_TRUE(ParseDecimal("-2.5", &v));
  ASSERT_TRUE(ScaleDecimal(v, 0, &s));
  EXPECT_EQ(s, -3);  // half away from zero
  for (const char* bad : {"", "-", "007", "+1", "1.", ".5", "1e", "1e+", "1e9999", "1,5", " 1",
                          "abc", "0x1F", "1e-99", "123456789012345678901234567890123456789"})
    EXPECT_FALSE(ParseDecimal(bad, &v)) << bad;
  ASSERT_TRUE(ParseDecimal("1e20", &v));
  EXPECT_FALSE(ScaleDecimal(v, 0, &s));  // more than 17 digits
}

// Real exports: R writes large numbers with an exponent ("3e+05"), Python
// leaves float noise ("8.927999999999999"), a column of one-decimal values can
// hold one stray value with 8 decimals. All stay numbers.
TEST(ColumnType, NumbersAsExported) {
  auto income = Infer({"35000", "3e+05", "72000", "1e+05", "50100"});
  EXPECT_EQ(income.type, FieldType::kInteger);
  EXPECT_TRUE(income.normalized);
  int64_t s = 0;
  ASSERT_TRUE(ScaleToColumn(income, "3e+05", &s));
  EXPECT_EQ(s, 300000);
  EXPECT_TRUE(ValueFitsType(income, "2.5e4"));
  EXPECT_FALSE(ValueFitsType(income, "x"));
  auto noisy = Infer({"8.0777", "8.927999999999999", "14.2", "-15.015999999999998", "3.0905"});
  EXPECT_EQ(noisy.type, FieldType::kDecimal);
  EXPECT_EQ(noisy.decimals, 4);
  EXPECT_TRUE(noisy.trim);
  EXPECT_TRUE(noisy.normalized);
  ASSERT_TRUE(ScaleToColumn(noisy, "-15.015999999999998", &s));
  EXPECT_EQ(s, -150160);
  EXPECT_EQ(FormatNumber(s, noisy.decimals, noisy.trim), "-15.016");
  std::vector<std::string> rates;
  for (int i = 0; i < 300; ++i) rates.push_back(fmt::format("{}.{}", 10 + i % 90, i % 10));
  rates.push_back("27.96180937");
  auto stray = Infer(rates);
  EXPECT_EQ(stray.type, FieldType::kDecimal);
  EXPECT_EQ(stray.decimals, 1);  // not 8: one value in 301 is rounded
  EXPECT_TRUE(stray.normalized);
  ASSERT_TRUE(ScaleToColumn(stray, "27.96180937", &s));
  EXPECT_EQ(s, 280);
  rates.resize(50);  // under 100 values nothing is rounded: D covers them all
  rates.push_back("27.96180937");
  EXPECT_EQ(Infer(rates).decimals, 8);
  // Forcing never rounds: every value of a forced integer column is whole.
  EXPECT_EQ(Infer({"3e+05", "7"}, "integer").type, FieldType::kInteger);
  std::vector<std::string_view> half = {"1", "2.5"};
  EXPECT_FALSE(InferColumnType(half, "integer").ok());
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
