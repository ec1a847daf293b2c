// Column typing for delimited data: one module that decides, per column, what
// kind of values it holds (and how they are spelled), with one number parser
// and one date parser. Used by the field tokenizer (tokenize/field_tokenizer.h).
//
// Types (FieldType):
//   categorical  a set of values, one token each (missing spellings included)
//   integer      numbers at precision 0, at most 17 digits
//   decimal      numbers at precision D (1..9), written back at D in the
//                column's style: "fixed" (every value has exactly D
//                decimals: "1.50") or "trim" (trailing zeros dropped: "1.5",
//                "2"); see "Numbers" below for D and normalized columns
//   datetime     one of the formats of DatetimeFormats() (ISO dates and
//                date-times, m/d/Y and d/m/Y, padded or not); every value is
//                a real date (day within its month, leap years)
//   text         free text (char tokens in the field tokenizer)
//   id           id-like strings (nearly all distinct, no spaces): char
//                tokens like text, named apart for the report
//   constant     one value in every row (no token at all)
//   empty        always the empty string (no token at all)
// Missing values: the spellings of MissingSpellings() ("", "NA", "N/A",
// "NaN", "nan", "null", "NULL", "None", "none", "?", "#N/A", "n/a"). In
// numeric and datetime columns they are allowed besides the typed values;
// each spelling seen keeps its own token.
//
// Inference rules (InferColumnType), first match wins, over the non-missing
// values N of a column of n rows:
//   every value "" -> empty; one distinct value (missing included) ->
//   constant; N non-empty and all numbers (ParseDecimal) -> integer when the
//   precision D is 0, else decimal (below); all parse under one datetime format (first in the list
//   order; m/d before d/m) -> datetime; distinct <= max(20, 0.9 n) and
//   distinct <= max_categories -> categorical; no whitespace and mean length
//   <= 40 -> id; else text.
// Numbers: each value carries a precision (its decimals, float noise left
// out); D = the smallest precision that at least 99% of the values have
// (capped at 9), so that one stray value with 8 decimals does not give a
// column of one-decimal values 8 digit tokens. Values written plainly at
// precision <= D keep their spelling; the column's style is "fixed" when all of
// them have D decimals, else "trim". A column where some value is re-spelled
// (an exponent written out, noise or decimals past D rounded, both "1.5" and
// "1.50") is `normalized`: values are compared by value, written at D.
// Overrides (field_types): "categorical", "integer", "decimal", "datetime",
// "datetime:<format>" (e.g. "datetime:%d.%m.%Y"), "text", "id", "constant",
// "empty"; the parameters (precision, style, format) are inferred for the
// forced type, and a value that does not fit it is an error naming the
// column, the row and the value.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace ds {

enum class FieldType { kCategorical, kInteger, kDecimal, kDatetime, kText, kId, kConstant, kEmpty };
// Integer or decimal: bins and digits in the field tokenizer.
inline bool IsNumericField(FieldType t) {
  return t == FieldType::kInteger || t == FieldType::kDecimal;
}
// Text or id: spelled in characters by the field tokenizer.
inline bool IsTextField(FieldType t) { return t == FieldType::kText || t == FieldType::kId; }

const char* FieldTypeName(FieldType t);
// "categorical" etc.; false for an unknown name.
bool ParseFieldTypeName(std::string_view name, FieldType* out);

// ---- numbers ----
// A number scaled to an integer: value = scaled / 10^decimals.
struct ScaledNumber {
  int64_t scaled = 0;
  int decimals = 0;  // digits after the point as written
};
// Parses [-](0|[1-9][0-9]*)[.[0-9]{1,9}] with at most 17 digits in all ("007",
// "+1", "1.", ".5", "1e3", "-0" are not numbers here). Returns false otherwise.
bool ParseNumber(std::string_view s, ScaledNumber* out);
// `scaled` at `decimals` places: fixed "12.50", or trimmed "12.5" / "12".
std::string FormatNumber(int64_t scaled, int decimals, bool trim);
// Rescales a parsed number to `decimals` places (>= n.decimals).
int64_t Rescale(const ScaledNumber& n, int decimals);

// A number as numeric columns read it: ParseNumber's plain form, any number of
// decimals, or an exponent ("3e+05", "9.8988e+12", "1.5E-3"); no redundant
// leading zero, no "+", ".5" or "1."; at most 38 significant digits. The
// value is exactly mag / 10^scale (scale may exceed 9; exponents folded in).
struct DecimalValue {
  bool neg = false;
  unsigned __int128 mag = 0;
  int scale = 0;           // >= 0
  bool plain = true;       // written without an exponent
  int precision = 0;       // decimals the value carries: `scale`, or fewer when
                           // the written digits past them are float noise
                           // (8.927999999999999 -> 3: off by < 1e-12 relative)
};
bool ParseDecimal(std::string_view s, DecimalValue* out);
// `v` at `decimals` places, rounded half away from zero; false when the result
// needs more than 17 digits.
bool ScaleDecimal(const DecimalValue& v, int decimals, int64_t* scaled);

