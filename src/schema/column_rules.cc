#include "schema/column_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "schema/column_type.h"

namespace ds {

using Json = nlohmann::json;

const char* ColumnTypeName(ColumnType t) {
  switch (t) {
    case ColumnType::kText:
      return "text";
    case ColumnType::kInteger:
      return "integer";
    case ColumnType::kDecimal:
      return "decimal";
    case ColumnType::kCategory:
      return "category";
  }
  return "text";
}

namespace {

// A value quoted for an explanation: at most 40 bytes.
std::string Show(std::string_view v) {
  if (v.size() <= 40) return fmt::format("'{}'", v);
  return fmt::format("'{}...'", v.substr(0, 37));
}

std::string FormatDouble(double v) { return fmt::format("{}", v); }

}  // namespace

bool ParseRuleInteger(std::string_view s, int64_t* value) {
  NumberSyntax n;
  if (!ScanNumber(s, &n) || n.point || n.exponent || n.leading_zero || n.int_digits > 18)
    return false;
  int64_t v = 0;
  for (char c : s.substr(n.negative || n.plus ? 1 : 0)) v = v * 10 + (c - '0');
  *value = n.negative ? -v : v;
  return true;
}

bool ParseRuleDecimal(std::string_view s, double* value, int* decimals, bool* exponent) {
  NumberSyntax n;
  if (!ScanNumber(s, &n) || n.leading_zero || (n.point && n.frac_digits == 0))
    return false;  // "007", "1." are not accepted
  *value = n.value;
  *decimals = n.frac_digits;
  *exponent = n.exponent;
  return true;
}

bool ColumnRule::IsMissing(std::string_view v) const {
  return v.empty() ||
         std::find(missing_values.begin(), missing_values.end(), v) != missing_values.end();
}

ColumnRules ColumnRules::FieldCountOnly(const std::vector<std::string>& header) {
  ColumnRules r;
  for (const auto& h : header) {
    ColumnRule c;
    c.name = h;
    r.columns_.push_back(std::move(c));
  }
  return r;
}

ColumnRules LearnColumnRules(const std::vector<std::string>& header,
                             const std::vector<std::vector<std::string>>& records,
                             const RuleOptions& opt) {
  ColumnRules rules;
  const size_t k = header.size();
  std::vector<const std::vector<std::string>*> rows;
  rows.reserve(records.size());
  for (const auto& r : records)
    if (r.size() == k) rows.push_back(&r);
  rules.learned_rows_ = int64_t(rows.size());

  for (size_t c = 0; c < k; ++c) {
    ColumnRule rule;
    rule.name = header[c];
    rule.empty_allowed = false;
    bool all_int = true, all_dec = true, any_frac = false, any_exp = false;
    int64_t imin = INT64_MAX, imax = INT64_MIN;
    double dmin = INFINITY, dmax = -INFINITY;
    int maxdec = 0;
    size_t present = 0;
    bool too_long = false;
    std::unordered_map<std::string_view, int64_t> counts;
    for (const auto* row : rows) {
      const std::string& v = (*row)[c];
      if (v.empty()) {
        rule.empty_allowed = true;
        continue;
      }
      if (std::find(opt.missing_tokens.begin(), opt.missing_tokens.end(), v) !=
          opt.missing_tokens.end()) {
        if (std::find(rule.missing_values.begin(), rule.missing_values.end(), v) ==
            rule.missing_values.end())
          rule.missing_values.push_back(v);
        continue;
      }
      ++present;
      if (v.size() > opt.max_category_bytes) too_long = true;
      if (counts.size() <= size_t(opt.max_categories)) ++counts[v];
      int64_t iv;
      if (all_int && ParseRuleInteger(v, &iv)) {
        imin = std::min(imin, iv);
        imax = std::max(imax, iv);
      } else {
        all_int = false;
      }
      if (all_dec) {
        double dv;
        int dec;
        bool exp;
        if (ParseRuleDecimal(v, &dv, &dec, &exp)) {
          dmin = std::min(dmin, dv);
          dmax = std::max(dmax, dv);
          maxdec = std::max(maxdec, dec);
          any_frac |= dec > 0;
          any_exp |= exp;
        } else {
          all_dec = false;
        }
      }
    }
    std::sort(rule.missing_values.begin(), rule.missing_values.end());
    rule.has_range = opt.store_values;
    if (present == 0) {
      rule.type = ColumnType::kText;
    } else if (all_int) {
      rule.type = ColumnType::kInteger;
      if (rule.has_range) {
        rule.int_min = imin;
        rule.int_max = imax;
      }
    } else if (all_dec && (any_frac || any_exp)) {
      rule.type = ColumnType::kDecimal;
      if (rule.has_range) {
        rule.min = dmin;
        rule.max = dmax;
      }
      rule.max_decimals = any_exp ? -1 : maxdec;
    } else {
      size_t distinct = counts.size();
      int64_t singles = 0;
      for (const auto& [v, n] : counts)
        if (n == 1) ++singles;
      bool category = opt.store_values && !too_long && distinct <= size_t(opt.max_categories) &&
                      double(distinct) * opt.min_mean_count <= double(present) &&
                      double(singles) <= opt.max_singleton_share * double(present);
      if (category) {
        rule.type = ColumnType::kCategory;
        for (const auto& [v, n] : counts) rule.categories.emplace_back(v);
        std::sort(rule.categories.begin(), rule.categories.end());
      } else {
        rule.type = ColumnType::kText;
      }
    }
    rules.columns_.push_back(std::move(rule));
  }
  return rules;
}

std::string ColumnRules::Validate(const std::vector<std::string>& fields) const {
  if (checks_.field_count && fields.size() != columns_.size())
    return fmt::format("expected {} fields, got {}", columns_.size(), fields.size());
  size_t n = std::min(fields.size(), columns_.size());
  for (size_t i = 0; i < n; ++i) {
    const ColumnRule& r = columns_[i];
    const std::string& v = fields[i];
    auto where = [&] { return fmt::format("field {} '{}'", i + 1, r.name); };
    if (v.empty()) {
      if (checks_.empty && !r.empty_allowed)
        return fmt::format("{}: empty, but the column was never empty in training", where());
      continue;
    }
    if (std::find(r.missing_values.begin(), r.missing_values.end(), v) != r.missing_values.end())
      continue;
    switch (r.type) {
      case ColumnType::kText:
        break;
      case ColumnType::kInteger: {
        int64_t x;
        if (!ParseRuleInteger(v, &x)) {
          if (checks_.type) return fmt::format("{}: {} is not an integer", where(), Show(v));
          break;
        }
        if (checks_.range && r.has_range && (x < r.int_min || x > r.int_max))
          return fmt::format("{}: {} is outside the training range [{}, {}]", where(), v, r.int_min,
                             r.int_max);
        break;
      }
      case ColumnType::kDecimal: {
        double x;
        int dec;
        bool exp;
        if (!ParseRuleDecimal(v, &x, &dec, &exp)) {
          if (checks_.type) return fmt::format("{}: {} is not a decimal number", where(), Show(v));
          break;
        }
        if (checks_.type && r.max_decimals >= 0 && dec > r.max_decimals)
          return fmt::format("{}: {} has {} decimal places, at most {} in training", where(), v,
                             dec, r.max_decimals);
        if (checks_.range && r.has_range && (x < r.min || x > r.max))
          return fmt::format("{}: {} is outside the training range [{}, {}]", where(), v,
                             FormatDouble(r.min), FormatDouble(r.max));
        break;
      }
      case ColumnType::kCategory:
        if (checks_.category && !std::binary_search(r.categories.begin(), r.categories.end(), v))
          return fmt::format("{}: {} is not one of the {} categories seen in training", where(),
                             Show(v), r.categories.size());
        break;
    }
  }
  return {};
}

Json ColumnRules::ToJson() const {
  Json cols = Json::array();
  for (const auto& r : columns_) {
    Json c;
    c["name"] = r.name;
    c["type"] = ColumnTypeName(r.type);
    c["empty_allowed"] = r.empty_allowed;
    c["missing_values"] = r.missing_values;
    if (r.type == ColumnType::kInteger && r.has_range) {
      c["min"] = r.int_min;
      c["max"] = r.int_max;
    } else if (r.type == ColumnType::kDecimal) {
      if (r.has_range) {
        c["min"] = r.min;
        c["max"] = r.max;
      }
      c["max_decimals"] = r.max_decimals;
    } else if (r.type == ColumnType::kCategory) {
      c["categories"] = r.categories;
    }
    cols.push_back(std::move(c));
  }
  return Json{{"format", "datasynth-column-rules"},
              {"version", 1},
              {"rows", learned_rows_},
              {"columns", std::move(cols)}};
}

namespace {

constexpr size_t kMaxRuleColumns = 1 << 20, kMaxRuleCategories = 1 << 20;

// The column's type, emptiness and missing-value spellings. Errors: the message only.
Result<ColumnRule> RuleHeader(const Json& c) {
  auto bad = [](const std::string& what) { return DS_ERR(kCorrupt, "{}", what); };
  if (!c.is_object()) return bad("not an object");
  ColumnRule r;
  auto name = c.find("name");
  if (name == c.end() || !name->is_string()) return bad("'name' must be a string");
  r.name = name->get<std::string>();
  auto type = c.find("type");
  if (type == c.end() || !type->is_string()) return bad("'type' must be a string");
  const std::string t = type->get<std::string>();
  if (t == "text")
    r.type = ColumnType::kText;
  else if (t == "integer")
    r.type = ColumnType::kInteger;
  else if (t == "decimal")
    r.type = ColumnType::kDecimal;
  else if (t == "category")
    r.type = ColumnType::kCategory;
  else
    return bad(fmt::format("unknown type '{}'", t));
  auto empty = c.find("empty_allowed");
  if (empty == c.end() || !empty->is_boolean()) return bad("'empty_allowed' must be a boolean");
  r.empty_allowed = empty->get<bool>();
  if (auto mv = c.find("missing_values"); mv != c.end()) {
    if (!mv->is_array() || mv->size() > 64) return bad("'missing_values' must be a short array");
    for (const auto& m : *mv) {
      if (!m.is_string() || m.get<std::string>().empty())
        return bad("'missing_values' must hold non-empty strings");
      r.missing_values.push_back(m.get<std::string>());
    }
  }
  return r;
}

// The type's own keys: the range, decimals, categories. Errors: the message only.
Status RuleValues(const Json& c, ColumnRule* r) {
  auto bad = [](const std::string& what) { return DS_ERR(kCorrupt, "{}", what); };
  auto lo = c.find("min"), hi = c.find("max");
  if ((lo == c.end()) != (hi == c.end())) return bad("'min' and 'max' come together");
  r->has_range = lo != c.end();
  if (r->type == ColumnType::kInteger && r->has_range) {
    if (!lo->is_number_integer() || !hi->is_number_integer())
      return bad("integer 'min'/'max' must be integers");
    r->int_min = lo->get<int64_t>();
    r->int_max = hi->get<int64_t>();
    if (r->int_min > r->int_max) return bad("'min' > 'max'");
  } else if (r->type == ColumnType::kDecimal) {
    if (r->has_range) {
      if (!lo->is_number() || !hi->is_number()) return bad("decimal 'min'/'max' must be numbers");
      r->min = lo->get<double>();
      r->max = hi->get<double>();
      if (!std::isfinite(r->min) || !std::isfinite(r->max) || r->min > r->max)
        return bad("decimal 'min'/'max' must be finite with min <= max");
    }
    auto md = c.find("max_decimals");
    if (md == c.end() || !md->is_number_integer() || md->get<int64_t>() < -1 ||
        md->get<int64_t>() > 1000)
      return bad("'max_decimals' must be an integer in [-1, 1000]");
    r->max_decimals = int(md->get<int64_t>());
  } else if (r->type == ColumnType::kCategory) {
    auto cats = c.find("categories");
    if (cats == c.end() || !cats->is_array() || cats->size() > kMaxRuleCategories)
      return bad("'categories' must be an array");
    for (const auto& v : *cats) {
      if (!v.is_string()) return bad("categories must be strings");
      r->categories.push_back(v.get<std::string>());
    }
    std::sort(r->categories.begin(), r->categories.end());
    r->categories.erase(std::unique(r->categories.begin(), r->categories.end()),
                        r->categories.end());
  }
  return Status::Ok();
}

}  // namespace

Result<ColumnRules> ColumnRules::FromJson(const Json& j, const std::string& src) {
  ColumnRules rules;
  if (!j.is_object()) return DS_ERR(kCorrupt, "{}: column rules are not a JSON object", src);
  auto fmt_ok = j.find("format");
  if (fmt_ok == j.end() || !fmt_ok->is_string() || *fmt_ok != "datasynth-column-rules")
    return DS_ERR(kCorrupt, "{}: not a datasynth column rules file (format)", src);
  auto ver = j.find("version");
  if (ver == j.end() || !ver->is_number_integer() || ver->get<int64_t>() != 1)
    return DS_ERR(kCorrupt, "{}: unsupported column rules version", src);
  if (auto rows = j.find("rows"); rows != j.end()) {
    if (!rows->is_number_integer() || rows->get<int64_t>() < 0)
      return DS_ERR(kCorrupt, "{}: 'rows' must be a non-negative integer", src);
    rules.learned_rows_ = rows->get<int64_t>();
  }
  auto cols = j.find("columns");
  if (cols == j.end() || !cols->is_array() || cols->size() > kMaxRuleColumns)
    return DS_ERR(kCorrupt, "{}: 'columns' must be an array", src);
  for (size_t i = 0; i < cols->size(); ++i) {
    Result<ColumnRule> r = RuleHeader((*cols)[i]);
    Status st = r.ok() ? RuleValues((*cols)[i], &*r) : r.status();
    if (!st.ok()) return DS_ERR(kCorrupt, "{}: column {}: {}", src, i + 1, st.message());
    rules.columns_.push_back(std::move(*r));
  }
  return rules;
}

}  // namespace ds
