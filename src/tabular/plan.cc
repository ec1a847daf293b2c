#include "tabular/plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "io/csv.h"
#include "model/model_dir.h"
#include "util/json_fields.h"

namespace ds {
namespace {

using Json = nlohmann::json;

std::string Trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && (s[a] == ' ' || s[a] == '\t')) ++a;
  while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t')) --b;
  return std::string(s.substr(a, b - a));
}

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(Trim(s.substr(start, i - start)));
      start = i + 1;
    }
  return out;
}

// Groups `cols` (column indices, header order) into batches: `start` columns
// (a subset of cols) lead the first batch. See the file comment of plan.h.
std::vector<std::vector<int>> Group(const std::vector<int>& cols, const std::vector<int>& start,
                                    const std::vector<double>& A, size_t k, int B, bool automatic) {
  std::vector<std::vector<int>> out;
  if (cols.empty()) return out;
  const size_t n = cols.size();
  std::set<int> in_start(start.begin(), start.end());
  if (!automatic) {
    std::vector<int> order = start;
    for (int c : cols)
      if (!in_start.count(c)) order.push_back(c);
    size_t first = std::max(start.size(), size_t(B));
    out.emplace_back(order.begin(), order.begin() + std::min(first, n));
    for (size_t i = first; i < n; i += size_t(B))
      out.emplace_back(order.begin() + i, order.begin() + std::min(n, i + size_t(B)));
    return out;
  }
  // Balanced sizes: the first batch at least holds the start columns.
  const size_t nb = (n + size_t(B) - 1) / size_t(B);
  std::vector<size_t> sizes;
  size_t first = std::max(start.size(), (n + nb - 1) / nb);
  sizes.push_back(std::min(first, n));
  size_t rest = n - sizes[0];
  if (rest > 0) {
    size_t nr = (rest + size_t(B) - 1) / size_t(B);
    for (size_t i = 0; i < nr; ++i) sizes.push_back(rest / nr + (i < rest % nr ? 1 : 0));
  }
  std::vector<int> left = cols;  // unassigned, header order
  auto take = [&](int c) { left.erase(std::find(left.begin(), left.end(), c)); };
  for (size_t b = 0; b < sizes.size(); ++b) {
    std::vector<int> members;
    if (b == 0 && !start.empty()) {
      members = start;
    } else if (b == 0) {
      members = {left.front()};
    } else {
      // The unassigned column with the strongest tie to another unassigned one.
      int best = left.front();
      double best_s = -1;
      for (int c : left) {
        double s = 0;
        for (int d : left)
          if (d != c) s = std::max(s, A[size_t(c) * k + size_t(d)]);
        if (s > best_s) best_s = s, best = c;
      }
      members = {best};
    }
    for (int c : members) take(c);
    while (members.size() < sizes[b] && !left.empty()) {
      int best = left.front();
      double best_s = -1;
      for (int c : left) {
        double s = 0;
        for (int m : members) s += A[size_t(c) * k + size_t(m)];
        s /= double(members.size());
        if (s > best_s) best_s = s, best = c;
      }
      members.push_back(best);
      take(best);
    }
    // Start columns first, then header order.
    std::stable_sort(members.begin(), members.end(), [&](int a, int c) {
      bool sa = b == 0 && in_start.count(a), sc = b == 0 && in_start.count(c);
      if (sa != sc) return sa;
      if (sa) return false;  // keep the given start order
      return a < c;
    });
    out.push_back(std::move(members));
  }
  return out;
}

const std::bitset<128>& NumericChars() {
  static const std::bitset<128> s = [] {
    std::bitset<128> b;
    for (char c : std::string("0123456789+-.eE")) b.set(size_t(c));
    return b;
  }();
  return s;
}

std::string Join(const std::vector<std::string>& v) {
  return fmt::format("{}", fmt::join(v, ", "));
}

}  // namespace

