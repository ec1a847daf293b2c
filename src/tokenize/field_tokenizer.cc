// Field tokenizer: see field_tokenizer.h for the token layout and the rules.
#include "tokenize/field_tokenizer.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "tokenize/internal.h"
#include "util/utf8.h"
#include "util/rng.h"

namespace ds {

using tok_internal::JsonArray;
using tok_internal::JsonBool;
using tok_internal::JsonField;
using tok_internal::JsonInt;
using tok_internal::JsonString;

namespace {

constexpr int kPartSize[] = {0, 12, 31, 24, 60, 60};  // tokens of each DatePart (year: range)
constexpr int64_t kMaxMagnitude = 100000000000000000LL;  // 10^17: ParseNumber's limit

int64_t Pow10(int n) {
  int64_t p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

int DigitsOf(int64_t v) {  // digits of v >= 0; 0 for v == 0
  int n = 0;
  while (v > 0) {
    v /= 10;
    ++n;
  }
  return n;
}


int NumBins(const FieldTokenizer::Column& c) {
  return c.edges.empty() ? 0 : int(c.edges.size()) - 1;
}

int BinDigits(const FieldTokenizer::Column& c, int b) {
  return DigitsOf(c.edges[size_t(b) + 1] - c.edges[size_t(b)] - 1);
}

}  // namespace

int FieldTokenizer::QuantileBins(int64_t n) {
  return int(std::clamp<int64_t>(n / kRowsPerBin, kMinBins, kMaxBins));
}

namespace {

// Quantile bin edges of sorted scaled values (see the header).
std::vector<int64_t> BinEdges(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  std::vector<int64_t> distinct = v;
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  std::vector<int64_t> edges;
  const int64_t n = int64_t(v.size());
  const int64_t exact = std::min<int64_t>(FieldTokenizer::kExactBins,
                                          std::max<int64_t>(2, n / FieldTokenizer::kRowsPerExactBin));
  if (int64_t(distinct.size()) <= exact) {
    edges = distinct;
  } else {
    const int nb = FieldTokenizer::QuantileBins(n);
    // Point masses (a value holding at least a bin's share of the rows: the
    // 0 of a zero-inflated column) get a bin of their own; the other values
    // are cut into quantile bins among themselves, so that the mass does not
    // swallow the quantiles (ames' Enclosed_Porch: 6 bins before, one of
    // them [1, 1013)).
    std::vector<int64_t> rest;
    rest.reserve(v.size());
    for (size_t i = 0; i < v.size();) {
      size_t j = i;
      while (j < v.size() && v[j] == v[i]) ++j;
      if (int64_t(j - i) * nb >= n) {
        edges.push_back(v[i]);
        edges.push_back(v[i] + 1);
      } else {
        rest.insert(rest.end(), v.begin() + std::ptrdiff_t(i), v.begin() + std::ptrdiff_t(j));
      }
      i = j;
    }
    const int64_t m = int64_t(rest.size());
    if (m > 0) {
      const int nr = FieldTokenizer::QuantileBins(m);
      for (int k = 0; k < nr; ++k) edges.push_back(rest[size_t(k * m / nr)]);
    }
    edges.push_back(v.front());
    std::sort(edges.begin(), edges.end());
    edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
    if (edges.back() > v.back()) edges.pop_back();  // the end edge is added below
  }
  edges.push_back(v.back() + 1);
  return edges;
}

}  // namespace

// ---------------------------------------------------------------- training --

Result<std::unique_ptr<FieldTokenizer>> FieldTokenizer::Train(
    const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& records,
    const FieldTokenizerOptions& opts) {
  if (header.empty()) return DS_ERR(kInvalidInput, "the field tokenizer needs a CSV header");
  for (const auto& [name, type] : opts.field_types)
    if (std::find(header.begin(), header.end(), name) == header.end())
      return DS_ERR(kInvalidArgument, "config key 'field_types': no column '{}' in the header",
                    name);
  std::unique_ptr<FieldTokenizer> t(new FieldTokenizer());
  t->rare_count_ = opts.rare_count;
  for (size_t c = 0; c < header.size(); ++c) {
    std::vector<std::string_view> vals;
    vals.reserve(records.size());
    for (const auto& r : records) vals.push_back(r.at(c));
    auto it = opts.field_types.find(header[c]);
    auto typed = InferColumnType(vals, it == opts.field_types.end() ? "" : it->second);
    if (!typed.ok()) return typed.status().WithContext(fmt::format("column '{}'", header[c]));
    Column col;
    col.name = header[c];
    col.type = *typed;
    const FieldType ft = col.type.type;
    if (ft == FieldType::kCategorical) {
      std::map<std::string_view, int64_t> counts;
      for (auto v : vals) ++counts[v];
      for (const auto& [v, n] : counts)
        if (n >= opts.rare_count) col.values.emplace_back(v);
      for (auto v : vals)
        if (counts[v] < opts.rare_count) col.rare.emplace_back(v);
    } else if (IsNumericField(ft) || ft == FieldType::kDatetime) {
      std::set<std::string> missing;
      std::vector<int64_t> scaled;
      int ylo = 9999, yhi = 0;
      std::unique_ptr<DateFormat> fmt;
      if (ft == FieldType::kDatetime) {
        DS_ASSIGN_OR_RETURN(DateFormat f, DateFormat::Parse(col.type.format));
        fmt = std::make_unique<DateFormat>(f);
      }
      for (auto v : vals) {
        if (IsMissing(v)) {
          missing.emplace(v);
          continue;
        }
        if (ft == FieldType::kDatetime) {
          DateTime d;
          fmt->Read(v, &d);
          ylo = std::min(ylo, d.year);
          yhi = std::max(yhi, d.year);
        } else {
          int64_t sv = 0;
          ScaleToColumn(col.type, v, &sv);
          scaled.push_back(sv);
        }
      }
      col.missing.assign(missing.begin(), missing.end());
      if (IsNumericField(ft) && !scaled.empty()) col.edges = BinEdges(std::move(scaled));
      if (ft == FieldType::kDatetime && ylo <= yhi) {
        col.year_lo = ylo;
        col.year_hi = yhi;
      }
    } else if (IsTextField(ft)) {
      std::set<std::string> chars;
      std::set<std::string_view> distinct;
      for (auto v : vals) {
        auto cs = SplitCodePoints(v);
        col.max_len = std::max(col.max_len, int(cs.size()));
        if (v.empty()) col.empty_ok = true;
        chars.insert(cs.begin(), cs.end());
        distinct.insert(v);
      }
      col.chars.assign(chars.begin(), chars.end());
      const bool forced = it != opts.field_types.end();
      if (!forced && double(distinct.size()) <= kClosedTextShare * double(vals.size()))
        col.closed.assign(distinct.begin(), distinct.end());
      if (opts.text_pieces > 0 && ft == FieldType::kText && col.closed.empty()) {
        std::vector<std::string> values(vals.begin(), vals.end());
        auto pieces = tok_internal::TrainTextPieces(values, opts.text_pieces);
        if (!pieces.ok()) return pieces.status().WithContext(fmt::format("column '{}'", col.name));
        col.pieces = std::move(pieces).value();
      }
    }
    t->cols_.push_back(std::move(col));
  }
  if (!opts.header_order) {
    std::vector<int> order(t->cols_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return t->cols_[size_t(a)].type.distinct < t->cols_[size_t(b)].type.distinct;
    });
    if (!std::is_sorted(order.begin(), order.end())) t->order_ = std::move(order);
  }
  DS_RETURN_IF_ERROR(t->Finalize());
  if (opts.relations) {
    t->LearnColumnRelations(records);
    DS_RETURN_IF_ERROR(t->CheckRelations());
  }
  return t;
}

namespace {

bool HasValues(const FieldTokenizer::Column& c) {
  if (IsNumericField(c.type.type)) return !c.edges.empty();
  return c.type.type == FieldType::kDatetime && !c.part_base.empty();
}

// The scale of a column's relation keys: its decimals (numbers), 0 (DateKey).
int KeyDecimals(const FieldTokenizer::Column& c) {
  return IsNumericField(c.type.type) ? c.type.decimals : 0;
}

}  // namespace

// A value as its relations compare it: scaled as EncodeValue scales it, or DateKey.
bool FieldTokenizer::RelationKey(int ci, std::string_view v, int64_t* key) const {
  const Column& c = cols_[size_t(ci)];
  if (IsMissing(v) || c.index.count(std::string(v)) || !ValueFitsType(c.type, v)) return false;
  if (IsNumericField(c.type.type)) return ScaleToColumn(c.type, v, key);
  DateTime d;
  if (!c.format || !c.format->Read(v, &d)) return false;
  *key = DateKey(d);
  return true;
}

bool FieldTokenizer::Related(int a, int b) const {
  const Column &x = cols_[size_t(a)], &y = cols_[size_t(b)];
  if (!HasValues(x) || !HasValues(y)) return false;
  if (IsNumericField(x.type.type)) return IsNumericField(y.type.type);
  return y.type.type == FieldType::kDatetime && x.format->parts() == y.format->parts();
}

// Every training row, through RelationLearner (field_relations.h), over the numeric and
// datetime columns with values (missing spellings skipped); datetimes are paired only
// with datetimes of the same parts.
void FieldTokenizer::LearnColumnRelations(const std::vector<std::vector<std::string>>& records) {
  std::vector<int> cols, decimals, group;
  std::vector<std::vector<DatePart>> part_lists;
  for (size_t ci = 0; ci < cols_.size(); ++ci) {
    const Column& c = cols_[ci];
    if (!HasValues(c)) continue;
    int g = 0;
    if (c.type.type == FieldType::kDatetime) {
      auto it = std::find(part_lists.begin(), part_lists.end(), c.format->parts());
      g = 1 + int(it - part_lists.begin());
      if (it == part_lists.end()) part_lists.push_back(c.format->parts());
    }
    cols.push_back(int(ci));
    decimals.push_back(KeyDecimals(c));
    group.push_back(g);
  }
  relations_.clear();
  if (cols.size() < 2) return;
  RelationLearner learner(cols, decimals, RelationOptions{}, group);
  std::vector<int64_t> row(cols.size());
  for (const auto& r : records) {
    for (size_t k = 0; k < cols.size(); ++k)
      if (!RelationKey(cols[k], r[size_t(cols[k])], &row[k])) row[k] = RelationLearner::kMissing;
    learner.AddRow(row.data());
  }
  relations_ = learner.Finish();
}

// Relations name two distinct related columns (Related); rel_of_col_ indexes them.
Status FieldTokenizer::CheckRelations() {
  auto& by_col = rel_of_col_;
  by_col.assign(cols_.size(), {});
  for (size_t i = 0; i < relations_.size(); ++i) {
    const FieldRelation& r = relations_[i];
    for (int ci : {r.lo, r.hi}) {
      if (ci < 0 || ci >= int(cols_.size()))
        return DS_ERR(kCorrupt, "relation {}: no column {}", i + 1, ci + 1);
    }
    if (r.lo == r.hi) return DS_ERR(kCorrupt, "relation {}: a column against itself", i + 1);
    if (!Related(r.lo, r.hi))
      return DS_ERR(kCorrupt,
                    "relation {}: columns {} and {} are not two numbers or two datetimes of "
                    "the same parts",
                    i + 1, r.lo + 1, r.hi + 1);
    by_col[size_t(r.lo)].push_back(int(i));
    by_col[size_t(r.hi)].push_back(int(i));
  }
  return Status::Ok();
}

std::vector<int> FieldTokenizer::generation_order() const {
  std::vector<int> o(cols_.size());
  for (size_t p = 0; p < o.size(); ++p) o[p] = ColAt(int(p));
  return o;
}

std::string FieldTokenizer::OrderText() const {
  std::string s;
  for (int c : generation_order()) s += (s.empty() ? "" : ", ") + cols_[size_t(c)].name;
  return s;
}

// The trie of a closed text column (c.index maps a char to its offset);
// values must be sorted, unique, and spelled with the column's chars.
Status FieldTokenizer::BuildTrie(Column* c) {
  c->trie.assign(1, {});
  c->terminal.assign(1, false);
  if (c->closed.empty()) return Status::Ok();
  for (size_t i = 0; i < c->closed.size(); ++i) {
    const std::string& v = c->closed[i];
    if (i && !(c->closed[i - 1] < v))
      return DS_ERR(kCorrupt, "column '{}': closed values not sorted and unique", c->name);
    auto cs = SplitCodePoints(v);
    if (int(cs.size()) > c->max_len || (cs.empty() && !c->empty_ok))
      return DS_ERR(kCorrupt, "column '{}': closed value '{}' does not fit", c->name, v);
    int node = 0;
    for (const auto& ch : cs) {
      auto it = c->index.find(ch);
      if (it == c->index.end())
        return DS_ERR(kCorrupt, "column '{}': closed value '{}' has an unknown char", c->name, v);
      auto& edges = c->trie[size_t(node)];
      auto e = std::lower_bound(edges.begin(), edges.end(), std::make_pair(it->second, -1));
      if (e == edges.end() || e->first != it->second) {
        e = edges.insert(e, {it->second, int(c->trie.size())});
        c->trie.emplace_back();
        c->terminal.push_back(false);
      }
      node = e->second;
    }
    c->terminal[size_t(node)] = true;
  }
  return Status::Ok();
}

int FieldTokenizer::TrieChild(const Column& c, int node, int off) {
  const auto& edges = c.trie[size_t(node)];
  auto e = std::lower_bound(edges.begin(), edges.end(), std::make_pair(off, -1));
  return e != edges.end() && e->first == off ? e->second : -1;
}

// Pieces of open text: unique, 2..16 code points of the column's chars, not
// with closed values; each gets its offset in c->index (after the chars).
Status FieldTokenizer::CheckPieces(Column* c) {
  c->piece_len.clear();
  c->max_piece_len = 1;
  if (c->pieces.empty()) return Status::Ok();
  if (!c->closed.empty() || c->type.type != FieldType::kText)
    return DS_ERR(kCorrupt, "column '{}': pieces only in open text columns", c->name);
  for (size_t i = 0; i < c->pieces.size(); ++i) {
    const std::string& p = c->pieces[i];
    auto cs = SplitCodePoints(p);
    if (cs.size() < 2 || cs.size() > 16)
      return DS_ERR(kCorrupt, "column '{}': piece '{}' is not 2..16 characters", c->name, p);
    for (const auto& ch : cs)
      if (!c->index.count(ch))
        return DS_ERR(kCorrupt, "column '{}': piece '{}' has an unknown char", c->name, p);
    if (!c->index.emplace(p, int(c->chars.size() + i)).second)
      return DS_ERR(kCorrupt, "column '{}': piece '{}' twice", c->name, p);
    c->piece_len.push_back(int(cs.size()));
    c->max_piece_len = std::max(c->max_piece_len, int(cs.size()));
  }
  return Status::Ok();
}

// The fewest tokens spelling `cs` (the value's code points) with the column's
// chars and pieces (ties: the longer piece first, from the left); <eof> last.
Status FieldTokenizer::EncodeText(const Column& c, const std::vector<std::string>& cs,
                                  std::vector<int32_t>* out) const {
  const int n = int(cs.size());
  std::vector<int> best(size_t(n) + 1, INT32_MAX), take(size_t(n) + 1, -1);
  best[size_t(n)] = 0;
  std::string sub;
  for (int i = n - 1; i >= 0; --i) {
    sub.clear();
    for (int j = i; j < n && j - i < c.max_piece_len; ++j) {
      sub += cs[size_t(j)];
      auto it = c.index.find(sub);
      if (it == c.index.end() || best[size_t(j) + 1] == INT32_MAX) continue;
      if (best[size_t(j) + 1] + 1 <= best[size_t(i)]) {
        best[size_t(i)] = best[size_t(j) + 1] + 1;
        take[size_t(i)] = it->second;
      }
    }
    if (take[size_t(i)] < 0)
      return DS_ERR(kInvalidInput, "column '{}': character '{}' was not seen in training", c.name,
                    cs[size_t(i)]);
  }
  for (int i = 0; i < n; i += TextLen(c, take[size_t(i)])) out->push_back(c.base + take[size_t(i)]);
  out->push_back(c.base + TextEof(c));
  return Status::Ok();
}

// Assigns ids and builds the lookups; checks what loading must reject.
Status FieldTokenizer::Finalize() {
  int64_t next = 1;
  names_.assign(1, "<n>");
  auto add = [&](const std::string& name) { names_.push_back(name); };
  for (Column& c : cols_) {
    c.base = int(next);
    c.index.clear();
    c.part_base.clear();
    const FieldType ft = c.type.type;
    auto unique = [&](const std::vector<std::string>& list, const char* what) -> Status {
      for (size_t i = 0; i < list.size(); ++i)
        if (!c.index.emplace(list[i], int(i)).second)
          return DS_ERR(kCorrupt, "column '{}': {} '{}' twice", c.name, what, list[i]);
      return Status::Ok();
    };
    if (ft == FieldType::kCategorical) {
      DS_RETURN_IF_ERROR(unique(c.values, "value"));
      for (const auto& v : c.values) add(c.name + "=" + v);
      if (!c.rare.empty()) add(c.name + "=<other>");
      for (const auto& v : c.rare)
        if (!c.index.emplace(v, int(c.values.size())).second && c.index[v] != int(c.values.size()))
          return DS_ERR(kCorrupt, "column '{}': rare value '{}' is also a value", c.name, v);
      c.size = int(c.values.size()) + (c.rare.empty() ? 0 : 1);
      if (c.size == 0) return DS_ERR(kCorrupt, "column '{}': no values", c.name);
    } else if (IsNumericField(ft) || ft == FieldType::kDatetime) {
      DS_RETURN_IF_ERROR(unique(c.missing, "missing spelling"));
      for (const auto& m : c.missing) {
        if (!IsMissing(m)) return DS_ERR(kCorrupt, "column '{}': '{}' is not missing", c.name, m);
        add(c.name + "=" + (m.empty() ? "<empty>" : m));
      }
      c.size = int(c.missing.size());
      if (IsNumericField(ft)) {
        if (c.type.decimals < 0 || c.type.decimals > 9)
          return DS_ERR(kCorrupt, "column '{}': decimals {} out of range", c.name, c.type.decimals);
        if (c.edges.size() == 1 || c.edges.size() > size_t(kExactBins) + 1)
          return DS_ERR(kCorrupt, "column '{}': {} bin edges", c.name, c.edges.size());
        c.nd = 0;
        for (size_t b = 0; b < c.edges.size(); ++b) {
          if (std::llabs(c.edges[b]) > kMaxMagnitude + 1 || (b && c.edges[b] <= c.edges[b - 1]))
            return DS_ERR(kCorrupt, "column '{}': bin edges out of order or range", c.name);
          if (b) c.nd = std::max(c.nd, BinDigits(c, int(b) - 1));
        }
        for (size_t b = 0; b + 1 < c.edges.size(); ++b) add(fmt::format("{}#bin{}", c.name, b));
        for (int k = 0; k < c.nd; ++k)
          for (int d = 0; d < 10; ++d) add(fmt::format("{}#d{}={}", c.name, k, d));
        c.size += int(c.edges.size() ? c.edges.size() - 1 : 0) + 10 * c.nd;
        if (c.size == 0) return DS_ERR(kCorrupt, "column '{}': no values", c.name);
      } else {
        auto f = DateFormat::Parse(c.type.format);
        if (!f.ok()) return DS_ERR(kCorrupt, "column '{}': {}", c.name, f.status().message());
        c.format = std::make_unique<DateFormat>(*f);
        const bool has_dates = c.year_lo <= c.year_hi;
        if (has_dates && (c.year_lo < 0 || c.year_hi > 9999))
          return DS_ERR(kCorrupt, "column '{}': years out of range", c.name);
        if (!has_dates && c.missing.empty())
          return DS_ERR(kCorrupt, "column '{}': no values", c.name);
        if (has_dates) {
          for (DatePart p : c.format->parts()) {
            c.part_base.push_back(c.base + c.size);
            const int n = p == DatePart::kYear ? c.year_hi - c.year_lo + 1 : kPartSize[int(p)];
            for (int i = 0; i < n; ++i) add(fmt::format("{}#p{}={}", c.name, int(p), i));
            c.size += n;
          }
        }
      }
    } else if (IsTextField(ft)) {
      DS_RETURN_IF_ERROR(unique(c.chars, "character"));
      for (const auto& ch : c.chars) {
        size_t pos = 0;
        char32_t cp;
        if (!NextCodePointStrict(ch, &pos, &cp) || pos != ch.size())
          return DS_ERR(kCorrupt, "column '{}': '{}' is not one character", c.name, ch);
        add(c.name + "'" + ch);
      }
      DS_RETURN_IF_ERROR(CheckPieces(&c));
      for (const auto& p : c.pieces) add(c.name + "'" + p);
      add(c.name + "<eof>");
      if (c.max_len < 0 || c.max_len > (1 << 20) || (c.max_len > 0 && c.chars.empty()))
        return DS_ERR(kCorrupt, "column '{}': max_len {} out of range", c.name, c.max_len);
      if (c.max_len == 0 && !c.empty_ok)
        return DS_ERR(kCorrupt, "column '{}': no value can be written", c.name);
      c.size = TextEof(c) + 1;
      DS_RETURN_IF_ERROR(BuildTrie(&c));
    } else {
      c.size = 0;
    }
    next += c.size;
    if (next > INT32_MAX / 2) return DS_ERR(kCorrupt, "vocabulary too large");
  }
  vocab_ = int(next);
  DS_RETURN_IF_ERROR(CheckRelations());
  return CheckOrder();
}

Status FieldTokenizer::CheckOrder() const {
  if (order_.empty()) return Status::Ok();  // header order
  if (order_.size() != cols_.size()) return DS_ERR(kCorrupt, "'order' does not list every column");
  std::vector<bool> seen(cols_.size(), false);
  for (int c : order_) {
    if (c < 0 || size_t(c) >= cols_.size() || seen[size_t(c)])
      return DS_ERR(kCorrupt, "'order' is not a permutation of the columns");
    seen[size_t(c)] = true;
  }
  return Status::Ok();
}

const std::string& FieldTokenizer::text(int id) const {
  static const std::string kEmpty;
  return id >= 0 && id < vocab_ ? names_[size_t(id)] : kEmpty;
}

int FieldTokenizer::max_record_tokens() const {
  int64_t n = 1;  // int64: a loaded file may declare 2^20 columns of 2^20 characters
  for (const Column& c : cols_) {
    if (IsNumericField(c.type.type)) {
      n += 1 + c.nd;
    } else if (c.type.type == FieldType::kDatetime) {
      n += std::max<int64_t>(1, int64_t(c.part_base.size()));
    } else if (IsTextField(c.type.type)) {
      n += c.max_len + 1;
    } else if (c.size > 0) {
      n += 1;
    }
  }
  return int(std::min<int64_t>(n, INT32_MAX / 2));
}

// ---------------------------------------------------------------- encoding --

Status FieldTokenizer::EncodeValue(int ci, std::string_view v, std::vector<int32_t>* out,
                                   bool by_chars) const {
  const Column& c = cols_[size_t(ci)];
  const FieldType ft = c.type.type;
  auto not_seen = [&]() {
    return DS_ERR(kInvalidInput, "column '{}': value '{}' was not seen in training", c.name,
                  std::string(v));
  };
  if (ft == FieldType::kCategorical) {
    auto it = c.index.find(std::string(v));
    if (it == c.index.end()) return not_seen();
    out->push_back(c.base + it->second);
    return Status::Ok();
  }
  if (ft == FieldType::kConstant || ft == FieldType::kEmpty) {
    if (!ValueFitsType(c.type, v)) return not_seen();
    return Status::Ok();
  }
  if (IsTextField(ft)) {
    if (!c.closed.empty() && !std::binary_search(c.closed.begin(), c.closed.end(), v))
      return not_seen();
    auto cs = SplitCodePoints(v);
    if (int(cs.size()) > c.max_len || (cs.empty() && !c.empty_ok))
      return DS_ERR(kInvalidInput, "column '{}': '{}' is longer than any training value", c.name,
                    std::string(v));
    if (!c.pieces.empty() && !by_chars) return EncodeText(c, cs, out);
    for (const auto& ch : cs) {
      auto it = c.index.find(ch);
      if (it == c.index.end())
        return DS_ERR(kInvalidInput, "column '{}': character '{}' was not seen in training",
                      c.name, ch);
      out->push_back(c.base + it->second);
    }
    out->push_back(c.base + int(c.chars.size()));
    return Status::Ok();
  }
  // numeric / datetime: a missing spelling first
  if (auto it = c.index.find(std::string(v)); it != c.index.end()) {
    out->push_back(c.base + it->second);
    return Status::Ok();
  }
  if (!ValueFitsType(c.type, v) || IsMissing(v))
    return DS_ERR(kInvalidInput, "column '{}': '{}' is not a {} value{}", c.name, std::string(v),
                  FieldTypeName(ft), IsMissing(v) ? " (this missing spelling was not seen)" : "");
  if (ft == FieldType::kDatetime) {
    DateTime d;
    c.format->Read(v, &d);
    if (d.year < c.year_lo || d.year > c.year_hi)
      return DS_ERR(kInvalidInput, "column '{}': year {} is outside the training years {}..{}",
                    c.name, d.year, c.year_lo, c.year_hi);
    const int vals[] = {d.year - c.year_lo, d.month - 1, d.day - 1, d.hour, d.minute, d.second};
    const auto& parts = c.format->parts();
    for (size_t p = 0; p < parts.size(); ++p) out->push_back(c.part_base[p] + vals[int(parts[p])]);
    return Status::Ok();
  }
  int64_t s = 0;
  ScaleToColumn(c.type, v, &s);
  if (c.edges.empty() || s < c.edges.front() || s >= c.edges.back())
    return DS_ERR(kInvalidInput, "column '{}': {} is outside the training range", c.name,
                  std::string(v));
  const int b = int(std::upper_bound(c.edges.begin(), c.edges.end(), s) - c.edges.begin()) - 1;
  const int m = int(c.missing.size()), nb = NumBins(c);
  out->push_back(c.base + m + b);
  const int ndb = BinDigits(c, b);
  const int64_t r = s - c.edges[size_t(b)];
  for (int j = 0; j < ndb; ++j) {
    const int d = int((r / Pow10(ndb - 1 - j)) % 10);
    out->push_back(c.base + m + nb + 10 * (c.nd - ndb + j) + d);
  }
  return Status::Ok();
}

Status FieldTokenizer::EncodeField(std::string_view, std::vector<int32_t>*) const {
  return DS_ERR(kInvalidArgument,
                "the field tokenizer encodes whole records (start strings must end with the "
                "delimiter)");
}

Status FieldTokenizer::EncodeColumnField(int column, std::string_view field,
                                         std::vector<int32_t>* out) const {
  if (column < 0 || column >= int(cols_.size()))
    return DS_ERR(kInvalidArgument, "column {} of {}", column + 1, cols_.size());
  return EncodeValue(column, field, out);
}

Status FieldTokenizer::EncodeRecord(const std::vector<std::string>& fields,
                                    std::vector<int32_t>* out) const {
  if (fields.size() != cols_.size())
    return DS_ERR(kInvalidInput, "record has {} fields, expected {}", fields.size(), cols_.size());
  DS_RETURN_IF_ERROR(EncodeLeading(fields, out));
  out->push_back(0);
  return Status::Ok();
}

Status FieldTokenizer::EncodePrefix(const std::vector<std::string>& fields,
                                    std::vector<int32_t>* out) const {
  if (fields.size() >= cols_.size())
    return DS_ERR(kInvalidInput, "start has {} fields; with {} columns at most {} can be given",
                  fields.size(), cols_.size(), cols_.size() - 1);
  return EncodeLeading(fields, out);
}

// The values of the first fields.size() columns; on error `out` is left as it was.
Status FieldTokenizer::EncodeLeading(const std::vector<std::string>& fields,
                                     std::vector<int32_t>* out) const {
  const size_t start = out->size(), k = fields.size();
  int after = -1;  // a column with tokens, past the given ones, generated before some of them
  for (size_t p = 0; p < cols_.size(); ++p) {
    const int f = ColAt(int(p));
    if (size_t(f) >= k) {
      if (cols_[size_t(f)].size > 0 && after < 0) after = f;  // token-less columns take no step
      continue;
    }
    if (after >= 0 && cols_[size_t(f)].size > 0) {
      out->resize(start);
      return DS_ERR(kInvalidInput,
                    "a start fixes the first {} columns, but this model generates '{}' before "
                    "'{}' (generation order: {}); train with field_order \"header\" "
                    "(--field-order header) to start from the leading header columns",
                    k, cols_[size_t(after)].name, cols_[size_t(f)].name, OrderText());
    }
    Status s = EncodeValue(f, fields[size_t(f)], out);
    if (!s.ok()) {
      out->resize(start);
      return s;
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- decoding --

void FieldTokenizer::SkipEmpty(Cursor* c, std::vector<std::string>* fields) const {
  while (c->col < int(cols_.size()) && cols_[size_t(ColAt(c->col))].size == 0) {
    const Column& col = cols_[size_t(ColAt(c->col))];
    if (fields) fields->push_back(col.type.type == FieldType::kConstant ? col.type.constant : "");
    ++c->col;
  }
}

void FieldTokenizer::Begin(Cursor* c, std::vector<std::string>* fields) const {
  std::vector<int64_t> num = std::move(c->num);  // keeps its buffer
  *c = Cursor();
  if (!relations_.empty()) {
    num.assign(cols_.size(), kNoValue);
    c->num = std::move(num);
  }
  SkipEmpty(c, fields);
}

void FieldTokenizer::Complete(Cursor* c, std::string value, std::vector<std::string>* fields) const {
  if (fields) fields->push_back(std::move(value));
  ++c->col;
  c->part = 0;
  c->bin = -1;
  c->acc = 0;
  c->len = 0;
  c->node = 0;
  c->text.clear();
  SkipEmpty(c, fields);
}

void FieldTokenizer::PartRange(const Cursor& c, int* lo, int* hi) const {
  if (c.col >= int(cols_.size())) {
    *lo = 0;
    *hi = 1;
    return;
  }
  const Column& col = cols_[size_t(ColAt(c.col))];
  *lo = col.base;
  *hi = col.base + col.size;
  if (IsNumericField(col.type.type) && c.part > 0) {
    const int m = int(col.missing.size()), nb = NumBins(col);
    const int k = col.nd - BinDigits(col, c.bin) + c.part - 1;
    *lo = col.base + m + nb + 10 * k;
    *hi = *lo + 10;
  } else if (IsNumericField(col.type.type)) {
    *hi = col.base + int(col.missing.size()) + NumBins(col);
  } else if (col.type.type == FieldType::kDatetime && !col.part_base.empty()) {
    const auto& parts = col.format->parts();
    if (c.part > 0) *lo = col.part_base[size_t(c.part)];
    *hi = size_t(c.part) + 1 < parts.size() ? col.part_base[size_t(c.part) + 1] : col.base + col.size;
  }
}

void FieldTokenizer::Advance(Cursor* c, int32_t id, std::vector<std::string>* fields) const {
  if (c->broken) return;
  int lo, hi;
  PartRange(*c, &lo, &hi);
  if (id < lo || id >= hi || c->col >= int(cols_.size())) {
    c->broken = true;
    return;
  }
  const Column& col = cols_[size_t(ColAt(c->col))];
  const int off = id - col.base;
  const int m = int(col.missing.size());
  switch (col.type.type) {
    case FieldType::kCategorical:
      if (off < int(col.values.size())) return Complete(c, col.values[size_t(off)], fields);
      return Complete(
          c, col.rare[size_t(SplitMix64(c->hash + uint64_t(ColAt(c->col))) % col.rare.size())],
          fields);
    case FieldType::kInteger:
    case FieldType::kDecimal: {
      if (c->part == 0 && off < m) return Complete(c, col.missing[size_t(off)], fields);
      if (c->part == 0) {
        c->bin = off - m;
      } else {
        const int d = (id - lo);
        const int ndb = BinDigits(col, c->bin);
        const int64_t w = col.edges[size_t(c->bin) + 1] - col.edges[size_t(c->bin)];
        c->acc = c->acc * 10 + d;
        if (c->acc * Pow10(ndb - c->part) > w - 1) {
          c->broken = true;
          return;
        }
      }
      if (c->part == BinDigits(col, c->bin)) {
        const int64_t s = col.edges[size_t(c->bin)] + c->acc;
        if (!c->num.empty()) c->num[size_t(ColAt(c->col))] = s;
        return Complete(c, FormatNumber(s, col.type.decimals, col.type.trim), fields);
      }
      ++c->part;
      return;
    }
    case FieldType::kDatetime: {
      if (c->part == 0 && off < m) return Complete(c, col.missing[size_t(off)], fields);
      const auto& parts = col.format->parts();
      const int v = id - col.part_base[size_t(c->part)];
      switch (parts[size_t(c->part)]) {
        case DatePart::kYear: c->dt.year = col.year_lo + v; break;
        case DatePart::kMonth: c->dt.month = v + 1; break;
        case DatePart::kDay:
          if (v + 1 > DaysInMonth(c->dt.year, c->dt.month)) {
            c->broken = true;
            return;
          }
          c->dt.day = v + 1;
          break;
        case DatePart::kHour: c->dt.hour = v; break;
        case DatePart::kMinute: c->dt.minute = v; break;
        case DatePart::kSecond: c->dt.second = v; break;
      }
      if (size_t(++c->part) == parts.size()) {
        std::string s = col.format->Write(c->dt);
        if (!c->num.empty()) c->num[size_t(ColAt(c->col))] = DateKey(c->dt);
        c->dt = DateTime();
        return Complete(c, std::move(s), fields);
      }
      return;
    }
    case FieldType::kText:
    case FieldType::kId:
      if (off == TextEof(col)) {
        if ((c->len == 0 && !col.empty_ok) ||
            (!col.closed.empty() && !col.terminal[size_t(c->node)])) {
          c->broken = true;
          return;
        }
        return Complete(c, std::move(c->text), fields);
      }
      if (c->len + TextLen(col, off) > col.max_len) {
        c->broken = true;
        return;
      }
      if (!col.closed.empty() && (c->node = TrieChild(col, c->node, off)) < 0) {
        c->broken = true;
        return;
      }
      c->text += TextOf(col, off);
      c->len += TextLen(col, off);
      return;
    default: c->broken = true; return;
  }
}

void FieldTokenizer::Mask(const Cursor& c, float* logits) const {
  const float kNeg = -INFINITY;
  if (c.broken) return;  // nothing legal is left to keep
  int lo, hi;
  PartRange(c, &lo, &hi);
  std::fill(logits, logits + lo, kNeg);
  std::fill(logits + hi, logits + vocab_, kNeg);
  if (c.col >= int(cols_.size())) return;
  const Column& col = cols_[size_t(ColAt(c.col))];
  if (IsNumericField(col.type.type)) {
    MaskNumeric(c, col, lo, logits);
  } else if (col.type.type == FieldType::kDatetime && !col.part_base.empty()) {
    MaskDate(c, col, logits);
  } else if (IsTextField(col.type.type) && !col.closed.empty()) {
    const int eof = col.base + int(col.chars.size());
    const auto& edges = col.trie[size_t(c.node)];
    size_t e = 0;
    for (int off = 0; off < int(col.chars.size()); ++off) {
      while (e < edges.size() && edges[e].first < off) ++e;
      if (e >= edges.size() || edges[e].first != off) logits[col.base + off] = kNeg;
    }
    if (!col.terminal[size_t(c.node)]) logits[eof] = kNeg;
  } else if (IsTextField(col.type.type)) {
    const int eof = col.base + TextEof(col);
    if (c.len >= col.max_len) {
      std::fill(logits + lo, logits + eof, kNeg);
    } else if (c.len == 0 && !col.empty_ok) {
      logits[eof] = kNeg;
    }
    if (c.len + col.max_piece_len > col.max_len) {  // pieces that would pass max_len
      const int first = col.base + int(col.chars.size());
      for (int p = 0; p < int(col.pieces.size()); ++p)
        if (c.len + col.piece_len[size_t(p)] > col.max_len) logits[first + p] = kNeg;
    }
  }
}

// The bounds the relations put on column ci from the values already written: lo <= v
// <= hi, scaled at ci's decimals (false: no relation has its other column written yet).
bool FieldTokenizer::RelationBounds(const Cursor& c, int ci, int64_t* lo, int64_t* hi) const {
  if (c.num.empty() || rel_of_col_[size_t(ci)].empty()) return false;
  const int d = KeyDecimals(cols_[size_t(ci)]);
  bool any = false;
  *lo = INT64_MIN;
  *hi = INT64_MAX;
  for (int ri : rel_of_col_[size_t(ci)]) {
    const FieldRelation& r = relations_[size_t(ri)];
    const int other = r.lo == ci ? r.hi : r.lo;
    const int64_t v = c.num[size_t(other)];
    if (v == kNoValue) continue;
    const int dv = KeyDecimals(cols_[size_t(other)]);
    if (r.lo == ci) {
      *hi = std::min(*hi, FloorRescale(v, dv, d));  // ci <= other
    } else {
      *lo = std::max(*lo, CeilRescale(v, dv, d));  // other <= ci
    }
    any = true;
  }
  return any;
}

// A number's tokens: a bin whose values meet the relations' bounds (none when no bin
// does: then the bounds are dropped, not the record), then digits that keep some
// completion of the residual inside the bin and the bounds.
void FieldTokenizer::MaskNumeric(const Cursor& c, const Column& col, int lo,
                                 float* logits) const {
  const float kNeg = -INFINITY;
  const int ci = ColAt(c.col);
  int64_t blo = 0, bhi = 0;
  const bool bounded = RelationBounds(c, ci, &blo, &bhi) && blo <= bhi;
  const int m = int(col.missing.size()), nb = NumBins(col);
  if (c.part == 0) {
    if (!bounded) return;
    // The bins meeting [blo, bhi] are one run (the bins ascend): [b0, b1).
    int b0 = 0, b1 = nb;
    while (b0 < nb && col.edges[size_t(b0) + 1] - 1 < blo) ++b0;
    while (b1 > b0 && col.edges[size_t(b1) - 1] > bhi) --b1;
    if (b0 == b1) return;
    std::fill(logits + col.base + m, logits + col.base + m + b0, kNeg);
    std::fill(logits + col.base + m + b1, logits + col.base + m + nb, kNeg);
    return;
  }
  const int ndb = BinDigits(col, c.bin);
  const int64_t e = col.edges[size_t(c.bin)];
  const int64_t w = col.edges[size_t(c.bin) + 1] - e;
  __int128 rlo = 0, rhi = w - 1;  // the residual's legal interval
  if (bounded) {
    const __int128 nlo = std::max<__int128>(rlo, __int128(blo) - e);
    const __int128 nhi = std::min<__int128>(rhi, __int128(bhi) - e);
    if (nlo <= nhi) rlo = nlo, rhi = nhi;
  }
  const __int128 span = Pow10(ndb - c.part);
  for (int d = 0; d < 10; ++d) {
    const __int128 first = (__int128(c.acc) * 10 + d) * span, last = first + span - 1;
    if (first > rhi || last < rlo) logits[lo + d] = kNeg;
  }
}

namespace {

int PartValue(const DateTime& d, DatePart p) {
  switch (p) {
    case DatePart::kYear: return d.year;
    case DatePart::kMonth: return d.month;
    case DatePart::kDay: return d.day;
    case DatePart::kHour: return d.hour;
    case DatePart::kMinute: return d.minute;
    case DatePart::kSecond: return d.second;
  }
  return 0;
}

}  // namespace

// A datetime part's tokens: days up to the month's length; with relations, while the
// parts so far equal the bound's (the bound is tight), values on the bound's side only
// (dropped when that leaves none). Part k's tokens from part_base[k] are the values from
// `first` (year_lo for years, 1 for months and days, 0 for times).
void FieldTokenizer::MaskDate(const Cursor& c, const Column& col, float* logits) const {
  const float kNeg = -INFINITY;
  const auto& parts = col.format->parts();
  const DatePart p = parts[size_t(c.part)];
  const int first = p == DatePart::kYear ? col.year_lo
                    : (p == DatePart::kMonth || p == DatePart::kDay) ? 1 : 0;
  const int base = col.part_base[size_t(c.part)];
  const int end = size_t(c.part) + 1 < parts.size() ? col.part_base[size_t(c.part) + 1]
                                                    : col.base + col.size;
  int vlo = first, vhi = first + (end - base) - 1;
  if (p == DatePart::kDay) vhi = std::min(vhi, DaysInMonth(c.dt.year, c.dt.month));
  int64_t klo = 0, khi = 0;
  if (RelationBounds(c, ColAt(c.col), &klo, &khi) && klo <= khi) {
    auto tight = [&](const DateTime& b) {
      for (int k = 0; k < c.part; ++k)
        if (PartValue(c.dt, parts[size_t(k)]) != PartValue(b, parts[size_t(k)])) return false;
      return true;
    };
    int rlo = vlo, rhi = vhi;
    if (klo != INT64_MIN && tight(DateFromKey(klo)))
      rlo = std::max(rlo, PartValue(DateFromKey(klo), p));
    if (khi != INT64_MAX && tight(DateFromKey(khi)))
      rhi = std::min(rhi, PartValue(DateFromKey(khi), p));
    if (rlo <= rhi) vlo = rlo, vhi = rhi;
  }
  for (int id = base; id < base + (vlo - first); ++id) logits[id] = kNeg;
  for (int id = base + (vhi - first) + 1; id < end; ++id) logits[id] = kNeg;
}

// "" when every relation holds between the fields (both numbers), else why not.
// Each column's key is read once (a column takes part in many relations).
std::string FieldTokenizer::CheckRelationFields(const std::vector<std::string>& fields) const {
  if (relations_.empty()) return "";
  std::vector<int64_t> key(cols_.size(), kNoValue);
  for (size_t ci = 0; ci < cols_.size(); ++ci)
    if (!rel_of_col_[ci].empty() && !RelationKey(int(ci), fields[ci], &key[ci]))
      key[ci] = kNoValue;
  for (const FieldRelation& r : relations_) {
    const Column &a = cols_[size_t(r.lo)], &b = cols_[size_t(r.hi)];
    const std::string &va = fields[size_t(r.lo)], &vb = fields[size_t(r.hi)];
    const int64_t sa = key[size_t(r.lo)], sb = key[size_t(r.hi)];
    if (sa == kNoValue || sb == kNoValue) continue;
    if (CompareScaled(sa, KeyDecimals(a), sb, KeyDecimals(b)) > 0)
      return fmt::format("field {} '{}' = {} is greater than field {} '{}' = {} ('{}' <= '{}' "
                         "on every training row)",
                         r.lo + 1, a.name, va, r.hi + 1, b.name, vb, a.name, b.name);
  }
  return "";
}

std::string FieldTokenizer::DecodeRecord(std::span<const int32_t> ids,
                                         std::vector<std::string>* fields) const {
  fields->clear();
  Cursor c;
  Begin(&c, fields);
  // <other> is decoded by a hash of the WHOLE record's ids (see the header).
  for (int32_t id : ids) c.hash = SplitMix64(c.hash ^ uint64_t(uint32_t(id)));
  for (size_t i = 0; i < ids.size(); ++i) {
    Advance(&c, ids[i], fields);
    if (c.broken) {
      const std::string col = c.col < int(cols_.size())
                                  ? "'" + cols_[size_t(ColAt(c.col))].name + "'"
                                  : "after the last";
      return fmt::format("token {} (id {}) is not legal in column {}", i + 1, ids[i], col);
    }
  }
  if (c.col < int(cols_.size()))
    return fmt::format("record ended in column '{}'", cols_[size_t(ColAt(c.col))].name);
  if (!order_.empty()) {  // generation order -> header order
    std::vector<std::string> by_column(fields->size());
    for (size_t p = 0; p < fields->size(); ++p)
      by_column[size_t(order_[p])] = std::move((*fields)[p]);
    *fields = std::move(by_column);
  }
  return "";
}

std::string FieldTokenizer::CheckFields(const std::vector<std::string>& fields) const {
  if (fields.size() != cols_.size())
    return fmt::format("{} fields, expected {}", fields.size(), cols_.size());
  std::vector<int32_t> ids;
  for (size_t f = 0; f < fields.size(); ++f) {
    ids.clear();
    // A value is of its column's type when it encodes (known category, number
    // in range at the precision, real date in the years, known characters).
    // Text by its chars: every piece is made of known chars (CheckPieces), so a
    // value is valid iff its chars are, and the fewest-token search (EncodeText,
    // ~17% of fail2ban's generation with 256 pieces) is not needed to say so.
    Status s = EncodeValue(int(f), fields[f], &ids, /*by_chars=*/true);
    if (!s.ok()) return fmt::format("field {}: {}", f + 1, s.message());
  }
  return CheckRelationFields(fields);
}

std::string FieldTokenizer::CanonicalValue(int column, std::string_view v) const {
  if (column < 0 || column >= int(cols_.size())) return std::string(v);
  const Column& c = cols_[size_t(column)];
  if (!IsNumericField(c.type.type) || !c.type.normalized || c.index.count(std::string(v)) ||
      IsMissing(v) || !ValueFitsType(c.type, v))
    return std::string(v);
  int64_t s = 0;
  ScaleToColumn(c.type, v, &s);
  return FormatNumber(s, c.type.decimals, c.type.trim);
}

// ------------------------------------------------------------- description --

std::string FieldTokenizer::Describe() const {
  std::string out;
  for (const Column& c : cols_) {
    std::string what = FieldTypeName(c.type.type);
    switch (c.type.type) {
      case FieldType::kCategorical:
        what += fmt::format(" ({} values{})", c.values.size(),
                            c.rare.empty() ? "" : fmt::format(", {} rare pooled", c.rare.size()));
        break;
      case FieldType::kInteger:
      case FieldType::kDecimal:
        what += fmt::format(" (D={}{}, {} bins, {} digits)", c.type.decimals,
                            std::string(c.type.trim ? " trim" : "") +
                                (c.type.normalized ? " normalized" : ""),
                            c.edges.size() ? c.edges.size() - 1 : 0,
                            c.nd);
        break;
      case FieldType::kDatetime:
        what += fmt::format(" ({}, years {}..{})", c.type.format, c.year_lo, c.year_hi);
        break;
      case FieldType::kText:
      case FieldType::kId:
        what += fmt::format(" ({} chars{}, up to {}{})", c.chars.size(),
                            c.pieces.empty() ? "" : fmt::format(", {} pieces", c.pieces.size()),
                            c.max_len,
                            c.closed.empty() ? "" : fmt::format("; closed: {} values", c.closed.size()));
        break;
      default: break;
    }
    if (!c.missing.empty()) what += fmt::format(", {} missing spellings", c.missing.size());
    out += fmt::format("  {}: {}{}\n", c.name, what,
                       c.size ? fmt::format(", ids {}..{}", c.base, c.base + c.size - 1) : "");
  }
  if (!order_.empty()) out += fmt::format("  generated in the order: {}\n", OrderText());
  if (!relations_.empty()) {
    std::string list;
    for (size_t i = 0; i < relations_.size() && i < 12; ++i)
      list += fmt::format("{}{} <= {}", i ? ", " : "", cols_[size_t(relations_[i].lo)].name,
                          cols_[size_t(relations_[i].hi)].name);
    if (relations_.size() > 12) list += fmt::format(", ... ({} in all)", relations_.size());
    out += fmt::format("  relations kept: {}\n", list);
  }
  return out;
}

nlohmann::json FieldTokenizer::SchemaJson() const {
  nlohmann::json arr = nlohmann::json::array();
  for (const Column& c : cols_) {
    nlohmann::json j = {{"name", c.name}, {"type", FieldTypeName(c.type.type)}};
    if (IsNumericField(c.type.type)) {
      j["decimals"] = c.type.decimals;
      j["trim"] = c.type.trim;
      if (c.type.normalized) j["normalized"] = true;  // absent: false (older models)
    }
    if (c.type.type == FieldType::kDatetime) j["format"] = c.type.format;
    if (c.type.type == FieldType::kConstant) j["constant"] = c.type.constant;
    arr.push_back(std::move(j));
  }
  return arr;
}

// ------------------------------------------------------------ save / load --

Status FieldTokenizer::Save(const std::string& dir) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return DS_ERR(kIo, "{}: cannot create directory: {}", dir, ec.message());
  nlohmann::json j;
  j["format"] = tok_internal::kFormatName;
  j["format_version"] = tok_internal::kFormatVersion;
  j["type"] = type();
  j["vocab_size"] = vocab_;
  j["column_markers"] = false;
  j["num_columns"] = 0;
  j["specials"] = {"<n>"};
  nlohmann::json cols = SchemaJson();
  for (size_t i = 0; i < cols_.size(); ++i) {
    const Column& c = cols_[i];
    nlohmann::json& o = cols[i];
    switch (c.type.type) {
      case FieldType::kCategorical:
        o["values"] = c.values;
        o["rare"] = c.rare;
        break;
      case FieldType::kInteger:
      case FieldType::kDecimal:
        o["missing"] = c.missing;
        o["edges"] = c.edges;
        break;
      case FieldType::kDatetime:
        o["missing"] = c.missing;
        o["years"] = {c.year_lo, c.year_hi};
        break;
      case FieldType::kText:
      case FieldType::kId:
        o["chars"] = c.chars;
        o["max_len"] = c.max_len;
        o["empty_ok"] = c.empty_ok;
        if (!c.closed.empty()) o["closed"] = c.closed;  // absent: open (older models)
        if (!c.pieces.empty()) o["pieces"] = c.pieces;  // absent: chars only (older models)
        break;
      default: break;
    }
  }
  j["field"] = {{"rare_count", rare_count_}, {"columns", std::move(cols)}};
  if (!order_.empty()) j["field"]["order"] = order_;  // absent: header order (older models)
  if (!relations_.empty()) {  // absent: none (older models)
    nlohmann::json rel = nlohmann::json::array();
    for (const FieldRelation& r : relations_) rel.push_back({r.lo, r.hi});
    j["field"]["relations"] = std::move(rel);
  }
  return tok_internal::WriteFile((std::filesystem::path(dir) / tok_internal::kJsonFile).string(),
                                 j.dump(1) + "\n");
}

namespace {

std::vector<std::string> StringList(const nlohmann::json& o, const char* key, size_t max,
                                    const std::string& path) {
  const auto& a = JsonArray(o, key, max, path);
  std::vector<std::string> out;
  out.reserve(a.size());
  for (const auto& v : a) {
    if (!v.is_string()) DS_THROW(kCorrupt, "{}: '{}' holds a non-string", path, key);
    out.push_back(v.get<std::string>());
    if (!IsValidUtf8(out.back())) DS_THROW(kCorrupt, "{}: '{}' holds invalid UTF-8", path, key);
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> FieldTokenizer::Load(const nlohmann::json& j,
                                                        const std::string& path) {
  if (JsonBool(j, "column_markers", path) || JsonInt(j, "num_columns", 0, 0, path) != 0 ||
      JsonArray(j, "specials", 1, path) != nlohmann::json({"<n>"}))
    return DS_ERR(kCorrupt, "{}: a field tokenizer has no column markers and one special <n>",
                  path);
  const auto& f = JsonField(j, "field", path);
  std::unique_ptr<FieldTokenizer> t(new FieldTokenizer());
  t->rare_count_ = int(JsonInt(f, "rare_count", 1, INT32_MAX, path));
  const auto& cols = JsonArray(f, "columns", tok_internal::kMaxColumns, path);
  if (cols.empty()) return DS_ERR(kCorrupt, "{}: no columns", path);
  std::set<std::string> names;
  for (size_t i = 0; i < cols.size(); ++i) {
    const auto& o = cols[i];
    const std::string where = fmt::format("{} (column {})", path, i + 1);
    Column c;
    c.name = JsonString(o, "name", where);
    if (!names.insert(c.name).second) return DS_ERR(kCorrupt, "{}: name repeated", where);
    if (!ParseFieldTypeName(JsonString(o, "type", where), &c.type.type))
      return DS_ERR(kCorrupt, "{}: unknown type", where);
    const FieldType ft = c.type.type;
    if (ft == FieldType::kCategorical) {
      c.values = StringList(o, "values", size_t(1) << 22, where);
      c.rare = StringList(o, "rare", size_t(1) << 26, where);
    } else if (IsNumericField(ft)) {
      c.type.decimals = int(JsonInt(o, "decimals", 0, 9, where));
      c.type.trim = JsonBool(o, "trim", where);
      c.type.normalized = o.contains("normalized") && JsonBool(o, "normalized", where);
      c.missing = StringList(o, "missing", 16, where);
      const auto& e = JsonArray(o, "edges", size_t(kExactBins) + 1, where);
      for (const auto& v : e) {
        if (!v.is_number_integer()) return DS_ERR(kCorrupt, "{}: edges must be integers", where);
        c.edges.push_back(v.get<int64_t>());
      }
    } else if (ft == FieldType::kDatetime) {
      c.type.format = JsonString(o, "format", where);
      c.missing = StringList(o, "missing", 16, where);
      const auto& y = JsonArray(o, "years", 2, where);
      if (y.size() != 2 || !y[0].is_number_integer() || !y[1].is_number_integer())
        return DS_ERR(kCorrupt, "{}: 'years' must be [lo, hi]", where);
      c.year_lo = int(std::clamp<int64_t>(y[0].get<int64_t>(), -1, 10000));
      c.year_hi = int(std::clamp<int64_t>(y[1].get<int64_t>(), -1, 10000));
    } else if (IsTextField(ft)) {
      c.chars = StringList(o, "chars", 0x110000, where);
      c.max_len = int(JsonInt(o, "max_len", 0, 1 << 20, where));
      c.empty_ok = JsonBool(o, "empty_ok", where);
      if (o.contains("closed")) c.closed = StringList(o, "closed", size_t(1) << 22, where);
      if (o.contains("pieces")) c.pieces = StringList(o, "pieces", size_t(1) << 16, where);
    } else if (ft == FieldType::kConstant) {
      c.type.constant = JsonString(o, "constant", where);
    }
    t->cols_.push_back(std::move(c));
  }
  if (f.contains("order")) {
    for (const auto& v : JsonArray(f, "order", tok_internal::kMaxColumns, path)) {
      if (!v.is_number_integer()) return DS_ERR(kCorrupt, "{}: 'order' must hold integers", path);
      t->order_.push_back(int(std::clamp<int64_t>(v.get<int64_t>(), -1, INT32_MAX)));
    }
  }
  if (f.contains("relations")) {
    for (const auto& v : JsonArray(f, "relations", size_t(1) << 16, path)) {
      if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() ||
          !v[1].is_number_integer())
        return DS_ERR(kCorrupt, "{}: 'relations' must hold [lo, hi] column pairs", path);
      t->relations_.push_back({int(std::clamp<int64_t>(v[0].get<int64_t>(), -1, INT32_MAX)),
                               int(std::clamp<int64_t>(v[1].get<int64_t>(), -1, INT32_MAX))});
    }
  }
  Status s = t->Finalize();
  if (!s.ok()) return DS_ERR(kCorrupt, "{}: {}", path, s.message());
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace ds
