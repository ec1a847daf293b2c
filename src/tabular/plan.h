// Tabular mode, part 1: how a wide table is cut into column batches, and the
// description of a tabular model directory (tabular.json).
//
// Batches (docs/reference.md §7, extended):
//   * explicit header groups (TabularConfig::header_groups) become batches
//     in the given order; columns in no group are batched as below;
//   * grouping "order": the reference's rule, consecutive header columns in
//     batches of batch_columns (the last batch holds the rest);
//   * grouping "auto" (default): ceil(n / batch_columns) batches of balanced
//     size; each batch is grown greedily from a start column by adding the
//     unassigned column with the highest mean association to the batch's
//     columns (tabular/association.h; ties: header order). Batch 0 starts
//     from the seed columns (or the first header column); a later batch
//     starts from the unassigned column with the strongest association to
//     another unassigned column. Strongly related columns end up together.
//   * seed columns (TabularConfig::seed_columns) are placed first in batch 0,
//     in the given order; with explicit groups they must be in the first
//     group or in none.
//   Column order inside a batch: batch 0's seed columns first, then header
//   order; later batches: see conditioning below. The seedable columns of a model are the leading
//   columns of batch 0: a seed gives values for a leading run of them (tabular/tabular.h).
//
// Conditioning (condition_columns = m > 0): batch k > 0 is trained on
//   [conditioning columns] + [its own columns], and generated with the
//   conditioning values of the rows generated so far as a record prefix, so
//   relationships across batch boundaries survive. The conditioning columns
//   of batch k are chosen from the columns of batches 0..k-1 greedily by
//   coverage of batch k's columns:
//     cover_j = max association of column j (in batch k) with a chosen column
//     gain(c) = sum_j max(0, A(c, j) - cover_j)
//   up to m columns, each with gain >= min_condition_gain (unrelated columns
//   are not worth their tokens). Order of a conditioned batch's fields: the
//   conditioning columns, the most useful last, then the batch's columns by
//   decreasing relation to them (a char LSTM learns short dependencies much
//   sooner than long ones). Only columns whose generated values are
//   closed are candidates: category columns (values from the learned set)
//   and integer / decimal columns whose possible characters (digits, sign,
//   '.', 'e', missing spellings) are all known to batch k's tokenizer
//   (checked with per-column ASCII sets), so a generated value always
//   encodes as a prefix of batch k. m = 0 gives the reference's independent
//   batches joined by row index.
#pragma once

#include <bitset>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schema/column_rules.h"
#include "tabular/association.h"
#include "util/fs.h"
#include "util/status.h"

namespace ds {

inline constexpr int kTabularFormatVersion = 1;

// Tabular settings (proposed config keys in brackets).
struct TabularConfig {
  int batch_columns = 15;         // [tabular_batch_size] columns per batch
  // batch_columns was not given by the user: a table of at most 30 columns
  // whose batch models use the field tokenizer is then one model of all its
  // columns (docs/tabular.md "Typed fields: one model or batches").
  bool batch_columns_default = false;
  std::string grouping = "auto";  // [tabular_grouping] auto | order
  // [tabular_header_groups] explicit batches (ParseHeaderGroups)
  std::vector<std::vector<std::string>> header_groups;
  int condition_columns = 3;              // [tabular_condition_columns] 0 = independent batches
  double min_condition_gain = 0.1;        // [tabular_min_condition_gain]
  std::vector<std::string> seed_columns;  // [tabular_seed_columns] placed first in batch 0
  int parallel_batches = 0;               // [tabular_parallel_batches] training processes, 0 = auto
  int64_t association_rows = 5000;        // [tabular_association_rows] rows sampled (0 = all)

  Status Validate() const;
};

// "a,b,c;d,e" (groups separated by ';', names by ',', spaces around names
// trimmed) or a JSON array of arrays of names ("[[\"a\",\"b\"],[\"c\"]]",
// for names holding ',' or ';'). Errors name the offending group.
Result<std::vector<std::vector<std::string>>> ParseHeaderGroups(std::string_view text);
// "a,b,c" (or a JSON array of names) -> names.
Result<std::vector<std::string>> ParseColumnList(std::string_view text);

struct TabularBatch {
  std::string dir;                     // "batch_N", inside the tabular model directory
  std::vector<std::string> condition;  // conditioning columns (from earlier batches), prefix
  std::vector<std::string> columns;    // the batch's own columns
};

// What planning needs to know about each column.
struct PlanColumn {
  std::string name;
  ColumnType type = ColumnType::kText;  // learned rule type
  std::bitset<128> ascii;               // ASCII bytes occurring in the column's values
};

// Cuts the columns into batches and picks conditioning columns (see the file
// comment). `assoc` is [k * k] (AssociationMatrix). Errors (kInvalidArgument)
// for unknown / repeated names in header groups or seed columns, a seed
// column in a later group, an empty group.
Result<std::vector<TabularBatch>> PlanBatches(const std::vector<PlanColumn>& columns,
                                              const std::vector<double>& assoc,
                                              const TabularConfig& config);

// tabular.json: the model description, written last by training.
struct TabularSpec {
  int format_version = kTabularFormatVersion;
  std::string datasynth_version;
  std::vector<std::string> header;  // original header order (output order)
  char delimiter = ',';             // the table's delimiter (output)
  // Delimiter of the batch models: a byte that occurs in no value of the
  // table (the table's delimiter when possible), so start strings built from
  // seed and conditioning values always split into the right fields.
  char batch_delimiter = ',';
  int64_t rows = 0;        // training rows
  std::string input_path;  // informational
  std::optional<FileIdentity> input_file;  // the training input (generate never writes it)
  std::string grouping;
  int batch_columns = 0;
  int condition_columns = 0;
  std::vector<std::string> seed_columns;
  uint64_t seed = 0;
  std::vector<TabularBatch> batches;

  nlohmann::json ToJson() const;
  // Untrusted input: every member checked (see tabular.cc); errors name source.
  static Result<TabularSpec> FromJson(const nlohmann::json& j, const std::string& source);
  // Checks the invariants: batch dirs "batch_<i>", every header column in
  // exactly one batch, conditioning columns from earlier batches only, seed
  // columns leading batch 0.
  Status Check(const std::string& source) const;
  // Columns that can be seeded: batch 0's columns in order (a seed must give
  // a leading run of them).
  const std::vector<std::string>& seedable() const { return batches.at(0).columns; }
};

}  // namespace ds