Status TabularConfig::Validate() const {
  if (batch_columns < 1)
    return DS_ERR(kInvalidArgument, "tabular_batch_size must be >= 1 (got {})", batch_columns);
  if (grouping != "auto" && grouping != "order")
    return DS_ERR(kInvalidArgument, "tabular_grouping must be 'auto' or 'order' (got '{}')",
                  grouping);
  if (condition_columns < 0 || condition_columns > 64)
    return DS_ERR(kInvalidArgument, "tabular_condition_columns must be in [0, 64] (got {})",
                  condition_columns);
  if (!(min_condition_gain >= 0))
    return DS_ERR(kInvalidArgument, "tabular_min_condition_gain must be >= 0");
  if (parallel_batches < 0)
    return DS_ERR(kInvalidArgument, "tabular_parallel_batches must be >= 0 (got {})",
                  parallel_batches);
  if (association_rows < 0)
    return DS_ERR(kInvalidArgument, "tabular_association_rows must be >= 0");
  return Status::Ok();
}

Result<std::vector<std::vector<std::string>>> ParseHeaderGroups(std::string_view text) {
  std::vector<std::vector<std::string>> groups;
  std::string t = Trim(text);
  if (t.empty()) return groups;
  if (t[0] == '[') {
    Json j = Json::parse(t, nullptr, false);
    if (j.is_discarded() || !j.is_array())
      return DS_ERR(kInvalidArgument, "header groups: not a JSON array of arrays of names");
    for (size_t g = 0; g < j.size(); ++g) {
      if (!j[g].is_array())
        return DS_ERR(kInvalidArgument, "header groups: group {} is not an array of names", g + 1);
      std::vector<std::string> names;
      for (const auto& n : j[g]) {
        if (!n.is_string())
          return DS_ERR(kInvalidArgument, "header groups: group {} holds a non-string", g + 1);
        names.push_back(n.get<std::string>());
      }
      groups.push_back(std::move(names));
    }
  } else {
    for (const auto& g : Split(t, ';')) groups.push_back(Split(g, ','));
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].empty() || (groups[g].size() == 1 && groups[g][0].empty()))
      return DS_ERR(kInvalidArgument, "header groups: group {} is empty", g + 1);
    for (const auto& n : groups[g])
      if (n.empty())
        return DS_ERR(kInvalidArgument, "header groups: group {} has an empty column name", g + 1);
  }
  return groups;
}

Result<std::vector<std::string>> ParseColumnList(std::string_view text) {
  std::string t = Trim(text);
  std::vector<std::string> out;
  if (t.empty()) return out;
  if (t[0] == '[') {
    Json j = Json::parse(t, nullptr, false);
    if (j.is_discarded() || !j.is_array())
      return DS_ERR(kInvalidArgument, "column list: not a JSON array of names");
    for (const auto& n : j) {
      if (!n.is_string()) return DS_ERR(kInvalidArgument, "column list: a name is not a string");
      out.push_back(n.get<std::string>());
    }
  } else {
    out = Split(t, ',');
  }
  for (const auto& n : out)
    if (n.empty()) return DS_ERR(kInvalidArgument, "column list '{}': empty column name", t);
  return out;
}

