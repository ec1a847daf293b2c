// A public schema: what the field tokenizer needs to know about each column,
// supplied by the user instead of read from the (private) data. Under --dp the
// field tokenizer is built from it alone (FieldTokenizer::FromSchema), so the
// vocabulary says nothing about the training records (docs/privacy.md).
//
// File format (JSON), one entry per CSV column, in header order (optional
// top-level keys: "note", a string; "privacy", {"epsilon": e, "delta": d,
// "mechanism": "..."} when the schema was derived privately):
//   {"columns": [
//     {"name": "contract", "type": "categorical", "values": ["Month-to-month", "One year"]},
//     {"name": "tenure", "type": "integer", "min": 0, "max": 100},
//     {"name": "charges", "type": "decimal", "decimals": 2, "style": "trim",
//      "min": 0, "max": 15000, "bins": 32, "missing": [""]},
//     {"name": "day", "type": "datetime", "format": "%Y-%m-%d", "min_year": 2000, "max_year": 2030},
//     {"name": "note", "type": "text", "max_length": 40, "alphabet": "abc..."},
//     {"name": "k", "type": "constant", "value": "x"}, {"name": "e", "type": "empty"}]}
// Keys: name and type always (the types of schema/column_type.h); categorical:
// values (non-empty, unique); integer / decimal: min <= max (numbers),
// decimals (decimal: 1..9; integer: 0), style "fixed" (default) or "trim",
// bins (optional, 1..100: uniform bins over [min, max]; default: one per value
// when there are at most 100 values, else 32); datetime: format (a DateFormat
// spec), min_year <= max_year in 0..9999; text / id: max_length (1..4096),
// alphabet (optional; default printable ASCII and space), empty_ok (bool);
// numeric / datetime: missing (optional list of missing spellings, see
// MissingSpellings()). Unknown keys are errors (a typo must not pass silently).
//
// Values of the data outside the schema (Conform): a number outside
// [min, max] is clipped to the nearest bound and rounded to the precision; a
// year outside [min_year, max_year] is clipped (the day clamped to the month);
// a missing spelling that the column does not list becomes its first listed
// one; every other misfit (a category not listed, a value that is not a
// number / date of the column's format, text with a character outside the
// alphabet or too long) drops the record. The counts are reported by column,
// never the values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "schema/column_type.h"
#include "util/status.h"

namespace ds {

struct PublicColumn {
  std::string name;
  FieldType type = FieldType::kCategorical;
  std::vector<std::string> values;  // categorical
  double min = 0, max = 0;          // numeric bounds
  int decimals = 0;                 // numeric precision
  bool trim = false;                // decimal style "trim"
  int bins = 0;                     // numeric: 0 = default
  std::string format;               // datetime
  int min_year = 0, max_year = -1;  // datetime
  std::vector<std::string> missing; // numeric / datetime
  int max_length = 0;               // text / id
  std::string alphabet;             // text / id (UTF-8)
  bool empty_ok = false;            // text / id
  std::string value;                // constant
};

struct PublicSchema {
  std::vector<PublicColumn> columns;
  std::string source;  // file name (for messages), or "derived privately"
  // What deriving it spent when it was derived from the data under DP
  // (schema/private_schema.h; the file's "privacy" object); 0 = public.
  double derived_epsilon = 0, derived_delta = 0;
  // Default bins for a numeric column with more than kExactValues values.
  static constexpr int kDefaultBins = 32;
  static constexpr int kExactValues = 100;
  static constexpr int kMaxTextLength = 4096;
  // Printable ASCII (0x20..0x7e): the default alphabet of text columns.
  static std::string DefaultAlphabet();
};

// A numeric column's bounds scaled to its precision: [ceil(min 10^D), floor(max 10^D)].
void ScaledBounds(const PublicColumn& c, int64_t* lo, int64_t* hi);
// Uniform bin edges over the scaled range [lo, hi]: `bins` of them (0: one per
// value when there are at most kExactValues values, else kDefaultBins), at
// most one per value; the last edge is hi + 1.
std::vector<int64_t> UniformBinEdges(int64_t lo, int64_t hi, int bins);

// Parses and checks a schema; errors name `source`, the column and the key.
Result<PublicSchema> ParsePublicSchema(const nlohmann::json& j, const std::string& source);
Result<PublicSchema> LoadPublicSchema(const std::string& path);
nlohmann::json PublicSchemaToJson(const PublicSchema& s);

// The schema's columns must be the CSV header, in order.
Status CheckSchemaHeader(const PublicSchema& s, const std::vector<std::string>& header);

// A template read OFF THE DATA for the user to review and edit (NOT private:
// it lists the categories and the exact min / max seen). `field_types` as in
// the field tokenizer's overrides. Numeric bounds are widened to round numbers.
Result<PublicSchema> SchemaTemplate(const std::vector<std::string>& header,
                                    const std::vector<std::vector<std::string>>& records,
                                    const std::map<std::string, std::string>& field_types = {});

// Maps records into the schema (the rules in the file comment), in place.
struct ConformReport {
  int64_t dropped = 0;                  // records left out
  std::vector<int64_t> clipped;         // [column] values clipped or re-spelled
  std::vector<int64_t> dropped_by;      // [column] records dropped for this column (first misfit)
  std::string Describe(const PublicSchema& s) const;  // "" when nothing changed
};
// `lines` (optional, one per record) is compacted alongside.
ConformReport ConformRecords(const PublicSchema& s, std::vector<std::vector<std::string>>* records,
                             std::vector<int64_t>* lines = nullptr);
// One value: true when it fits (possibly rewritten into `*v`); `clipped` set
// when it was changed.
bool ConformValue(const PublicColumn& c, std::string* v, bool* clipped);

}  // namespace ds