// ---- dates ----
struct DateTime {
  int year = 0, month = 1, day = 1, hour = 0, minute = 0, second = 0;
};
enum class DatePart { kYear, kMonth, kDay, kHour, kMinute, kSecond };
// A datetime format: literals and %Y %m %d %H %M %S (2 digits, zero-padded;
// %Y 4 digits) or %-m %-d %-H (1-2 digits, no leading zero).
class DateFormat {
 public:
  // Errors name the bad directive.
  static Result<DateFormat> Parse(std::string_view spec);
  const std::string& spec() const { return spec_; }
  // The parts present, in the order YEAR, MONTH, DAY, HOUR, MINUTE, SECOND
  // (the order they are generated in), whatever order the format writes them.
  const std::vector<DatePart>& parts() const { return parts_; }
  bool Read(std::string_view s, DateTime* out) const;  // only real dates
  std::string Write(const DateTime& d) const;

 private:
  struct Piece {
    char field = 0;  // 0 = literal, else Y m d H M S
    bool padded = true;
    std::string literal;
  };
  std::string spec_;
  std::vector<Piece> pieces_;
  std::vector<DatePart> parts_;
};
int DaysInMonth(int year, int month);
const std::vector<std::string>& DatetimeFormats();

const std::vector<std::string>& MissingSpellings();
bool IsMissing(std::string_view s);

// ---- column types ----
struct ColumnSchema {
  FieldType type = FieldType::kText;
  int decimals = 0;           // decimal: precision D
  bool trim = false;          // decimal: trailing zeros dropped
  std::string format;         // datetime: DateFormat spec
  int64_t missing = 0;        // rows with a missing spelling
  int64_t distinct = 0;       // distinct values (missing spellings included)
  std::string constant;       // constant: the value
  bool normalized = false;    // numeric: some values are re-spelled when read (an
                              // exponent written out, float noise or decimals past D
                              // rounded, a second style); any number then fits
};

struct TypingOptions {
  int64_t max_categories = 5000;
};

// `values` are one column's values (all rows). `forced` = "" infers, else an
// override spec (see the file comment). Errors: kInvalidArgument for an
// unknown override, kInvalidInput for a value that does not fit it.
Result<ColumnSchema> InferColumnType(const std::vector<std::string_view>& values,
                                   const std::string& forced, const TypingOptions& opts = {});

// True when `value` is a well-formed value of the column (missing spellings
// count for numeric / datetime columns; categorical membership and ranges are
// the tokenizer's business).
bool ValueFitsType(const ColumnSchema& t, std::string_view value);

// A numeric column's (non-missing) value scaled to the column's precision D:
// exact for the values ValueFitsType accepts; false for the others.
bool ScaleToColumn(const ColumnSchema& t, std::string_view value, int64_t* scaled);

// field_types: "col=type;col2=datetime:%d.%m.%Y" -> map. Errors name the part.
Result<std::map<std::string, std::string>> ParseFieldTypes(std::string_view spec);

// ---- the one number scanner (shared) ----
// Every number rule of the project reads numerals through ScanNumber and
// states its own syntax over the result: the column rules (schema/
// column_rules.h ParseRuleInteger / ParseRuleDecimal), evaluate's numeric
// columns (evaluate/table.h ParseNumber), tabular grouping's numeric values
// (through the column rules), the field tokenizer's numbers (ParseNumber).
// Grammar (the decimal numerals of strtod):
//   [+-] ( digits+ [ "." digits* ] | "." digits+ ) [ (e|E) [+-] digits+ ]
// and the value must be finite (strtod's rounding). No spaces, no hex, no
// "inf"/"nan". Implemented in schema/number_syntax.cc.
struct NumberSyntax {
  bool negative = false;      // a '-' sign
  bool plus = false;          // a '+' sign
  int int_digits = 0;         // digits before the point
  bool leading_zero = false;  // int_digits > 1 and the first is '0' ("007": an identifier)
  bool point = false;         // a '.' was written
  int frac_digits = 0;        // digits after the point
  bool exponent = false;      // an exponent part was written
  double value = 0;
};
bool ScanNumber(std::string_view s, NumberSyntax* out);

}  // namespace ds

