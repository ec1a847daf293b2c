// An in-memory table for evaluation: named columns of raw field text, each with
// an inferred type.
//
// Reading: through the training reader, io/csv.h's CsvReader (RFC 4180 with
// its choices: a literal quote inside an unquoted field is kept, blank lines
// are skipped, NUL bytes and invalid UTF-8 are errors naming file:line and
// field), first row is the header; the bytes come from io/input.h (gzip
// decompressed by content; pipes, FIFOs and <(...) read once; devices
// refused; binary data refused in the first MiB). A table evaluate reads is
// a table train would read.
//
// Missing values: an empty field is missing (the datasets' convention). Nothing
// else is: "NA" or "None" are ordinary values (ames uses "None" as a category).
//
// Type inference (InferColumnKind), on the non-missing values:
//   numeric      every value parses completely as a finite decimal number
//                (ParseNumber) and no value has a redundant leading zero ("02134" marks an
//                identifier such as a zip code, which is not a quantity);
//   text         otherwise, when the column has more than `text_min_distinct`
//                distinct values and more than `text_min_distinct_ratio` of its
//                values are distinct (free text, identifiers);
//   categorical  otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace ds {

enum class ColumnKind { kNumeric, kCategorical, kText };
const char* ColumnKindName(ColumnKind t);

struct TypeInferenceOptions {
  size_t text_min_distinct = 50;         // fewer distinct values: always categorical
  double text_min_distinct_ratio = 0.5;  // distinct / non-missing above this: text
};

struct Column {
  std::string name;
  std::vector<std::string> values;  // [rows] raw field text; "" = missing
  ColumnKind type = ColumnKind::kCategorical;
  size_t missing = 0;  // number of empty fields
};

struct Table {
  std::string source;  // file path or a label, for messages and the report
  std::vector<Column> columns;

  size_t num_rows() const { return columns.empty() ? 0 : columns[0].values.size(); }
  size_t num_cols() const { return columns.size(); }
  // Index of the column named `name`, or -1.
  int FindColumn(std::string_view name) const;
  // Appends a column (all columns must have the same length; checked by Validate).
  void AddColumn(std::string name, std::vector<std::string> values);
  // Checks equal column lengths and unique names.
  Status Validate() const;
  // Recomputes `missing` and `type` of every column.
  void InferTypes(const TypeInferenceOptions& opts = {});
  // A table of the given rows (in that order), keeping the column types.
  Table SelectRows(const std::vector<size_t>& rows) const;
};

// Parses a decimal number ("12", "-3.5e2", "1.", ".5"; " 7 " is not accepted)
// of at most 64 bytes through the one number scanner (schema/column_type.h
// ScanNumber); false if the whole string is not a finite number.
bool ParseNumber(std::string_view s, double* out);

ColumnKind InferColumnKind(const std::vector<std::string>& values,
                           const TypeInferenceOptions& opts = {});

// Reads a whole CSV (header row first) into memory and infers column types.
// Errors name the file and line: "synth.csv:17: expected 10 fields, found 9".
Result<Table> ReadTable(const std::string& path, char delimiter = ',');
// Parses CSV text already in memory; `source` names it in messages.
Result<Table> ParseTable(std::string_view text, char delimiter, const std::string& source);

// Writes RFC 4180 CSV (fields quoted when they contain the delimiter, a quote,
// CR or LF, or start/end with a space).
Status WriteTable(const Table& table, const std::string& path, char delimiter = ',');

// Random split of the rows: a fraction `first_fraction` (rounded) goes to
// `first`, the rest to `second`, both in a seeded random order (Philox).
void SplitTable(const Table& table, double first_fraction, uint64_t seed, Table* first,
                Table* second);

// Baselines used by tests, benches and the docs' reference figures:
// every column shuffled on its own (keeps each marginal distribution exactly,
// destroys every association between columns).
Table ShuffleColumns(const Table& table, uint64_t seed);
// `rows` rows of independent uniform noise per column: numeric columns uniform
// on [min, max] of the column (whole numbers when the column has only whole
// numbers), other columns a uniformly chosen distinct non-missing value.
Table UniformRandomColumns(const Table& table, size_t rows, uint64_t seed);

}  // namespace ds
