// Per-column validation rules for delimited data, learned from the training
// records and stored in the model directory (column_rules.json), so that
// generation can reject malformed records without user code.
//
// Type inference (LearnColumnRules), per column, over its non-missing values
// (a value is "missing" when it is empty or one of RuleOptions::missing_tokens,
// e.g. "NA"; the missing spellings seen in training are kept and always pass):
//   integer   every value matches  [+-]?(0|[1-9][0-9]*)  with at most 18 digits.
//             A leading zero ("007", "02134") makes the column NOT numeric:
//             such codes are identifiers and stay category/text.
//   decimal   every value is an integer as above or  [+-]?(0|[1-9][0-9]*)?\.[0-9]+
//             optionally followed by an exponent [eE][+-]?[0-9]+, with at
//             least one value holding a '.' or an exponent. max_decimals = the
//             most digits after '.' seen (-1 = unchecked, when any exponent).
//   category  not numeric, and the values look like a closed set:
//               distinct <= max_categories (50), and
//               distinct * min_mean_count (2) <= non-missing rows, and
//               values seen only once cover <= max_singleton_share (5%) of the
//               non-missing rows.
//             The distinct-count cap keeps free text out; the mean-count rule
//             needs every category to be seen twice on average; the singleton
//             share tolerates a few rare categories while rejecting columns
//             of mostly unique values (names, ids, sentences). Numeric columns
//             with few values (year, rating) stay numeric: a range is the more
//             general rule for them.
//   text      anything else: only the missing rule applies.
//   A column with no non-missing value at all is text.
// min / max: numeric range seen in training (integers exactly, decimals as
// doubles). empty_allowed: an empty value was seen. With
// RuleOptions::store_values = false no data value is kept: numeric columns
// keep their type without a range, category columns become text.
//
// Validation (Validate) checks, each switchable through RuleChecks:
//   field_count  the record has exactly header.size() fields
//   empty        an empty value only where empty_allowed
//   type         integer / decimal syntax (and decimal places)
//   range        min <= value <= max
//   category     value in the learned set
// and returns "" for a valid record or an explanation naming the first broken
// rule: "field 3 'bill_length_mm': '4x.1' is not a decimal number".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace ds {

enum class ColumnType { kText, kInteger, kDecimal, kCategory };
const char* ColumnTypeName(ColumnType t);

struct ColumnRule {
  std::string name;
  ColumnType type = ColumnType::kText;
  bool empty_allowed = true;
  std::vector<std::string> missing_values;  // non-empty missing spellings seen ("NA")
  // kInteger / kDecimal: range known (false when learned with store_values = false)
  bool has_range = true;
  // kInteger
  int64_t int_min = 0, int_max = 0;
  // kDecimal
  double min = 0, max = 0;
  int max_decimals = -1;  // -1 = unchecked
  // kCategory: sorted, unique
  std::vector<std::string> categories;
  // Empty, or one of missing_values.
  bool IsMissing(std::string_view v) const;
};

// Which rules Validate applies (all on by default).
struct RuleChecks {
  bool field_count = true;
  bool empty = true;
  bool type = true;
  bool range = true;
  bool category = true;
};

// Learning thresholds (see the file comment).
struct RuleOptions {
  int max_categories = 50;
  double min_mean_count = 2.0;
  double max_singleton_share = 0.05;
  // Spellings of a missing value besides "" (kept only when seen).
  std::vector<std::string> missing_tokens = {"NA", "N/A", "NaN", "nan", "null", "NULL", "None"};
  // Categories longer than this (bytes) make a column text.
  size_t max_category_bytes = 256;
  // false: keep no value taken from the data (no numeric range, no category
  // set: such columns become text), only types, decimal places and the
  // missing rule. For differentially private training, where stored values
  // would leak outside the guarantee.
  bool store_values = true;
};

class ColumnRules {
 public:
  ColumnRules() = default;
  // Field-count-only rules (every column text, empty allowed): for delimited
  // models without column_rules.json.
  static ColumnRules FieldCountOnly(const std::vector<std::string>& header);

  const std::vector<ColumnRule>& columns() const { return columns_; }
  std::vector<ColumnRule>& mutable_columns() { return columns_; }
  size_t field_count() const { return columns_.size(); }
  int64_t learned_rows() const { return learned_rows_; }

  const RuleChecks& checks() const { return checks_; }
  void set_checks(const RuleChecks& c) { checks_ = c; }

  // "" when the record passes every enabled check, else the explanation of
  // the first failure (fields in order, then rules in the order listed above).
  std::string Validate(const std::vector<std::string>& fields) const;

  // {"format": "datasynth-column-rules", "version": 1, "rows": N,
  //  "columns": [{"name", "type", "empty_allowed", "missing_values",
  //               "min", "max" (integer/decimal, absent = no range),
  //               "max_decimals" (decimal),
  //               "categories" (category)}]}
  nlohmann::json ToJson() const;
  // Untrusted input: every member is type- and range-checked; errors name
  // `source` and the column.
  static Result<ColumnRules> FromJson(const nlohmann::json& j, const std::string& source);

 private:
  friend ColumnRules LearnColumnRules(const std::vector<std::string>&,
                                      const std::vector<std::vector<std::string>>&,
                                      const RuleOptions&);
  std::vector<ColumnRule> columns_;
  int64_t learned_rows_ = 0;
  RuleChecks checks_;
};

// Learns one rule per header column from the training records. Records whose
// field count differs from the header are skipped (they cannot be attributed
// to columns).
ColumnRules LearnColumnRules(const std::vector<std::string>& header,
                             const std::vector<std::vector<std::string>>& records,
                             const RuleOptions& options = {});

// Number syntax used by the rules (exposed for tests and constrained decoding),
// stated over the one number scanner (schema/column_type.h ScanNumber).
// Integer: [+-]?(0|[1-9][0-9]*), <= 18 digits. Sets *value.
bool ParseRuleInteger(std::string_view s, int64_t* value);
// Decimal (integers included). Sets *value, *decimals (digits after '.') and
// *exponent (an exponent part was present).
bool ParseRuleDecimal(std::string_view s, double* value, int* decimals, bool* exponent);

}  // namespace ds
