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

bool ParseNumber(std::string_view s, ScaledNumber* out) {
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && s[i] == '-') {
    neg = true;
    ++i;
  }
  const size_t int_start = i;
  while (i < s.size() && IsDigit(s[i])) ++i;
  const size_t int_len = i - int_start;
  if (int_len == 0) return false;
  if (int_len > 1 && s[int_start] == '0') return false;  // leading zero
  size_t frac_len = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    const size_t f0 = i;
    while (i < s.size() && IsDigit(s[i])) ++i;
    frac_len = i - f0;
    if (frac_len == 0 || frac_len > 9) return false;
  }
  if (i != s.size() || int_len + frac_len > 17) return false;
  int64_t v = 0;
  for (size_t k = int_start; k < s.size(); ++k)
    if (s[k] != '.') v = v * 10 + (s[k] - '0');
  if (neg && v == 0 && frac_len == 0) return false;  // "-0"
  out->scaled = neg ? -v : v;
  out->decimals = int(frac_len);
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

// Numeric parameters of the non-missing values; false if any is not a number
// (or `integer` and one has decimals).
bool NumericParams(const std::vector<std::string_view>& vals, bool integer, ColumnSchema* t) {
  int dmax = 0, imax = 0;
  ScaledNumber n;
  for (auto v : vals) {
    if (!ParseNumber(v, &n) || (integer && n.decimals > 0)) return false;
    dmax = std::max(dmax, n.decimals);
    const int sign = v[0] == '-' ? 1 : 0;
    imax = std::max(imax, int(v.size()) - sign - (n.decimals ? n.decimals + 1 : 0));
  }
  // Every value scaled to the column's precision must keep within 17 digits.
  if (imax + std::max(dmax, integer ? 0 : 1) > 17) return false;
  if (integer) {
    t->decimals = 0;
    return true;
  }
  if (dmax == 0) dmax = 1;  // a decimal column of whole numbers: "trim" style
  bool fixed = true, trim = true;
  for (auto v : vals) {
    ParseNumber(v, &n);
    const int64_t s = Rescale(n, dmax);
    if (FormatNumber(s, dmax, false) != v) fixed = false;
    if (FormatNumber(s, dmax, true) != v) trim = false;
    if (!fixed && !trim) return false;
  }
  t->decimals = dmax;
  t->trim = !fixed;
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
        if (!NumericParams(present, true, &t)) return bad("an integer");
        break;
      case FieldType::kDecimal:
        if (!NumericParams(present, false, &t)) return bad("a decimal with one style");
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
  } else if (!present.empty() && NumericParams(present, true, &t)) {
    t.type = FieldType::kInteger;
  } else if (!present.empty() && NumericParams(present, false, &t)) {
    t.type = FieldType::kDecimal;
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
      if (IsMissing(v)) return true;
      ScaledNumber n;
      if (!ParseNumber(v, &n) || n.decimals > t.decimals) return false;
      if (t.type == FieldType::kInteger) return n.decimals == 0;
      return FormatNumber(Rescale(n, t.decimals), t.decimals, t.trim) == v;
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
