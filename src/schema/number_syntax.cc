// ScanNumber (schema/column_type.h): the one number scanner.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "schema/column_type.h"

namespace ds {

bool ScanNumber(std::string_view s, NumberSyntax* out) {
  NumberSyntax n;
  size_t i = 0;
  auto digits = [&]() {
    size_t j = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return int(i - j);
  };
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    n.negative = s[i] == '-';
    n.plus = s[i] == '+';
    ++i;
  }
  const size_t int_start = i;
  n.int_digits = digits();
  n.leading_zero = n.int_digits > 1 && s[int_start] == '0';
  if (i < s.size() && s[i] == '.') {
    n.point = true;
    ++i;
    n.frac_digits = digits();
  }
  if (n.int_digits == 0 && n.frac_digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    n.exponent = true;
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  if (i != s.size()) return false;
  if (!n.point && !n.exponent && n.int_digits <= 15) {
    // An integer below 2^53: exact in a double, as strtod would give it.
    int64_t v = 0;
    for (size_t k = int_start; k < s.size(); ++k) v = v * 10 + (s[k] - '0');
    n.value = n.negative ? -double(v) : double(v);
    *out = n;
    return true;
  }
  // strtod on a terminated copy (the grammar above is a subset of its input,
  // so it reads the whole string).
  char small[64];
  std::string big;
  const char* text = small;
  if (s.size() < sizeof(small)) {
    std::memcpy(small, s.data(), s.size());
    small[s.size()] = '\0';
  } else {
    big.assign(s);
    text = big.c_str();
  }
  n.value = std::strtod(text, nullptr);
  if (!std::isfinite(n.value)) return false;
  *out = n;
  return true;
}

}  // namespace ds
