#include "evaluate/table.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "io/csv.h"
#include "schema/column_type.h"
#include "util/rng.h"

namespace ds {

const char* ColumnKindName(ColumnKind t) {
  switch (t) {
    case ColumnKind::kNumeric:
      return "numeric";
    case ColumnKind::kCategorical:
      return "categorical";
    case ColumnKind::kText:
      return "text";
  }
  return "unknown";
}

int Table::FindColumn(std::string_view name) const {
  for (size_t i = 0; i < columns.size(); ++i)
    if (columns[i].name == name) return int(i);
  return -1;
}

void Table::AddColumn(std::string name, std::vector<std::string> values) {
  Column c;
  c.name = std::move(name);
  c.values = std::move(values);
  columns.push_back(std::move(c));
}

Status Table::Validate() const {
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].values.size() != num_rows())
      return DS_ERR(kInvalidInput, "{}: column '{}' has {} values, column '{}' has {}", source,
                    columns[i].name, columns[i].values.size(), columns[0].name, num_rows());
    if (!names.insert(columns[i].name).second)
      return DS_ERR(kInvalidInput, "{}: column name '{}' appears more than once", source,
                    columns[i].name);
  }
  return Status::Ok();
}

bool ParseNumber(std::string_view s, double* out) {
  NumberSyntax n;
  if (s.size() > 64 || !ScanNumber(s, &n)) return false;
  *out = n.value;
  return true;
}

namespace {

// A number, without a redundant leading zero ("0123" or "-007" marks an
// identifier, not a quantity).
bool IsQuantity(std::string_view s) {
  NumberSyntax n;
  return s.size() <= 64 && ScanNumber(s, &n) && !n.leading_zero;
}

}  // namespace

ColumnKind InferColumnKind(const std::vector<std::string>& values,
                           const TypeInferenceOptions& opts) {
  bool numeric = true;
  size_t present = 0;
  for (const std::string& v : values) {
    if (v.empty()) continue;
    ++present;
    if (!IsQuantity(v)) {
      numeric = false;
      break;
    }
  }
  if (numeric && present > 0) return ColumnKind::kNumeric;
  std::unordered_set<std::string_view> distinct;
  present = 0;
  for (const std::string& v : values) {
    if (v.empty()) continue;
    ++present;
    distinct.insert(v);
  }
  if (distinct.size() > opts.text_min_distinct &&
      double(distinct.size()) > opts.text_min_distinct_ratio * double(present))
    return ColumnKind::kText;
  return ColumnKind::kCategorical;
}

void Table::InferTypes(const TypeInferenceOptions& opts) {
  for (Column& c : columns) {
    c.missing = size_t(std::count(c.values.begin(), c.values.end(), std::string()));
    c.type = InferColumnKind(c.values, opts);
  }
}

Table Table::SelectRows(const std::vector<size_t>& rows) const {
  Table t;
  t.source = source;
  for (const Column& c : columns) {
    Column n;
    n.name = c.name;
    n.type = c.type;
    n.values.reserve(rows.size());
    for (size_t r : rows) n.values.push_back(c.values[r]);
    n.missing = size_t(std::count(n.values.begin(), n.values.end(), std::string()));
    t.columns.push_back(std::move(n));
  }
  return t;
}

namespace {

// The records of `rd` (header row first) as a table with inferred types.
Result<Table> TableFromCsv(CsvReader& rd, const std::string& source) {
  DS_RETURN_IF_ERROR(rd.RequireHeader());
  Table t;
  t.source = source;
  const std::vector<std::string>& header = rd.header();
  const size_t nf = header.size();
  for (size_t f = 0; f < nf; ++f) {
    if (header[f].empty())
      return DS_ERR(kInvalidInput, "{}:{}: field {}: empty column name", rd.path(),
                    rd.record_line(), f + 1);
    t.AddColumn(header[f], {});
  }
  std::vector<std::string> fields;
  while (true) {
    DS_ASSIGN_OR_RETURN(bool more, rd.Next(&fields));
    if (!more) break;
    if (fields.size() != nf)
      return DS_ERR(kInvalidInput, "{}:{}: expected {} fields, found {}", rd.path(),
                    rd.record_line(), nf, fields.size());
    for (size_t f = 0; f < nf; ++f) t.columns[f].values.push_back(std::move(fields[f]));
  }
  DS_RETURN_IF_ERROR(t.Validate());
  t.InferTypes();
  return t;
}

}  // namespace

