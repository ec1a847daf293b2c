// The one number scanner (schema/column_type.h ScanNumber) and the number
// rules stated over it: the column rules' integers and decimals, evaluate's
// numbers. Random strings over the numeral alphabet are compared with the
// definitions the rules had before they shared the scanner (strtod with a
// character check for evaluate; the hand-written grammar for the rules).
#include <gtest/gtest.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "evaluate/table.h"
#include "schema/column_rules.h"
#include "schema/column_type.h"

namespace ds {
namespace {

// evaluate's ParseNumber before: strtod over [0-9+-.eE], whole string, finite.
bool OldEvaluateNumber(const std::string& s, double* out) {
  if (s.empty() || s.size() > 64) return false;
  if (!(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '+' ||
        s[0] == '.'))
    return false;
  for (char c : s)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.' ||
          c == 'e' || c == 'E'))
      return false;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool OldLeadingZero(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  return s.size() > i + 1 && s[i] == '0' && std::isdigit(static_cast<unsigned char>(s[i + 1]));
}

// The column rules' decimal grammar before:
// [+-]?(0|[1-9][0-9]*)?(\.[0-9]+)?([eE][+-]?[0-9]+)? with digits before or after the point.
bool OldRuleDecimal(const std::string& s, int* decimals, bool* exponent) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t j = i;
  while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
  size_t n = j - i;
  if (n > 1 && s[i] == '0') return false;
  i = j;
  int dec = 0;
  if (i < s.size() && s[i] == '.') {
    size_t f = ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    dec = int(i - f);
    if (dec == 0) return false;
  } else if (n == 0) {
    return false;
  }
  bool exp = false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    exp = true;
    if (++i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t e = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (i == e) return false;
  }
  if (i != s.size() || !std::isfinite(std::strtod(s.c_str(), nullptr))) return false;
  *decimals = dec;
  *exponent = exp;
  return true;
}

TEST(NumberSyntax, Fields) {
  NumberSyntax n;
  ASSERT_TRUE(ScanNumber("-012.50e+3", &n));
  EXPECT_TRUE(n.negative);
  EXPECT_FALSE(n.plus);
  EXPECT_EQ(n.int_digits, 3);
  EXPECT_TRUE(n.leading_zero);
  EXPECT_TRUE(n.point);
  EXPECT_EQ(n.frac_digits, 2);
  EXPECT_TRUE(n.exponent);
  EXPECT_DOUBLE_EQ(n.value, -12500);
  ASSERT_TRUE(ScanNumber("+.5", &n));
  EXPECT_TRUE(n.plus);
  EXPECT_EQ(n.int_digits, 0);
  EXPECT_DOUBLE_EQ(n.value, 0.5);
  ASSERT_TRUE(ScanNumber("1.", &n));
  EXPECT_TRUE(n.point);
  EXPECT_EQ(n.frac_digits, 0);
  for (const char* bad : {"", "-", ".", "+.", "e5", "1e", "1e+", " 1", "1 ", "0x10", "inf", "nan",
                          "1e999", "1,5", "--1", "1.2.3"})
    EXPECT_FALSE(ScanNumber(bad, &n)) << bad;
}

TEST(NumberSyntax, RulesAndEvaluateKeepTheirDefinitions) {
  std::mt19937 rng(7);
  const std::string alphabet = "0123456789+-.eE";
  int numbers = 0;
  for (int iter = 0; iter < 200000; ++iter) {
    std::string s;
    const int len = 1 + int(rng() % 8);
    for (int k = 0; k < len; ++k)
      s += alphabet[rng() % (k == 0 || rng() % 3 == 0 ? alphabet.size() : 10)];
    double a = 0, b = 0;
    const bool old_eval = OldEvaluateNumber(s, &a);
    ASSERT_EQ(ParseNumber(s, &b), old_eval) << s;
    if (old_eval) {
      ++numbers;
      EXPECT_EQ(a, b) << s;
      EXPECT_EQ(std::signbit(a), std::signbit(b)) << s;
      NumberSyntax n;
      ASSERT_TRUE(ScanNumber(s, &n));
      EXPECT_EQ(n.leading_zero, OldLeadingZero(s)) << s;
    }
    int d1 = 0, d2 = 0;
    bool e1 = false, e2 = false;
    double v = 0;
    const bool old_rule = OldRuleDecimal(s, &d1, &e1);
    ASSERT_EQ(ParseRuleDecimal(s, &v, &d2, &e2), old_rule) << s;
    if (old_rule) {
      EXPECT_EQ(d1, d2) << s;
      EXPECT_EQ(e1, e2) << s;
      EXPECT_EQ(v, std::strtod(s.c_str(), nullptr)) << s;
    }
  }
  EXPECT_GT(numbers, 10000);
  NumberSyntax big;
  ASSERT_TRUE(ScanNumber("-999999999999999", &big));  // 15 digits: the exact integer path
  EXPECT_EQ(big.value, -999999999999999.0);
  ASSERT_TRUE(ScanNumber("12345678901234567890", &big));  // beyond: strtod's rounding
  EXPECT_EQ(big.value, std::strtod("12345678901234567890", nullptr));  // the sample exercises the accepting side too
  int64_t x = 0;
  EXPECT_TRUE(ParseRuleInteger("-123456789012345678", &x));
  EXPECT_EQ(x, -123456789012345678);
  EXPECT_TRUE(ParseRuleInteger("+7", &x));
  EXPECT_EQ(x, 7);
  for (const char* bad : {"1234567890123456789", "007", "1.0", "1e3", "", "+", "-"})
    EXPECT_FALSE(ParseRuleInteger(bad, &x)) << bad;
}

}  // namespace
}  // namespace ds