namespace {

// A column's index by name; the error names `what` and the table's columns.
using ColumnLookup = std::function<Result<int>(const std::string& name, const char* what)>;

// Batches of column ids: the header groups (seed columns lead the first),
// then the other columns grouped by association (Group); without header
// groups, all columns with the seeds first.
Result<std::vector<std::vector<int>>> ColumnBatches(const std::vector<PlanColumn>& columns,
                                                    const std::vector<int>& seeds,
                                                    const std::vector<double>& A,
                                                    const TabularConfig& cfg,
                                                    const ColumnLookup& lookup) {
  const size_t k = columns.size();
  std::vector<std::vector<int>> batches;
  std::vector<int> group_of(k, -1);
  for (size_t g = 0; g < cfg.header_groups.size(); ++g) {
    std::vector<int> ids;
    if (cfg.header_groups[g].empty())
      return DS_ERR(kInvalidArgument, "header groups: group {} is empty", g + 1);
    for (const auto& name : cfg.header_groups[g]) {
      DS_ASSIGN_OR_RETURN(int c, lookup(name, "header groups"));
      if (group_of[size_t(c)] >= 0)
        return DS_ERR(kInvalidArgument, "header groups: column '{}' is in group {} and group {}",
                      name, group_of[size_t(c)] + 1, g + 1);
      group_of[size_t(c)] = int(g);
      ids.push_back(c);
    }
    batches.push_back(std::move(ids));
  }
  const bool automatic = cfg.grouping == "auto";
  if (!batches.empty()) {
    // Seed columns lead the first group.
    std::vector<int> first;
    for (int s : seeds) {
      if (group_of[size_t(s)] > 0)
        return DS_ERR(kInvalidArgument,
                      "seed column '{}' is in header group {}; seed columns must be in the first "
                      "group (or in none: they are then added to it)",
                      columns[size_t(s)].name, group_of[size_t(s)] + 1);
      first.push_back(s);
      group_of[size_t(s)] = 0;
    }
    for (int c : batches[0])
      if (std::find(seeds.begin(), seeds.end(), c) == seeds.end()) first.push_back(c);
    batches[0] = first;
    std::vector<int> rest;
    for (size_t c = 0; c < k; ++c)
      if (group_of[c] < 0) rest.push_back(int(c));
    for (auto& b : Group(rest, {}, A, k, cfg.batch_columns, automatic)) batches.push_back(b);
  } else {
    std::vector<int> all(k);
    for (size_t c = 0; c < k; ++c) all[c] = int(c);
    batches = Group(all, seeds, A, k, cfg.batch_columns, automatic);
  }

  return batches;
}

// Conditioning columns of batch b (b >= 1): greedily the earlier columns that
// add the most association with the batch's columns and that the earlier
// batches can write; the batch's columns are then ordered by relation to them.
void ChooseConditions(const std::vector<PlanColumn>& columns, const std::vector<double>& A,
                      const TabularConfig& cfg, const std::vector<std::vector<int>>& batches,
                      const std::vector<int>& batch_of, size_t b,
                      std::vector<std::bitset<128>>* charset_p, TabularBatch* out_b) {
  const size_t k = columns.size();
  auto& charset = *charset_p;
  std::vector<int> cand;
  for (size_t c = 0; c < k; ++c) {
    int cb = batch_of[c];
    if (cb < 0 || size_t(cb) >= b) continue;
    const PlanColumn& pc = columns[c];
    if (pc.type == ColumnType::kCategory) {
      cand.push_back(int(c));
    } else if (pc.type == ColumnType::kInteger || pc.type == ColumnType::kDecimal) {
      std::bitset<128> can_make = charset[size_t(cb)] & NumericChars();
      std::bitset<128> known = charset[b] | pc.ascii;
      if ((can_make & ~known).none()) cand.push_back(int(c));
    }
  }
  std::vector<double> cover(batches[b].size(), 0.0);
  std::vector<int> chosen;
  while (int(chosen.size()) < cfg.condition_columns) {
    int best = -1;
    double best_gain = 0;
    for (int c : cand) {
      if (std::find(chosen.begin(), chosen.end(), c) != chosen.end()) continue;
      double gain = 0;
      for (size_t j = 0; j < batches[b].size(); ++j)
        gain += std::max(0.0, A[size_t(c) * k + size_t(batches[b][j])] - cover[j]);
      if (gain > best_gain) best_gain = gain, best = c;
    }
    if (best < 0 || best_gain < cfg.min_condition_gain) break;
    chosen.push_back(best);
    for (size_t j = 0; j < batches[b].size(); ++j)
      cover[j] = std::max(cover[j], A[size_t(best) * k + size_t(batches[b][j])]);
  }
  // Short dependencies are learned first: the most useful conditioning
  // column goes last (next to the batch's columns), and the batch's columns
  // follow in decreasing relation to the conditioning columns.
  std::reverse(chosen.begin(), chosen.end());
  for (int c : chosen) {
    out_b->condition.push_back(columns[size_t(c)].name);
    charset[b] |= columns[size_t(c)].ascii;
  }
  if (!chosen.empty()) {
    std::vector<std::pair<double, int>> order;
    for (int j : batches[b]) {
      double r = 0;
      for (int c : chosen) r = std::max(r, A[size_t(c) * k + size_t(j)]);
      order.emplace_back(r, j);
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& x, const auto& y) { return x.first > y.first; });
    out_b->columns.clear();
    for (const auto& [r, j] : order) out_b->columns.push_back(columns[size_t(j)].name);
  }
}

}  // namespace

