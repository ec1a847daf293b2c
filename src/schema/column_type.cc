#include "schema/column_type.h"

#include <algorithm>
#include <set>
#include <unordered_map>

namespace ds {

namespace {

constexpr const char* kTypeNames[] = {"categorical", "integer", "decimal", "datetime",
                                      "text",        "id",      "constant", "empty"};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

int64_t Pow10(int n) {
  int64_t p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

}  // namespace

const char* FieldTypeName(FieldType t) { return kTypeNames[int(t)]; }

bool ParseFieldTypeName(std::string_view name, FieldType* out) {
  for (int i = 0; i < 8; ++i)
    if (name == kTypeNames[i]) {
      *out = FieldType(i);
      return true;
    }
  return false;
}

// ---- numbers ----

// The plain form over the one scanner (ScanNumber): -?(0|[1-9][0-9]*)(.[0-9]{1,9})?,
// at most 17 digits in all, not "-0"; the value is read exactly from the digits.
bool ParseNumber(std::string_view s, ScaledNumber* out) {
  NumberSyntax n;
  if (!ScanNumber(s, &n) || n.plus || n.exponent || n.leading_zero || n.int_digits == 0 ||
      (n.point && (n.frac_digits == 0 || n.frac_digits > 9)) || n.int_digits + n.frac_digits > 17)
    return false;
  int64_t v = 0;
  for (char c : s)
    if (IsDigit(c)) v = v * 10 + (c - '0');
  if (n.negative && v == 0 && n.frac_digits == 0) return false;  // "-0"
  out->scaled = n.negative ? -v : v;
  out->decimals = n.frac_digits;
  return true;
}

std::string FormatNumber(int64_t scaled, int decimals, bool trim) {
  const bool neg = scaled < 0;
  uint64_t mag = neg ? uint64_t(0) - uint64_t(scaled) : uint64_t(scaled);
  std::string digits = std::to_string(mag);
  if (decimals > 0 && int(digits.size()) <= decimals)
    digits.insert(0, size_t(decimals + 1 - int(digits.size())), '0');
  std::string out = neg ? "-" : "";
  if (decimals == 0) return out + digits;
  std::string ip = digits.substr(0, digits.size() - size_t(decimals));
  std::string fp = digits.substr(digits.size() - size_t(decimals));
  if (trim) {
    while (!fp.empty() && fp.back() == '0') fp.pop_back();
  }
  out += ip;
  if (!fp.empty()) out += "." + fp;
  if (out == "-0") return "0";
  return out;
}

int64_t Rescale(const ScaledNumber& n, int decimals) {
  return n.scaled * Pow10(decimals - n.decimals);
}

namespace {

using u128 = unsigned __int128;

u128 Pow10W(int n) {  // n <= 38
  u128 p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

// Decimals the value carries: the fewest d <= scale at which rounding changes
// it by at most 1e-12 of itself; `scale` when only zeros would be dropped (the
// written precision of "1.50" is 2) or when no such d exists.
int Precision(u128 mag, int scale) {
  for (int d = 0; d < scale; ++d) {
    const u128 q = Pow10W(scale - d), r = mag % q;
    const u128 err = std::min(r, q - r);
    if (err == 0) return scale;  // exact at d: trailing zeros, keep as written
    if (mag / 1000000000000ull >= err || (mag < 1000000000000ull && err * 1000000000000ull <= mag))
      return d;
  }
  return scale;
}

}  // namespace

// Stated over the one scanner (ScanNumber): the syntax there, the exact value
// read here from the digits (no '+', no redundant leading zero, no ".5" or
// "1.", an exponent of at most 3 digits).
bool ParseDecimal(std::string_view s, DecimalValue* out) {
  NumberSyntax n;
  if (!ScanNumber(s, &n) || n.plus || n.leading_zero || n.int_digits == 0 ||
      (n.point && n.frac_digits == 0))
    return false;
  DecimalValue v;
  v.neg = n.negative;
  v.plain = !n.exponent;
  const size_t int_start = n.negative ? 1 : 0;
  const size_t int_len = size_t(n.int_digits), frac_len = size_t(n.frac_digits);
  int exp = 0;
  if (n.exponent) {
    size_t i = int_start + int_len + (n.point ? frac_len + 1 : 0) + 1;  // past the 'e'
    bool eneg = false;
    if (s[i] == '+' || s[i] == '-') eneg = s[i++] == '-';
    if (s.size() - i > 3) return false;
    for (; i < s.size(); ++i) exp = exp * 10 + (s[i] - '0');
    if (eneg) exp = -exp;
  }
  size_t sig = 0;  // significant digits (leading zeros of "0.00012" are not)
  u128 mag = 0;
  for (size_t k = int_start; k < int_start + int_len + (frac_len ? frac_len + 1 : 0); ++k) {
    if (s[k] == '.') continue;
    if (mag == 0 && s[k] == '0') continue;
    if (++sig > 38) return false;
    mag = mag * 10 + u128(s[k] - '0');
  }
  int scale = int(frac_len) - exp;
  if (scale < 0) {
    if (sig + size_t(-scale) > 38) return false;
    mag *= Pow10W(-scale);
    scale = 0;
  }
  if (scale > 38) return false;  // below 1e-38: not a value of a table
  v.mag = mag;
  v.scale = scale;
  v.precision = Precision(mag, scale);
  *out = v;
  return true;
}

bool ScaleDecimal(const DecimalValue& v, int decimals, int64_t* scaled) {
  u128 m = v.mag;
  if (decimals >= v.scale) {
    const int up = decimals - v.scale;
    if (up > 17 || m >= Pow10W(17 - up)) return false;
    m *= Pow10W(up);
  } else {
    const u128 q = Pow10W(v.scale - decimals);
    const u128 r = m % q;
    m = m / q + (2 * r >= q ? 1 : 0);
  }
  if (m >= u128(100000000000000000ull)) return false;
  *scaled = v.neg ? -int64_t(m) : int64_t(m);
  return true;
}

// ---- dates ----

int DaysInMonth(int year, int month) {
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month < 1 || month > 12) return 0;
  if (month == 2) {
    const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    return leap ? 29 : 28;
  }
  return kDays[month - 1];
}

Result<DateFormat> DateFormat::Parse(std::string_view spec) {
  DateFormat f;
  f.spec_ = std::string(spec);
  std::set<char> seen;
  for (size_t i = 0; i < spec.size(); ++i) {
    if (spec[i] != '%') {
      if (f.pieces_.empty() || f.pieces_.back().field != 0) f.pieces_.push_back({});
      f.pieces_.back().literal += spec[i];
      continue;
    }
    Piece p;
    if (i + 1 < spec.size() && spec[i + 1] == '-') {
      p.padded = false;
      ++i;
    }
    if (i + 1 >= spec.size()) return DS_ERR(kInvalidArgument, "datetime format '{}': ends in %", spec);
    const char c = spec[++i];
    if (std::string_view("YmdHMS").find(c) == std::string_view::npos || (c == 'Y' && !p.padded))
      return DS_ERR(kInvalidArgument, "datetime format '{}': unknown directive near '%{}'", spec, c);
    if (!seen.insert(c).second)
      return DS_ERR(kInvalidArgument, "datetime format '{}': %{} twice", spec, c);
    p.field = c;
    f.pieces_.push_back(p);
  }
  if (!seen.count('Y') || !seen.count('m') || !seen.count('d'))
    return DS_ERR(kInvalidArgument, "datetime format '{}': needs %Y, %m and %d", spec);
  const char order[] = {'Y', 'm', 'd', 'H', 'M', 'S'};
  for (int k = 0; k < 6; ++k)
    if (seen.count(order[k])) f.parts_.push_back(DatePart(k));
  if (seen.count('S') && !seen.count('M'))
    return DS_ERR(kInvalidArgument, "datetime format '{}': %S without %M", spec);
  return f;
}

bool DateFormat::Read(std::string_view s, DateTime* out) const {
  DateTime d;
  size_t i = 0;
  for (const Piece& p : pieces_) {
    if (p.field == 0) {
      if (s.substr(i, p.literal.size()) != p.literal) return false;
      i += p.literal.size();
      continue;
    }
    size_t n = 0;
    while (i + n < s.size() && n < (p.field == 'Y' ? 4u : 2u) && IsDigit(s[i + n])) ++n;
    if (p.field == 'Y' ? n != 4 : (p.padded ? n != 2 : (n == 0 || (n == 2 && s[i] == '0'))))
      return false;
    int v = 0;
    for (size_t k = 0; k < n; ++k) v = v * 10 + (s[i + k] - '0');
    i += n;
    switch (p.field) {
      case 'Y': d.year = v; break;
      case 'm': d.month = v; break;
      case 'd': d.day = v; break;
      case 'H': d.hour = v; break;
      case 'M': d.minute = v; break;
      case 'S': d.second = v; break;
    }
  }
  if (i != s.size()) return false;
  if (d.month < 1 || d.month > 12 || d.day < 1 || d.day > DaysInMonth(d.year, d.month))
    return false;
  if (d.hour > 23 || d.minute > 59 || d.second > 59) return false;
  *out = d;
  return true;
}

std::string DateFormat::Write(const DateTime& d) const {
  std::string out;
  for (const Piece& p : pieces_) {
    if (p.field == 0) {
      out += p.literal;
      continue;
    }
    int v = 0;
    switch (p.field) {
      case 'Y': v = d.year; break;
      case 'm': v = d.month; break;
      case 'd': v = d.day; break;
      case 'H': v = d.hour; break;
      case 'M': v = d.minute; break;
      case 'S': v = d.second; break;
    }
    std::string t = std::to_string(v);
    const size_t width = p.field == 'Y' ? 4 : (p.padded ? 2 : 1);
    if (t.size() < width) t.insert(0, width - t.size(), '0');
    out += t;
  }
  return out;
}

const std::vector<std::string>& DatetimeFormats() {
  static const std::vector<std::string> f = {
      "%Y-%m-%d",          "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M",
      "%Y-%m-%dT%H:%M",    "%Y/%m/%d",          "%m/%d/%Y",          "%-m/%-d/%Y",
      "%d/%m/%Y",          "%-d/%-m/%Y",        "%m/%d/%Y %H:%M",    "%-m/%-d/%Y %H:%M",
      "%-m/%-d/%Y %-H:%M", "%m/%d/%Y %H:%M:%S", "%d.%m.%Y",          "%m-%d-%Y"};
  return f;
}

const std::vector<std::string>& MissingSpellings() {
  static const std::vector<std::string> m = {"",     "NA",   "N/A",  "NaN", "nan", "null",
                                             "NULL", "None", "none", "?",   "#N/A", "n/a"};
  return m;
}

bool IsMissing(std::string_view s) {
  if (s.size() > 4) return false;
  for (const auto& m : MissingSpellings())
    if (s == m) return true;
  return false;
}

// ---- column types ----

namespace {

// Numeric parameters of the non-missing values (see "Numbers" in the header);
// false if any is not a number, or `integer` and the precision is not 0.
bool NumericParams(const std::vector<std::string_view>& vals, bool integer, bool forced,
                   ColumnSchema* t) {
  std::vector<DecimalValue> parsed(vals.size());
  std::vector<int64_t> at(10, 0);  // values of each precision (10+ counted at 9)
  for (size_t k = 0; k < vals.size(); ++k) {
    if (!ParseDecimal(vals[k], &parsed[k])) return false;
    ++at[size_t(std::min(parsed[k].precision, 9))];
  }
  // D: the smallest precision that all but 1% of the values have (all of a
  // forced column's, so that forcing never rounds).
  const int64_t spare = forced ? 0 : int64_t(vals.size()) / 100;
  int dmax = 9;
  for (int64_t above = 0, d = 9; d >= 0; --d) {  // the smallest d with <= spare above it
    if (above > spare) break;
    dmax = int(d);
    above += at[size_t(d)];
  }
  if (integer && dmax > 0) return false;
  if (!integer && dmax == 0 && forced) dmax = 1;  // a forced decimal column of whole numbers
  bool fixed = true, trim = true, normalized = false;
  for (size_t k = 0; k < vals.size(); ++k) {
    const DecimalValue& v = parsed[k];
    int64_t s;
    if (!ScaleDecimal(v, dmax, &s)) return false;
    if (!v.plain || v.precision != v.scale || v.scale > dmax) {
      normalized = true;
      continue;
    }
    if (FormatNumber(s, dmax, false) != vals[k]) fixed = false;
    if (FormatNumber(s, dmax, true) != vals[k]) trim = false;
  }
  if (!fixed && !trim) normalized = true;
  t->decimals = dmax;
  t->trim = !fixed;
  t->normalized = normalized;
  return true;
}

bool DatetimeParams(const std::vector<std::string_view>& vals, const std::string& forced_format,
                    ColumnSchema* t) {
  if (vals.empty()) return false;
  std::vector<std::string> formats = DatetimeFormats();
  if (!forced_format.empty()) formats = {forced_format};
  for (const auto& spec : formats) {
    auto f = DateFormat::Parse(spec);
    if (!f.ok()) continue;
    DateTime d;
    bool all = true;
    for (auto v : vals)
      if (!f->Read(v, &d)) {
        all = false;
        break;
      }
    if (all) {
      t->format = spec;
      return true;
    }
  }
  return false;
}

}  // namespace

Result<ColumnSchema> InferColumnType(const std::vector<std::string_view>& values,
                                   const std::string& forced, const TypingOptions& opts) {
  ColumnSchema t;
  std::vector<std::string_view> present;
  std::unordered_map<std::string_view, int64_t> counts;
  bool all_empty = true;
  size_t total_len = 0;
  bool space = false;
  for (auto v : values) {
    ++counts[v];
    if (!v.empty()) all_empty = false;
    if (IsMissing(v)) {
      ++t.missing;
    } else {
      present.push_back(v);
      total_len += v.size();
      if (!space && v.find_first_of(" \t\r\n") != std::string_view::npos) space = true;
    }
  }
  t.distinct = int64_t(counts.size());
  std::string name = forced, arg;
  if (auto colon = forced.find(':'); colon != std::string::npos) {
    name = forced.substr(0, colon);
    arg = forced.substr(colon + 1);
  }
  if (!forced.empty()) {
    if (!ParseFieldTypeName(name, &t.type) || (!arg.empty() && t.type != FieldType::kDatetime))
      return DS_ERR(kInvalidArgument,
                    "field type '{}': expected categorical, integer, decimal, datetime[:format], "
                    "text, id, constant or empty",
                    forced);
    auto bad = [&](const char* what) -> Status {
      for (auto v : values)
        if (!ValueFitsType(t, v))
          return DS_ERR(kInvalidInput, "value '{}' is not {}", std::string(v), what);
      return DS_ERR(kInvalidInput, "values are not {}", what);
    };
    switch (t.type) {
      case FieldType::kInteger:
        if (!NumericParams(present, true, true, &t)) return bad("an integer");
        break;
      case FieldType::kDecimal:
        if (!NumericParams(present, false, true, &t)) return bad("a number");
        break;
      case FieldType::kDatetime:
        if (!arg.empty()) DS_RETURN_IF_ERROR(DateFormat::Parse(arg).status());
        if (!DatetimeParams(present, arg, &t)) return bad("a date of one format");
        break;
      case FieldType::kConstant:
        if (t.distinct > 1) return DS_ERR(kInvalidInput, "{} distinct values, not constant", t.distinct);
        if (!values.empty()) t.constant = std::string(values[0]);
        break;
      case FieldType::kEmpty:
        if (!all_empty) return bad("empty");
        break;
      default: break;
    }
    return t;
  }
  if (all_empty) {
    t.type = FieldType::kEmpty;
  } else if (t.distinct == 1) {
    t.type = FieldType::kConstant;
    t.constant = std::string(values[0]);
  } else if (!present.empty() && NumericParams(present, false, false, &t)) {
    t.type = t.decimals == 0 ? FieldType::kInteger : FieldType::kDecimal;
  } else if (DatetimeParams(present, "", &t)) {
    t.type = FieldType::kDatetime;
  } else if (double(t.distinct) <= std::max(20.0, 0.9 * double(values.size())) &&
             t.distinct <= opts.max_categories) {
    t.type = FieldType::kCategorical;
  } else if (!space && !present.empty() && total_len <= 40 * present.size()) {
    t.type = FieldType::kId;
  } else {
    t.type = FieldType::kText;
  }
  return t;
}

bool ValueFitsType(const ColumnSchema& t, std::string_view v) {
  switch (t.type) {
    case FieldType::kInteger:
    case FieldType::kDecimal: {
      int64_t s;
      return IsMissing(v) || ScaleToColumn(t, v, &s);
    }
    case FieldType::kDatetime: {
      if (IsMissing(v)) return true;
      auto f = DateFormat::Parse(t.format);
      DateTime d;
      return f.ok() && f->Read(v, &d);
    }
    case FieldType::kConstant: return v == t.constant;
    case FieldType::kEmpty: return v.empty();
    default: return true;
  }
}

bool ScaleToColumn(const ColumnSchema& t, std::string_view v, int64_t* scaled) {
  DecimalValue d;
  if (!ParseDecimal(v, &d) || !ScaleDecimal(d, t.decimals, scaled)) return false;
  if (t.normalized) return true;
  return d.plain && d.scale <= t.decimals && FormatNumber(*scaled, t.decimals, t.trim) == v;
}

Result<std::map<std::string, std::string>> ParseFieldTypes(std::string_view spec) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t end = spec.find(';', start);
    if (end == std::string_view::npos) end = spec.size();
    std::string_view part = spec.substr(start, end - start);
    start = end + 1;
    if (part.empty()) continue;
    const size_t eq = part.rfind('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == part.size())
      return DS_ERR(kInvalidArgument, "config key 'field_types': '{}' is not column=type",
                    std::string(part));
    const std::string col(part.substr(0, eq)), type(part.substr(eq + 1));
    const size_t colon = type.find(':');
    FieldType ft;
    if (!ParseFieldTypeName(type.substr(0, colon), &ft) ||
        (colon != std::string::npos && ft != FieldType::kDatetime))
      return DS_ERR(kInvalidArgument,
                    "config key 'field_types': column '{}': type '{}' is not one of categorical, "
                    "integer, decimal, datetime[:format], text, id, constant, empty",
                    col, type);
    if (colon != std::string::npos) {
      auto fmt = DateFormat::Parse(type.substr(colon + 1));
      if (!fmt.ok())
        return DS_ERR(kInvalidArgument, "config key 'field_types': column '{}': {}", col,
                      fmt.status().message());
    }
    out[col] = type;
  }
  return out;
}

}  // namespace ds