Result<Table> ParseTable(std::string_view text, char delimiter, const std::string& source) {
  CsvOptions opts;
  opts.delimiter = delimiter;
  DS_ASSIGN_OR_RETURN(auto rd, CsvReader::FromString(text, source, opts));
  return TableFromCsv(*rd, source);
}

Result<Table> ReadTable(const std::string& path, char delimiter) {
  // The inputs' reader (io/input.h through io/csv.h): gzip by content, streams
  // read once, devices refused, binary data detected in the first MiB.
  CsvOptions opts;
  opts.delimiter = delimiter;
  DS_ASSIGN_OR_RETURN(auto rd, CsvReader::Open(path, opts));
  return TableFromCsv(*rd, path);
}

namespace {

void AppendField(std::string* out, const std::string& v, char delimiter) {
  bool quote = v.find_first_of(std::string{delimiter, '"', '\r', '\n'}) != std::string::npos ||
               (!v.empty() && (v.front() == ' ' || v.back() == ' '));
  if (!quote) {
    out->append(v);
    return;
  }
  out->push_back('"');
  for (char c : v) {
    if (c == '"') out->push_back('"');
    out->push_back(c);
  }
  out->push_back('"');
}

}  // namespace

Status WriteTable(const Table& table, const std::string& path, char delimiter) {
  std::string out;
  for (size_t c = 0; c < table.num_cols(); ++c) {
    if (c) out.push_back(delimiter);
    AppendField(&out, table.columns[c].name, delimiter);
  }
  out.push_back('\n');
  for (size_t r = 0; r < table.num_rows(); ++r) {
    for (size_t c = 0; c < table.num_cols(); ++c) {
      if (c) out.push_back(delimiter);
      AppendField(&out, table.columns[c].values[r], delimiter);
    }
    // A one-column row with a missing value would be an empty line; quote it.
    if (table.num_cols() == 1 && table.columns[0].values[r].empty()) out.append("\"\"");
    out.push_back('\n');
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return DS_ERR(kIo, "{}: cannot write: {}", path, std::strerror(errno));
  f.write(out.data(), std::streamsize(out.size()));
  f.close();
  if (!f) return DS_ERR(kIo, "{}: write failed", path);
  return Status::Ok();
}

void SplitTable(const Table& table, double first_fraction, uint64_t seed, Table* first,
                Table* second) {
  const size_t n = table.num_rows();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  Philox rng(seed, /*stream=*/0x5EED5);
  for (size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.Below(i)]);
  size_t k = size_t(std::llround(std::clamp(first_fraction, 0.0, 1.0) * double(n)));
  std::vector<size_t> a(order.begin(), order.begin() + k), b(order.begin() + k, order.end());
  *first = table.SelectRows(a);
  *second = table.SelectRows(b);
}

Table ShuffleColumns(const Table& table, uint64_t seed) {
  Table t = table;
  for (size_t c = 0; c < t.num_cols(); ++c) {
    std::vector<std::string>& v = t.columns[c].values;
    Philox rng(seed, 0x5F0000 + c);
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.Below(i)]);
  }
  return t;
}

Table UniformRandomColumns(const Table& table, size_t rows, uint64_t seed) {
  Table t;
  t.source = table.source + " (uniform random)";
  for (size_t c = 0; c < table.num_cols(); ++c) {
    const Column& src = table.columns[c];
    Philox rng(seed, 0x0F0000 + c);
    std::vector<std::string> out(rows);
    if (src.type == ColumnKind::kNumeric) {
      double lo = INFINITY, hi = -INFINITY;
      bool whole = true;
      for (const std::string& s : src.values) {
        double x;
        if (!ParseNumber(s, &x)) continue;
        lo = std::min(lo, x);
        hi = std::max(hi, x);
        whole = whole && x == std::floor(x);
      }
      if (!(lo <= hi)) lo = hi = 0;
      for (std::string& s : out) {
        double x = lo + (hi - lo) * rng.UniformDouble();
        s = whole ? std::to_string(int64_t(std::floor(x + 0.5))) : fmt::format("{:.6g}", x);
      }
    } else {
      std::vector<std::string> distinct;
      std::unordered_set<std::string_view> seen;
      for (const std::string& s : src.values)
        if (!s.empty() && seen.insert(s).second) distinct.push_back(s);
      if (distinct.empty()) distinct.push_back("");
      for (std::string& s : out) s = distinct[rng.Below(distinct.size())];
    }
    t.AddColumn(src.name, std::move(out));
    t.columns.back().type = src.type;
  }
  for (Column& c : t.columns)
    c.missing = size_t(std::count(c.values.begin(), c.values.end(), std::string()));
  return t;
}

}  // namespace ds