Result<std::vector<TabularBatch>> PlanBatches(const std::vector<PlanColumn>& columns,
                                              const std::vector<double>& A,
                                              const TabularConfig& cfg) {
  DS_RETURN_IF_ERROR(cfg.Validate());
  const size_t k = columns.size();
  if (k == 0) return DS_ERR(kInvalidInput, "the table has no columns");
  if (A.size() != k * k) return DS_ERR(kInternal, "association matrix of the wrong size");
  std::map<std::string, int> index;
  for (size_t i = 0; i < k; ++i) index[columns[i].name] = int(i);
  auto lookup = [&](const std::string& name, const char* what) -> Result<int> {
    auto it = index.find(name);
    if (it == index.end())
      return DS_ERR(kInvalidArgument, "{}: no column '{}' in the table (columns: {})", what, name,
                    [&] {
                      std::vector<std::string> h;
                      for (const auto& c : columns) h.push_back(c.name);
                      std::string s = Join(h);
                      return s.size() > 200 ? s.substr(0, 197) + "..." : s;
                    }());
    return it->second;
  };

  std::vector<int> seeds;
  for (const auto& s : cfg.seed_columns) {
    DS_ASSIGN_OR_RETURN(int c, lookup(s, "seed columns"));
    if (std::find(seeds.begin(), seeds.end(), c) != seeds.end())
      return DS_ERR(kInvalidArgument, "seed columns: '{}' is listed twice", s);
    seeds.push_back(c);
  }

  DS_ASSIGN_OR_RETURN(std::vector<std::vector<int>> batches,
                      ColumnBatches(columns, seeds, A, cfg, lookup));

  // Conditioning columns.
  std::vector<TabularBatch> out(batches.size());
  std::vector<std::bitset<128>> charset(batches.size());  // [batches] incl. conditioning
  std::vector<int> batch_of(k, -1);
  for (size_t b = 0; b < batches.size(); ++b) {
    out[b].dir = fmt::format("batch_{}", b);
    for (int c : batches[b]) {
      out[b].columns.push_back(columns[size_t(c)].name);
      charset[b] |= columns[size_t(c)].ascii;
      batch_of[size_t(c)] = int(b);
    }
  }
  for (size_t b = 1; b < batches.size() && cfg.condition_columns > 0; ++b)
    ChooseConditions(columns, A, cfg, batches, batch_of, b, &charset, &out[b]);
  return out;
}

namespace {

const JsonFields<TabularBatch>& BatchFields() {
  static const JsonFields<TabularBatch> fields = {
      JsonMember("dir", &TabularBatch::dir),
      JsonMember("condition", &TabularBatch::condition),
      JsonMember("columns", &TabularBatch::columns),
  };
  return fields;
}

// A delimiter: one ASCII character (io/csv.h ParseDelimiter).
JsonField<TabularSpec> DelimiterField(const char* key, char TabularSpec::*member) {
  return {key, JsonNeed::kRequired,
          [member](const TabularSpec& s) { return Json(std::string(1, s.*member)); },
          [key, member](const Json& j, TabularSpec* s, const std::string& src) -> Status {
            std::string d = j.get<std::string>();
            if (d.size() != 1)
              return DS_ERR(kCorrupt, "{}: key '{}': '{}' is not one ASCII character", src, key, d);
            Result<char> pd = ParseDelimiter(d);
            if (!pd.ok())
              return DS_ERR(kCorrupt, "{}: key '{}': {}", src, key, pd.status().message());
            s->*member = *pd;
            return Status::Ok();
          }};
}

// tabular.json, one row per key (util/json_fields.h); "format" is checked
// before the table is read.
const JsonFields<TabularSpec>& SpecFields() {
  using T = TabularSpec;
  static const JsonFields<T> fields = {
      {"version", JsonNeed::kRequired, [](const T& s) { return Json(s.format_version); },
       [](const Json& j, T* s, const std::string& src) -> Status {
         s->format_version = j.get<int>();
         if (s->format_version != kTabularFormatVersion)
           return DS_ERR(kCorrupt,
                         "{}: unsupported tabular format version {} (this build reads {})", src,
                         s->format_version, kTabularFormatVersion);
         return Status::Ok();
       }},
      JsonMember("datasynth_version", &T::datasynth_version, JsonNeed::kOptional),
      JsonMember("header", &T::header),
      DelimiterField("delimiter", &T::delimiter),
      DelimiterField("batch_delimiter", &T::batch_delimiter),
      JsonMember("rows", &T::rows),
      JsonMember("input", &T::input_path, JsonNeed::kOptional),
      JsonOptional("input_file", &T::input_file, FileIdentityToJson, FileIdentityFromJson),
      JsonMember("grouping", &T::grouping),
      JsonMember("batch_columns", &T::batch_columns),
      JsonMember("condition_columns", &T::condition_columns),
      JsonMember("seed_columns", &T::seed_columns),
      JsonMember("seed", &T::seed),
      {"batches", JsonNeed::kRequired,
       [](const T& s) {
         Json bs = Json::array();
         for (const auto& b : s.batches) bs.push_back(ToJsonFields(b, BatchFields()));
         return bs;
       },
       [](const Json& j, T* s, const std::string& src) -> Status {
         if (!j.is_array()) return DS_ERR(kCorrupt, "{}: 'batches' is not an array", src);
         for (const auto& b : j) {
           TabularBatch t;
           DS_RETURN_IF_ERROR(ReadJsonFields(b, BatchFields(), &t, src));
           s->batches.push_back(std::move(t));
         }
         return Status::Ok();
       }},
  };
  return fields;
}

}  // namespace

