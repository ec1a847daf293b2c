#include "schema/public_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_set>

#include "util/fs.h"
#include "util/utf8.h"

namespace ds {

using Json = nlohmann::json;

namespace {


double Pow10d(int n) { return std::pow(10.0, n); }


// The keys a column of `type` may have.
const std::set<std::string>& AllowedKeys(FieldType t) {
  static const std::set<std::string> cat = {"name", "type", "values"};
  static const std::set<std::string> num = {"name",  "type", "min",    "max",
                                            "decimals", "style", "bins", "missing"};
  static const std::set<std::string> date = {"name", "type", "format", "min_year", "max_year",
                                             "missing"};
  static const std::set<std::string> text = {"name", "type", "max_length", "alphabet", "empty_ok"};
  static const std::set<std::string> cons = {"name", "type", "value"};
  static const std::set<std::string> empty = {"name", "type"};
  if (t == FieldType::kCategorical) return cat;
  if (IsNumericField(t)) return num;
  if (t == FieldType::kDatetime) return date;
  if (IsTextField(t)) return text;
  return t == FieldType::kConstant ? cons : empty;
}

template <typename T>
Status Get(const Json& o, const char* key, T* out, const std::string& where) {
  if (!o.contains(key)) return Status::Ok();
  try {
    *out = o.at(key).get<T>();
  } catch (const Json::exception&) {
    return DS_ERR(kInvalidInput, "{}: key '{}' has the wrong type", where, key);
  }
  return Status::Ok();
}

Status Require(const Json& o, const char* key, const std::string& where) {
  if (!o.contains(key)) return DS_ERR(kInvalidInput, "{}: key '{}' is required", where, key);
  return Status::Ok();
}

Status CheckNumeric(const PublicColumn& c, const std::string& where) {
  if (!std::isfinite(c.min) || !std::isfinite(c.max) || c.min > c.max)
    return DS_ERR(kInvalidInput, "{}: needs min <= max (finite numbers), got {} and {}", where,
                  c.min, c.max);
  if (c.type == FieldType::kInteger && c.decimals != 0)
    return DS_ERR(kInvalidInput, "{}: an integer column has decimals 0, got {}", where, c.decimals);
  if (c.type == FieldType::kDecimal && (c.decimals < 1 || c.decimals > 9))
    return DS_ERR(kInvalidInput, "{}: key 'decimals' must be in 1..9, got {}", where, c.decimals);
  const double scale = Pow10d(c.decimals);
  if (std::max(std::fabs(c.min), std::fabs(c.max)) * scale > 1e15)
    return DS_ERR(kInvalidInput, "{}: bounds x 10^decimals must stay within 1e15", where);
  int64_t lo = 0, hi = 0;
  ScaledBounds(c, &lo, &hi);
  if (lo > hi)
    return DS_ERR(kInvalidInput, "{}: no number at {} decimals in [{}, {}]", where, c.decimals,
                  c.min, c.max);
  if (c.bins < 0 || c.bins > PublicSchema::kExactValues)
    return DS_ERR(kInvalidInput, "{}: key 'bins' must be in 1..{}, got {}", where,
                  PublicSchema::kExactValues, c.bins);
  return Status::Ok();
}

Status CheckMissing(const PublicColumn& c, const std::string& where) {
  std::set<std::string> seen;
  for (const auto& m : c.missing) {
    if (!IsMissing(m))
      return DS_ERR(kInvalidInput, "{}: '{}' in 'missing' is not a missing spelling", where, m);
    if (!seen.insert(m).second)
      return DS_ERR(kInvalidInput, "{}: missing spelling '{}' listed twice", where, m);
  }
  return Status::Ok();
}

Status CheckText(PublicColumn* c, const std::string& where) {
  if (c->max_length < 1 || c->max_length > PublicSchema::kMaxTextLength)
    return DS_ERR(kInvalidInput, "{}: key 'max_length' must be in 1..{}, got {}", where,
                  PublicSchema::kMaxTextLength, c->max_length);
  if (c->alphabet.empty()) c->alphabet = PublicSchema::DefaultAlphabet();
  bool ok = true;
  std::vector<std::string> cs = SplitCodePoints(c->alphabet, &ok);
  if (!ok) return DS_ERR(kInvalidInput, "{}: 'alphabet' is not valid UTF-8", where);
  std::set<std::string> uniq(cs.begin(), cs.end());
  std::string joined;
  for (const auto& ch : uniq) joined += ch;
  c->alphabet = joined;  // sorted, unique
  return Status::Ok();
}

Status CheckColumn(PublicColumn* c, const std::string& where) {
  if (c->type == FieldType::kCategorical) {
    if (c->values.empty()) return DS_ERR(kInvalidInput, "{}: key 'values' must not be empty", where);
    std::set<std::string> seen;
    for (const auto& v : c->values) {
      if (!IsValidUtf8(v)) return DS_ERR(kInvalidInput, "{}: a value is not valid UTF-8", where);
      if (!seen.insert(v).second)
        return DS_ERR(kInvalidInput, "{}: value '{}' listed twice", where, v);
    }
  } else if (IsNumericField(c->type)) {
    DS_RETURN_IF_ERROR(CheckNumeric(*c, where));
    DS_RETURN_IF_ERROR(CheckMissing(*c, where));
  } else if (c->type == FieldType::kDatetime) {
    auto f = DateFormat::Parse(c->format);
    if (!f.ok()) return DS_ERR(kInvalidInput, "{}: key 'format': {}", where, f.status().message());
    if (c->min_year < 0 || c->max_year > 9999 || c->min_year > c->max_year)
      return DS_ERR(kInvalidInput, "{}: needs 0 <= min_year <= max_year <= 9999, got {} and {}",
                    where, c->min_year, c->max_year);
    DS_RETURN_IF_ERROR(CheckMissing(*c, where));
  } else if (IsTextField(c->type)) {
    DS_RETURN_IF_ERROR(CheckText(c, where));
  }
  return Status::Ok();
}

Status ParseColumn(const Json& o, const std::string& where, PublicColumn* c) {
  if (!o.is_object()) return DS_ERR(kInvalidInput, "{}: expected an object", where);
  DS_RETURN_IF_ERROR(Require(o, "name", where));
  DS_RETURN_IF_ERROR(Require(o, "type", where));
  DS_RETURN_IF_ERROR(Get(o, "name", &c->name, where));
  std::string type;
  DS_RETURN_IF_ERROR(Get(o, "type", &type, where));
  const std::string at = fmt::format("{} ('{}')", where, c->name);
  if (!ParseFieldTypeName(type, &c->type))
    return DS_ERR(kInvalidInput, "{}: unknown type '{}'", at, type);
  for (const auto& [key, value] : o.items())
    if (!AllowedKeys(c->type).count(key))
      return DS_ERR(kInvalidInput, "{}: key '{}' is not allowed for type {}", at, key, type);
  if (c->type == FieldType::kCategorical) DS_RETURN_IF_ERROR(Require(o, "values", at));
  if (IsNumericField(c->type)) {
    DS_RETURN_IF_ERROR(Require(o, "min", at));
    DS_RETURN_IF_ERROR(Require(o, "max", at));
    if (c->type == FieldType::kDecimal) DS_RETURN_IF_ERROR(Require(o, "decimals", at));
  }
  if (c->type == FieldType::kDatetime) {
    for (const char* k : {"format", "min_year", "max_year"}) DS_RETURN_IF_ERROR(Require(o, k, at));
  }
  if (IsTextField(c->type)) DS_RETURN_IF_ERROR(Require(o, "max_length", at));
  if (c->type == FieldType::kConstant) DS_RETURN_IF_ERROR(Require(o, "value", at));
  std::string style = "fixed";
  DS_RETURN_IF_ERROR(Get(o, "values", &c->values, at));
  DS_RETURN_IF_ERROR(Get(o, "min", &c->min, at));
  DS_RETURN_IF_ERROR(Get(o, "max", &c->max, at));
  DS_RETURN_IF_ERROR(Get(o, "decimals", &c->decimals, at));
  DS_RETURN_IF_ERROR(Get(o, "style", &style, at));
  DS_RETURN_IF_ERROR(Get(o, "bins", &c->bins, at));
  DS_RETURN_IF_ERROR(Get(o, "missing", &c->missing, at));
  DS_RETURN_IF_ERROR(Get(o, "format", &c->format, at));
  DS_RETURN_IF_ERROR(Get(o, "min_year", &c->min_year, at));
  DS_RETURN_IF_ERROR(Get(o, "max_year", &c->max_year, at));
  DS_RETURN_IF_ERROR(Get(o, "max_length", &c->max_length, at));
  DS_RETURN_IF_ERROR(Get(o, "alphabet", &c->alphabet, at));
  DS_RETURN_IF_ERROR(Get(o, "empty_ok", &c->empty_ok, at));
  DS_RETURN_IF_ERROR(Get(o, "value", &c->value, at));
  if (style != "fixed" && style != "trim")
    return DS_ERR(kInvalidInput, "{}: key 'style' must be fixed or trim, got '{}'", at, style);
  c->trim = style == "trim";
  if (o.contains("bins") && c->bins == 0)
    return DS_ERR(kInvalidInput, "{}: key 'bins' must be in 1..{}, got 0", at,
                  PublicSchema::kExactValues);
  return CheckColumn(c, at);
}

// A round bound outside x: 72 -> 80, 118.75 -> 200, 0 -> 0, -3 -> -3 (down).
double RoundOut(double x, bool up) {
  if (x == 0) return 0;
  const double mag = Pow10d(int(std::floor(std::log10(std::fabs(x)))));
  return (up ? std::ceil(x / mag) : std::floor(x / mag)) * mag;
}

void TemplateValues(const ColumnSchema& t, const std::vector<std::string_view>& vals,
                    PublicColumn* c) {
  std::set<std::string> distinct, missing, chars;
  double lo = INFINITY, hi = -INFINITY;
  int ylo = 9999, yhi = 0, maxlen = 0;
  auto fmt = DateFormat::Parse(t.format.empty() ? "%Y" : t.format);
  for (auto v : vals) {
    distinct.emplace(v);
    if (IsNumericField(c->type) || c->type == FieldType::kDatetime) {
      if (IsMissing(v)) {
        missing.emplace(v);
      } else if (c->type == FieldType::kDatetime) {
        DateTime d;
        if (fmt.ok() && fmt->Read(v, &d)) ylo = std::min(ylo, d.year), yhi = std::max(yhi, d.year);
      } else {
        NumberSyntax n;
        if (ScanNumber(v, &n)) lo = std::min(lo, n.value), hi = std::max(hi, n.value);
      }
    } else if (IsTextField(c->type)) {
      bool ok = true;
      auto cs = SplitCodePoints(v, &ok);
      maxlen = std::max(maxlen, int(cs.size()));
      chars.insert(cs.begin(), cs.end());
      if (v.empty()) c->empty_ok = true;
    }
  }
  c->missing.assign(missing.begin(), missing.end());
  if (c->type == FieldType::kCategorical) c->values.assign(distinct.begin(), distinct.end());
  if (IsNumericField(c->type) && lo <= hi) {
    c->min = RoundOut(lo, false);
    c->max = RoundOut(hi, true);
  }
  if (c->type == FieldType::kDatetime) c->min_year = ylo, c->max_year = std::max(ylo, yhi);
  if (IsTextField(c->type)) {
    c->max_length = std::clamp(maxlen, 1, PublicSchema::kMaxTextLength);
    for (const auto& ch : chars) c->alphabet += ch;
    const std::string ascii = PublicSchema::DefaultAlphabet();
    if (std::all_of(chars.begin(), chars.end(),
                    [&](const std::string& ch) { return ascii.find(ch) != std::string::npos; }))
      c->alphabet.clear();  // the default covers it
  }
}

}  // namespace

void ScaledBounds(const PublicColumn& c, int64_t* lo, int64_t* hi) {
  *lo = int64_t(std::ceil(c.min * Pow10d(c.decimals) - 1e-9));
  *hi = int64_t(std::floor(c.max * Pow10d(c.decimals) + 1e-9));
}

std::vector<int64_t> UniformBinEdges(int64_t lo, int64_t hi, int bins) {
  const int64_t n = hi - lo + 1;
  int64_t nb = bins > 0 ? bins : (n <= PublicSchema::kExactValues ? n : PublicSchema::kDefaultBins);
  nb = std::clamp<int64_t>(nb, 1, n);
  std::vector<int64_t> edges;
  for (int64_t k = 0; k < nb; ++k) {
    const int64_t e = lo + int64_t((__int128)k * n / nb);
    if (edges.empty() || e > edges.back()) edges.push_back(e);
  }
  edges.push_back(hi + 1);
  return edges;
}

std::string PublicSchema::DefaultAlphabet() {
  std::string s;
  for (char ch = 0x20; ch < 0x7f; ++ch) s += ch;
  return s;
}

// The optional "privacy" object of a privately derived schema.
Status ParsePrivacy(const Json& j, const std::string& source, PublicSchema* s) {
  if (!j.contains("privacy")) return Status::Ok();
  const Json& p = j.at("privacy");
  const std::string at = source + ": privacy";
  if (!p.is_object()) return DS_ERR(kInvalidInput, "{}: expected an object", at);
  for (const auto& [key, value] : p.items())
    if (key != "epsilon" && key != "delta" && key != "mechanism")
      return DS_ERR(kInvalidInput, "{}: unknown key '{}'", at, key);
  DS_RETURN_IF_ERROR(Get(p, "epsilon", &s->derived_epsilon, at));
  DS_RETURN_IF_ERROR(Get(p, "delta", &s->derived_delta, at));
  if (!(s->derived_epsilon > 0) || !std::isfinite(s->derived_epsilon) ||
      !(s->derived_delta >= 0 && s->derived_delta < 1))
    return DS_ERR(kInvalidInput, "{}: needs epsilon > 0 and delta in [0, 1)", at);
  return Status::Ok();
}

Result<PublicSchema> ParsePublicSchema(const Json& j, const std::string& source) {
  PublicSchema s;
  s.source = source;
  if (!j.is_object() || !j.contains("columns") || !j.at("columns").is_array())
    return DS_ERR(kInvalidInput, "{}: expected an object with a 'columns' array", source);
  for (const auto& [key, value] : j.items())
    if (key != "columns" && key != "note" && key != "privacy")
      return DS_ERR(kInvalidInput, "{}: unknown key '{}'", source, key);
  DS_RETURN_IF_ERROR(ParsePrivacy(j, source, &s));
  std::set<std::string> names;
  for (size_t i = 0; i < j.at("columns").size(); ++i) {
    PublicColumn c;
    DS_RETURN_IF_ERROR(
        ParseColumn(j.at("columns")[i], fmt::format("{}: columns[{}]", source, i), &c));
    if (!names.insert(c.name).second)
      return DS_ERR(kInvalidInput, "{}: column '{}' appears twice", source, c.name);
    s.columns.push_back(std::move(c));
  }
  if (s.columns.empty()) return DS_ERR(kInvalidInput, "{}: 'columns' is empty", source);
  return s;
}

Result<PublicSchema> LoadPublicSchema(const std::string& path) {
  DS_ASSIGN_OR_RETURN(std::string text, ReadFile(path, size_t{64} << 20));
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {
    return DS_ERR(kInvalidInput, "{}: not valid JSON: {}", path, e.what());
  }
  return ParsePublicSchema(j, path);
}

Json PublicSchemaToJson(const PublicSchema& s) {
  Json cols = Json::array();
  for (const PublicColumn& c : s.columns) {
    Json o;
    o["name"] = c.name;
    o["type"] = FieldTypeName(c.type);
    if (c.type == FieldType::kCategorical) o["values"] = c.values;
    if (IsNumericField(c.type)) {
      o["min"] = c.min;
      o["max"] = c.max;
      o["decimals"] = c.decimals;
      if (c.type == FieldType::kDecimal) o["style"] = c.trim ? "trim" : "fixed";
      if (c.bins > 0) o["bins"] = c.bins;
    }
    if (c.type == FieldType::kDatetime) {
      o["format"] = c.format;
      o["min_year"] = c.min_year;
      o["max_year"] = c.max_year;
    }
    if ((IsNumericField(c.type) || c.type == FieldType::kDatetime) && !c.missing.empty())
      o["missing"] = c.missing;
    if (IsTextField(c.type)) {
      o["max_length"] = c.max_length;
      if (!c.alphabet.empty() && c.alphabet != PublicSchema::DefaultAlphabet())
        o["alphabet"] = c.alphabet;
      if (c.empty_ok) o["empty_ok"] = true;
    }
    if (c.type == FieldType::kConstant) o["value"] = c.value;
    cols.push_back(std::move(o));
  }
  Json out{{"columns", cols}};
  if (s.derived_epsilon > 0)
    out["privacy"] = {{"epsilon", s.derived_epsilon},
                      {"delta", s.derived_delta},
                      {"mechanism", "Gaussian histograms (schema/private_schema.h)"}};
  return out;
}

Status CheckSchemaHeader(const PublicSchema& s, const std::vector<std::string>& header) {
  for (size_t i = 0; i < std::max(header.size(), s.columns.size()); ++i) {
    const std::string h = i < header.size() ? header[i] : "(none)";
    const std::string c = i < s.columns.size() ? s.columns[i].name : "(none)";
    if (h != c)
      return DS_ERR(kInvalidInput,
                    "{}: column {} is '{}' but the data's header has '{}' there (the schema "
                    "lists every column, in header order)",
                    s.source, i + 1, c, h);
  }
  return Status::Ok();
}

Result<PublicSchema> SchemaTemplate(const std::vector<std::string>& header,
                                    const std::vector<std::vector<std::string>>& records,
                                    const std::map<std::string, std::string>& field_types) {
  PublicSchema s;
  s.source = "template";
  for (size_t col = 0; col < header.size(); ++col) {
    std::vector<std::string_view> vals;
    vals.reserve(records.size());
    for (const auto& r : records) vals.push_back(r.at(col));
    auto it = field_types.find(header[col]);
    auto typed = InferColumnType(vals, it == field_types.end() ? "" : it->second);
    if (!typed.ok()) return typed.status().WithContext(fmt::format("column '{}'", header[col]));
    PublicColumn c;
    c.name = header[col];
    c.type = typed->type;
    c.decimals = typed->decimals;
    c.trim = typed->trim;
    c.format = typed->format;
    c.value = typed->constant;
    TemplateValues(*typed, vals, &c);
    s.columns.push_back(std::move(c));
  }
  return s;
}

bool ConformValue(const PublicColumn& c, std::string* v, bool* clipped) {
  *clipped = false;
  const FieldType t = c.type;
  if ((IsNumericField(t) || t == FieldType::kDatetime) && IsMissing(*v)) {
    if (std::find(c.missing.begin(), c.missing.end(), *v) != c.missing.end()) return true;
    if (c.missing.empty()) return false;
    *v = c.missing[0];
    *clipped = true;
    return true;
  }
  if (t == FieldType::kCategorical)
    return std::find(c.values.begin(), c.values.end(), *v) != c.values.end();
  if (IsNumericField(t)) {
    DecimalValue d;
    if (!ParseDecimal(*v, &d)) return false;
    int64_t lo = 0, hi = 0, scaled = 0;
    ScaledBounds(c, &lo, &hi);
    if (!ScaleDecimal(d, c.decimals, &scaled)) scaled = d.neg ? lo : hi;
    const int64_t kept = std::clamp(scaled, lo, hi);
    *clipped = kept != scaled || d.precision > c.decimals;
    *v = FormatNumber(kept, c.decimals, c.trim);
    return true;
  }
  if (t == FieldType::kDatetime) {
    auto f = DateFormat::Parse(c.format);
    DateTime d;
    if (!f.ok() || !f->Read(*v, &d)) return false;
    const int y = std::clamp(d.year, c.min_year, c.max_year);
    if (y != d.year) {
      d.year = y;
      d.day = std::min(d.day, DaysInMonth(d.year, d.month));
      *clipped = true;
    }
    *v = f->Write(d);
    return true;
  }
  if (IsTextField(t)) {
    bool ok = true;
    auto cs = SplitCodePoints(*v, &ok);
    if (!ok || int(cs.size()) > c.max_length || (cs.empty() && !c.empty_ok)) return false;
    return std::all_of(cs.begin(), cs.end(), [&](const std::string& ch) {
      return c.alphabet.find(ch) != std::string::npos;
    });
  }
  const std::string want = t == FieldType::kConstant ? c.value : "";
  *clipped = *v != want;
  *v = want;
  return true;
}

ConformReport ConformRecords(const PublicSchema& s, std::vector<std::vector<std::string>>* records,
                             std::vector<int64_t>* lines) {
  ConformReport rep;
  const size_t K = s.columns.size();
  rep.clipped.assign(K, 0);
  rep.dropped_by.assign(K, 0);
  std::vector<std::unordered_set<std::string>> cats(K);
  for (size_t k = 0; k < K; ++k)
    if (s.columns[k].type == FieldType::kCategorical)
      cats[k].insert(s.columns[k].values.begin(), s.columns[k].values.end());
  size_t out = 0;
  for (size_t r = 0; r < records->size(); ++r) {
    std::vector<std::string>& rec = (*records)[r];
    bool keep = rec.size() == K;
    for (size_t k = 0; keep && k < K; ++k) {
      bool clipped = false;
      if (s.columns[k].type == FieldType::kCategorical) {
        keep = cats[k].count(rec[k]) > 0;
      } else {
        keep = ConformValue(s.columns[k], &rec[k], &clipped);
      }
      if (!keep) ++rep.dropped_by[k];
      if (clipped) ++rep.clipped[k];
    }
    if (!keep) {
      ++rep.dropped;
      continue;
    }
    if (out != r) (*records)[out] = std::move(rec);
    if (lines && r < lines->size()) (*lines)[out] = (*lines)[r];
    ++out;
  }
  records->resize(out);
  if (lines && lines->size() >= out) lines->resize(out);
  return rep;
}

std::string ConformReport::Describe(const PublicSchema& s) const {
  std::vector<std::string> parts;
  for (size_t k = 0; k < s.columns.size(); ++k) {
    if (k < dropped_by.size() && dropped_by[k])
      parts.push_back(fmt::format("'{}': {} records dropped (value outside the schema)",
                                  s.columns[k].name, dropped_by[k]));
    if (k < clipped.size() && clipped[k])
      parts.push_back(fmt::format("'{}': {} values clipped or rounded into the schema",
                                  s.columns[k].name, clipped[k]));
  }
  if (parts.empty()) return "";
  std::string out = fmt::format("schema {}: {} records left out; ", s.source, dropped);
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? "; " : "") + parts[i];
  return out;
}

}  // namespace ds