Json TabularSpec::ToJson() const {
  Json j = ToJsonFields(*this, SpecFields());
  j["format"] = "datasynth-tabular";
  return j;
}

Result<TabularSpec> TabularSpec::FromJson(const Json& j, const std::string& src) {
  TabularSpec s;
  try {
    if (!j.is_object() || j.value("format", "") != "datasynth-tabular")
      return DS_ERR(kCorrupt, "{}: not a datasynth tabular model description", src);
    DS_RETURN_IF_ERROR(ReadJsonFields(j, SpecFields(), &s, src));
  } catch (const Json::exception& e) {
    return DS_ERR(kCorrupt, "{}: {}", src, e.what());
  }
  DS_RETURN_IF_ERROR(s.Check(src));
  return s;
}

Status TabularSpec::Check(const std::string& src) const {
  if (header.empty()) return DS_ERR(kCorrupt, "{}: empty header", src);
  if (rows < 0) return DS_ERR(kCorrupt, "{}: key 'rows': {} is negative", src, rows);
  std::map<std::string, int> batch_of;
  for (const auto& h : header)
    if (!batch_of.emplace(h, -1).second)
      return DS_ERR(kCorrupt, "{}: duplicate column '{}' in the header", src, h);
  if (batches.empty()) return DS_ERR(kCorrupt, "{}: no batches", src);
  for (size_t b = 0; b < batches.size(); ++b) {
    const TabularBatch& t = batches[b];
    if (t.dir != fmt::format("batch_{}", b))
      return DS_ERR(kCorrupt, "{}: batch {} has directory '{}' (expected batch_{})", src, b, t.dir,
                    b);
    if (t.columns.empty()) return DS_ERR(kCorrupt, "{}: batch {} has no columns", src, b);
    for (const auto& c : t.columns) {
      auto it = batch_of.find(c);
      if (it == batch_of.end())
        return DS_ERR(kCorrupt, "{}: batch {} column '{}' is not in the header", src, b, c);
      if (it->second >= 0)
        return DS_ERR(kCorrupt, "{}: column '{}' is in batch {} and batch {}", src, c, it->second,
                      b);
      it->second = int(b);
    }
    std::set<std::string> seen;
    for (const auto& c : t.condition) {
      auto it = batch_of.find(c);
      if (it == batch_of.end() || it->second < 0 || size_t(it->second) >= b)
        return DS_ERR(kCorrupt,
                      "{}: batch {} is conditioned on '{}', not a column of an earlier "
                      "batch",
                      src, b, c);
      if (!seen.insert(c).second)
        return DS_ERR(kCorrupt, "{}: batch {} lists conditioning column '{}' twice", src, b, c);
    }
  }
  for (const auto& [name, b] : batch_of)
    if (b < 0) return DS_ERR(kCorrupt, "{}: column '{}' is in no batch", src, name);
  if (seed_columns.size() > batches[0].columns.size())
    return DS_ERR(kCorrupt, "{}: more seed columns than batch 0 columns", src);
  for (size_t i = 0; i < seed_columns.size(); ++i)
    if (seed_columns[i] != batches[0].columns[i])
      return DS_ERR(kCorrupt, "{}: seed column '{}' is not column {} of batch 0", src,
                    seed_columns[i], i + 1);
  return Status::Ok();
}

}  // namespace ds
