#include "train/marginals.h"


#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>

#include "backend/registry.h"
#include "dist/comm.h"
#include "dist/profile.h"
#include "generate/field_filter.h"
#include "generate/generator.h"
#include "privacy/exponential_mechanism.h"
#include "schema/column_rules.h"

namespace ds {

namespace {

bool Calibrated(FieldType t) {
  return t == FieldType::kCategorical || t == FieldType::kInteger || t == FieldType::kDecimal ||
         t == FieldType::kDatetime;
}

// A numeric or datetime column: its first tokens, after the missing
// spellings (Missing of them), are bins or years in order.
bool Ordered(const FieldTokenizer& tok, const ColumnMarginal& m) {
  return tok.columns()[size_t(m.column)].type.type != FieldType::kCategorical;
}
size_t Missing(const FieldTokenizer& tok, const ColumnMarginal& m) {
  return tok.columns()[size_t(m.column)].missing.size();
}

}  // namespace

// The first token id of every column of `rec` (-1: none); false when the
// record does not encode.
bool FirstTokens(const FieldTokenizer& tok, const std::vector<std::string>& rec,
                 std::vector<int32_t>* ids, std::vector<int32_t>* first) {
  ids->clear();
  first->assign(tok.columns().size(), -1);
  if (!tok.EncodeRecord(rec, ids).ok()) return false;
  FieldTokenizer::Cursor c;
  tok.Begin(&c, nullptr);
  for (int32_t id : *ids) {
    if (c.broken) break;
    if (c.part == 0 && c.col < int(first->size())) (*first)[size_t(c.col)] = id;
    tok.Advance(&c, id, nullptr);
  }
  return true;
}

// The cell of `m` a record with first tokens `first` ([columns]) falls in (-1: none).
int64_t CellOf(const ColumnMarginal& m, const int32_t* first) {
  const int32_t id = first[size_t(m.column)];
  if (id < m.lo || id >= m.hi) return -1;
  const int64_t col = m.col_of.empty() ? int64_t(id - m.lo) * m.cols / (m.hi - m.lo)
                                       : m.col_of[size_t(id - m.lo)];
  if (m.parent < 0) return col;
  const int32_t pid = first[size_t(m.parent)];
  if (pid < m.plo || pid >= m.phi) return -1;
  const int64_t row = m.row_of.empty() ? int64_t(pid - m.plo) * m.rows / (m.phi - m.plo)
                                       : m.row_of[size_t(pid - m.plo)];
  return row * m.cols + col;
}

// Adds one record, of first tokens `first` ([columns], FirstTokens), to the
// counts of every cell it falls in: CountMarginals' and MeasureModel's one count.
void AddRecord(const int32_t* first, std::vector<ColumnMarginal>* cells) {
  for (ColumnMarginal& m : *cells) {
    const int64_t cell = CellOf(m, first);
    if (cell >= 0) m.p[size_t(cell)] += 1;
  }
}

PairTable ColumnMarginal::Shape() const {
  PairTable t;
  t.child = column;
  t.parent = parent;
  t.lo = lo;
  t.hi = hi;
  t.plo = plo;
  t.phi = phi;
  t.rows = rows;
  t.cols = cols;
  t.w.assign(size_t(rows) * size_t(cols), 0.0f);
  t.row_of = row_of;
  t.col_of = col_of;
  return t;
}

std::vector<int32_t> MassGroups(const std::vector<double>& counts, int groups) {
  const size_t n = counts.size();
  std::vector<int32_t> out(n, 0);
  if (n == 0) return out;
  groups = std::max(1, std::min<int>(groups, int(n)));
  double total = 0;
  for (double c : counts) total += std::max(0.0, c);
  std::vector<char> own(n, 0);
  double rest = total;
  int left = groups;
  for (size_t i = 0; i < n; ++i)
    if (total > 0 && std::max(0.0, counts[i]) >= total / groups && left > 1) {
      own[i] = 1;
      rest -= std::max(0.0, counts[i]);
      --left;
    }
  // Labels: an own id -> -1 - i, the others -> their quantile slot in id order.
  std::vector<int64_t> label(n);
  double before = 0;
  for (size_t i = 0; i < n; ++i) {
    if (own[i]) {
      label[i] = -1 - int64_t(i);
      continue;
    }
    const double c = std::max(0.0, counts[i]);
    const double at = rest > 0 ? (before + 0.5 * c) / rest : (double(i) + 0.5) / double(n);
    label[i] = std::min<int64_t>(left - 1, int64_t(at * left));
    before += c;
  }
  // Groups numbered by first appearance: one per own id, one per quantile
  // slot (an own id may sit inside a slot's run: then that slot is split in
  // two ranges but stays one group).
  std::vector<int32_t> slot_group(size_t(left), -1);
  int32_t next = 0;
  for (size_t i = 0; i < n; ++i) {
    if (label[i] < 0) {
      out[i] = next++;
      continue;
    }
    int32_t& sg = slot_group[size_t(label[i])];
    if (sg < 0) sg = next++;
    out[i] = sg;
  }
  return out;
}


std::vector<ColumnMarginal> MarginalCells(const FieldTokenizer& tok) {
  std::vector<ColumnMarginal> out;
  for (size_t k = 0; k < tok.columns().size(); ++k) {
    const auto& col = tok.columns()[k];
    if (!Calibrated(col.type.type) || col.size == 0) continue;
    ColumnMarginal m;
    m.column = int(k);
    FirstTokenRange(tok, int(k), &m.lo, &m.hi);
    if (m.hi - m.lo < 2) continue;  // one cell: nothing to calibrate
    m.cols = m.hi - m.lo;
    m.p.assign(size_t(m.hi - m.lo), 0.0);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<ColumnMarginal> WithParents(const std::vector<ColumnMarginal>& one_way,
                                        const std::vector<std::vector<int>>& parents, int groups,
                                        const std::vector<std::vector<int32_t>>* group_of) {
  auto count = [](const std::vector<int32_t>& map) {
    return map.empty() ? 0 : int(*std::max_element(map.begin(), map.end())) + 1;
  };
  std::vector<ColumnMarginal> out;
  for (size_t i = 0; i < one_way.size(); ++i) {
    const std::vector<int> none;
    const std::vector<int>& ps = i < parents.size() ? parents[i] : none;
    bool any = false;
    for (int a : ps) {
      if (a < 0 || size_t(a) >= i) continue;
      ColumnMarginal m = one_way[i];
      m.parent = one_way[size_t(a)].column;
      m.plo = one_way[size_t(a)].lo;
      m.phi = one_way[size_t(a)].hi;
      m.rows = std::min(groups, m.phi - m.plo);
      m.cols = std::min(groups, m.hi - m.lo);
      if (group_of) {
        m.row_of = (*group_of)[size_t(a)];
        m.col_of = (*group_of)[i];
        m.rows = count(m.row_of);
        m.cols = count(m.col_of);
      }
      m.p.assign(size_t(m.rows) * size_t(m.cols), 0.0);
      out.push_back(std::move(m));
      any = true;
    }
    if (!any) out.push_back(one_way[i]);
  }
  return out;
}

std::vector<ColumnMarginal> AllPairs(const std::vector<ColumnMarginal>& one_way, int groups,
                                     const std::vector<std::vector<int32_t>>* group_of) {
  std::vector<ColumnMarginal> out;
  for (size_t b = 1; b < one_way.size(); ++b)
    for (size_t a = 0; a < b; ++a) {
      const std::vector<std::vector<int32_t>> maps =
          group_of ? std::vector<std::vector<int32_t>>{(*group_of)[a], (*group_of)[b]}
                   : std::vector<std::vector<int32_t>>{};
      out.push_back(WithParents({one_way[a], one_way[b]}, {{}, {0}}, groups,
                                group_of ? &maps : nullptr)[1]);
    }
  return out;
}

std::vector<std::vector<int>> ChooseParents(const std::vector<ColumnMarginal>& one_way,
                                            const std::vector<ColumnMarginal>& all_pairs,
                                            double noise_stddev, int per_column, double min_mi) {
  std::vector<std::vector<int>> parent(one_way.size());
  size_t at = 0;
  for (size_t b = 1; b < one_way.size(); ++b) {
    std::vector<std::pair<double, int>> scored;  // (-mi, a): best first
    for (size_t a = 0; a < b; ++a, ++at) {
      if (at >= all_pairs.size()) return parent;
      const ColumnMarginal& m = all_pairs[at];
      const int R = m.rows, C = m.cols;
      std::vector<double> row(size_t(R), 0.0), col(size_t(C), 0.0);
      double n = 0;
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) {
          const double v = std::max(0.0, m.p[size_t(r * C + c)]);
          row[size_t(r)] += v;
          col[size_t(c)] += v;
          n += v;
        }
      if (!(n > 0)) continue;
      double mi = 0;
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) {
          const double v = std::max(0.0, m.p[size_t(r * C + c)]);
          if (v > 0) mi += v / n * std::log(v * n / (row[size_t(r)] * col[size_t(c)]));
        }
      // Miller-Madow bias, the noise counted as extra variance per cell.
      const double cells = double(R) * double(C);
      mi -= double(R - 1) * double(C - 1) / (2.0 * n) *
            (1.0 + noise_stddev * noise_stddev * cells / n);
      if (mi > min_mi) scored.push_back({-mi, int(a)});
    }
    std::sort(scored.begin(), scored.end());
    for (size_t k = 0; k < scored.size() && int(k) < per_column; ++k)
      parent[b].push_back(scored[k].second);
  }
  return parent;
}

void CountMarginals(const FieldTokenizer& tok, const std::vector<std::vector<std::string>>& records,
                    std::vector<ColumnMarginal>* cells, int64_t* skipped) {
  std::vector<int32_t> ids, first;
  for (const auto& rec : records) {
    if (!FirstTokens(tok, rec, &ids, &first)) {
      if (skipped) ++*skipped;
      continue;
    }
    AddRecord(first.data(), cells);
  }
}

void KeepContiguous(std::vector<double>* p, size_t start, double threshold) {
  std::vector<double>& v = *p;
  if (start >= v.size()) return;
  size_t top = start;
  for (size_t i = start; i < v.size(); ++i)
    if (v[i] > v[top]) top = i;
  if (!(v[top] > threshold)) return;
  // Seeds: the cells above 3 thresholds (the largest when none is), each
  // grown over its neighbours above one.
  std::vector<char> keep(v.size(), 0);
  for (size_t i = start; i < v.size(); ++i) {
    if (!(v[i] > 3 * threshold) && i != top) continue;
    keep[i] = 1;
    for (size_t j = i; j > start && v[j - 1] > threshold && !keep[j - 1]; --j) keep[j - 1] = 1;
    for (size_t j = i + 1; j < v.size() && v[j] > threshold && !keep[j]; ++j) keep[j] = 1;
  }
  for (size_t i = start; i < v.size(); ++i)
    if (!keep[i]) v[i] = 0;
}

namespace {

// Per group (`group`: one label per cell, 0..): the sum of p's cells.
std::vector<double> SumByGroup(const std::vector<double>& p, const std::vector<int32_t>& group) {
  std::vector<double> sum;
  for (size_t i = 0; i < p.size(); ++i) {
    if (size_t(group[i]) >= sum.size()) sum.resize(size_t(group[i]) + 1, 0.0);
    sum[size_t(group[i])] += p[i];
  }
  return sum;
}

size_t IndexOf(const std::vector<ColumnMarginal>& one, int column) {
  size_t a = 0;
  while (a < one.size() && one[a].column != column) ++a;
  return a;
}

// Adds noisy group masses (variance var[g] each) to the inverse-variance sums
// (num += x / v, den += 1 / v).
void AddEvidence(const std::vector<double>& mass, const std::vector<double>& var,
                 std::vector<double>* num, std::vector<double>* den) {
  for (size_t g = 0; g < mass.size() && g < num->size(); ++g) {
    if (!(var[g] > 0)) continue;
    (*num)[g] += mass[g] / var[g];
    (*den)[g] += 1 / var[g];
  }
}

}  // namespace

void FillEmptyGroups(const std::vector<double>& untrimmed, const std::vector<int32_t>& group,
                     std::vector<double>* p, const std::vector<char>& dead) {
  const std::vector<double> mass = SumByGroup(*p, group);
  for (size_t i = 0; i < p->size(); ++i)
    if (!(mass[size_t(group[i])] > 0) && !(size_t(group[i]) < dead.size() && dead[size_t(group[i])]))
      (*p)[i] = untrimmed[i];
}

std::vector<std::vector<char>> DeadGroups(const std::vector<ColumnMarginal>& one_raw,
                                          const std::vector<ColumnMarginal>& trimmed,
                                          const std::vector<std::vector<int32_t>>& group_of,
                                          const std::vector<char>& ordered, double one_stddev,
                                          const std::vector<ColumnMarginal>& pairs_raw,
                                          double pair_stddev, double z) {
  const size_t n = trimmed.size();
  std::vector<std::vector<double>> num(n), den(n);
  for (size_t i = 0; i < n; ++i) {
    // The 1-way histogram: group g's mass over its cells (one variance each).
    std::vector<double> var =
        SumByGroup(std::vector<double>(group_of[i].size(), one_stddev * one_stddev), group_of[i]);
    num[i].assign(var.size(), 0.0);
    den[i].assign(var.size(), 0.0);
    AddEvidence(SumByGroup(one_raw[i].p, group_of[i]), var, &num[i], &den[i]);
  }
  // Each 2-way table: its column sums for the child's groups, its row sums
  // for the parent's (rows = the parent's groups, cols = the child's).
  for (const ColumnMarginal& m : pairs_raw) {
    const size_t b = IndexOf(trimmed, m.column), a = IndexOf(trimmed, m.parent);
    if (a >= n || b >= n) continue;
    std::vector<double> row(size_t(m.rows), 0.0), col(size_t(m.cols), 0.0);
    for (int r = 0; r < m.rows; ++r)
      for (int c = 0; c < m.cols; ++c) {
        row[size_t(r)] += m.p[size_t(r) * size_t(m.cols) + size_t(c)];
        col[size_t(c)] += m.p[size_t(r) * size_t(m.cols) + size_t(c)];
      }
    const double var = pair_stddev * pair_stddev;
    AddEvidence(col, std::vector<double>(col.size(), m.rows * var), &num[b], &den[b]);
    AddEvidence(row, std::vector<double>(row.size(), m.cols * var), &num[a], &den[a]);
  }
  std::vector<std::vector<char>> dead(n);
  for (size_t i = 0; i < n; ++i) {
    if (!ordered[i]) continue;
    const std::vector<double> kept = SumByGroup(trimmed[i].p, group_of[i]);
    dead[i].assign(num[i].size(), 0);
    for (size_t g = 0; g < num[i].size(); ++g)
      dead[i][g] = !(kept[g] > 0) && den[i][g] > 0 && !(num[i][g] / den[i][g] > z / std::sqrt(den[i][g]));
  }
  return dead;
}

void DropDeadGroups(const std::vector<std::vector<char>>& dead, const std::vector<ColumnMarginal>& one,
                    std::vector<ColumnMarginal>* pairs) {
  auto is_dead = [&](size_t i, int g) {
    return i < dead.size() && size_t(g) < dead[i].size() && dead[i][size_t(g)];
  };
  for (ColumnMarginal& m : *pairs) {
    const size_t b = IndexOf(one, m.column), a = IndexOf(one, m.parent);
    for (int r = 0; r < m.rows; ++r)
      for (int c = 0; c < m.cols; ++c)
        if (is_dead(a, r) || is_dead(b, c)) m.p[size_t(r) * size_t(m.cols) + size_t(c)] = 0;
  }
}

void ProjectToTotal(std::vector<double>* p) {
  double total = 0;
  for (double v : *p) total += v;
  if (!(total > 0)) {
    for (double& v : *p) v = std::max(0.0, v);
    return;
  }
  // The shift c with sum max(0, p_i - c) = total: the Euclidean projection
  // onto the nonnegative tables of that total.
  std::vector<double> s = *p;
  std::sort(s.begin(), s.end(), std::greater<>());
  double cum = 0, c = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    cum += s[k];
    const double ck = (cum - total) / double(k + 1);
    if (k + 1 == s.size() || s[k + 1] <= ck) {
      c = ck;
      break;
    }
  }
  // c >= 0 whenever total > 0 (c = 0 when no cell is negative); a rounding
  // below 0 would turn every empty cell into a count of about 1e-13.
  c = std::max(0.0, c);
  for (double& v : *p) v = std::max(0.0, v - c);
}

void AddMarginalNoise(std::vector<ColumnMarginal>* cells, double noise_multiplier,
                      SecureGaussian* noise, bool project) {
  const double stddev = noise_multiplier * std::sqrt(double(cells->size()));
  for (ColumnMarginal& m : *cells) {
    std::vector<double> z(m.p.size());
    noise->FillDouble(z.data(), z.size(), stddev);
    for (size_t i = 0; i < m.p.size(); ++i) m.p[i] += z[i];
    if (project) ProjectToTotal(&m.p);
  }
}

void Normalize(std::vector<ColumnMarginal>* cells) {
  for (ColumnMarginal& m : *cells) {
    double sum = 0;
    for (double v : m.p) sum += v;
    for (double& v : m.p) v = sum > 0 ? v / sum : 1.0 / double(m.p.size());
  }
}

double MeasureShares::RoundEpsilon(double sigma_m) const {
  return ds::RoundEpsilon(sigma_m, selection, rounds);
}

MeasureShares SharesFor(int64_t n, double sigma_m, int columns, int per_child) {
  const double pairs = 0.5 * double(columns) * double(columns - 1);
  if (!(sigma_m > 0) || pairs < 1) return MeasureShares{0.2, 0.2};
  const double r = double(n) / (sigma_m * std::sqrt(pairs));
  int most = 0;  // pairs the per-child limit allows
  for (int i = 0; i < columns; ++i) most += std::min(i, per_child);
  // The selection by the exponential mechanism, 2.5 (C - 1) rounds: a spanning
  // tree, then more parents (mpg: 10 pairs 53.9-55.0 at epsilon 10, 25 pairs 61.4-63.2).
  const int rounds = std::clamp(int(std::lround(2.5 * (columns - 1))), 1, std::max(1, most));
  // No pairs when even the coarsest chosen table, 2 x 2 groups of n / 4
  // records a cell, would hold under 3 noise stddevs a cell at the low-signal
  // split (ames at epsilon 1, 74 columns: r = 11.8 but 7.6 stddevs, seeds 1-3
  // 65.3 -> 68.3 with pairs; penguins at epsilon 1, 3.6, keeps them; mpg at
  // epsilon 1, 2.2: 48.3 / 47.6 without, 41.7 / 42.8 with).
  const MeasureShares low{0.45, 0.1, rounds};
  const double coarse_snr = 0.25 * double(n) / (low.TargetNoise(sigma_m) * std::sqrt(double(rounds)));
  if (coarse_snr < 3) return MeasureShares{1, 0};
  if (r < 40) return low;
  return MeasureShares{0.2, 0.2, rounds};
}

std::vector<double> IndependenceScores(const std::vector<ColumnMarginal>& one,
                                       const std::vector<ColumnMarginal>& all, double n,
                                       double one_stddev, double target_stddev,
                                       double noise_weight) {
  // A column's groups (group_of(id index): a pair's row or column) as shares
  // of its released mass, and the stddev of each group's noisy count:
  // one_stddev sqrt(cells), over the cells the release left nonzero (at least one).
  auto grouped = [one_stddev](const ColumnMarginal& m, auto group_of, int groups,
                              std::vector<double>* sd) {
    std::vector<double> g(size_t(groups), 0.0), cells(size_t(groups), 0.0);
    double total = 0;
    for (size_t i = 0; i < m.p.size(); ++i) {
      const size_t at = size_t(group_of(int32_t(i)));
      g[at] += std::max(0.0, m.p[i]);
      cells[at] += m.p[i] > 0 ? 1 : 0;
      total += std::max(0.0, m.p[i]);
    }
    for (double& v : g) v = total > 0 ? v / total : 1.0 / double(groups);
    sd->resize(size_t(groups));
    for (size_t i = 0; i < g.size(); ++i) (*sd)[i] = one_stddev * std::sqrt(std::max(1.0, cells[i]));
    return g;
  };
  const double mean_abs = std::sqrt(2.0 / std::numbers::pi);  // E|z| of z ~ N(0, 1)
  std::vector<double> score;
  size_t k = 0;
  for (size_t b = 1; b < one.size(); ++b)
    for (size_t a = 0; a < b && k < all.size(); ++a, ++k) {
      const ColumnMarginal& m = all[k];
      const PairTable t = m.Shape();  // its groups, explicit or contiguous
      std::vector<double> sa, sb;
      const std::vector<double> pa = grouped(one[a], [&](int32_t i) { return t.Row(t.plo + i); }, m.rows, &sa);
      const std::vector<double> pb = grouped(one[b], [&](int32_t i) { return t.Col(t.lo + i); }, m.cols, &sb);
      double l1 = 0, expected = 0;
      for (int r = 0; r < m.rows; ++r)
        for (int c = 0; c < m.cols; ++c) {
          const size_t i = size_t(r * m.cols + c);
          l1 += std::fabs(m.p[i] - n * pa[size_t(r)] * pb[size_t(c)]);
          // n pa pb's error by the 1-way noise, first order: n (da pb + pa db), da = sd_a / n.
          expected += mean_abs * std::hypot(sa[size_t(r)] * pb[size_t(c)], pa[size_t(r)] * sb[size_t(c)]);
        }
      score.push_back(l1 - expected - noise_weight * mean_abs * target_stddev * double(m.p.size()));
    }
  return score;
}

namespace {

// The number of groups per column: about min_cell_snr noise stddevs of
// records per cell of a G x G table (at most K_max tables share the release).
int ChooseGroups(const std::vector<ColumnMarginal>& one, const MeasureOptions& o,
                 const MeasureShares& shares, double noisy_n) {
  if (!(o.sigma_m > 0)) return o.max_groups;
  double k_max = shares.exponential() ? double(shares.rounds) : 0;
  for (size_t i = 0; i < one.size() && !shares.exponential(); ++i)
    k_max += double(std::min<size_t>(i, size_t(o.pairs)));
  const double stddev = shares.TargetNoise(o.sigma_m) * std::sqrt(std::max(1.0, k_max));
  const double g = std::sqrt(std::max(0.0, noisy_n) / (o.min_cell_snr * stddev));
  return std::clamp(int(std::lround(g)), 2, std::max(2, o.max_groups));
}

}  // namespace

Status MeasureTargets(const FieldTokenizer& tok, const std::vector<std::vector<std::string>>& records,
                      const MeasureOptions& o, SecureGaussian* noise,
                      std::vector<ColumnMarginal>* targets, MeasureReport* rep) {
  const bool dp = o.sigma_m > 0;
  if (dp && !noise) return DS_ERR(kInternal, "calibrate: dp measurement without a noise source");
  std::vector<ColumnMarginal> one = MarginalCells(tok);
  CountMarginals(tok, records, &one, &rep->skipped);
  MeasureShares& sh = rep->shares;
  sh = MeasureShares();
  if (o.pairs > 0 && one.size() >= 2)
    sh = dp ? SharesFor(int64_t(records.size()), o.sigma_m, int(one.size()), o.pairs)
            : MeasureShares{0.2, 0.2};  // (no noise: any split)
  // dp with pairs: the ordered columns' far noise cells dropped (KeepContiguous)
  // for the groups and the shapes inside them; `kept` (projected only) are the
  // targets of the columns without parents.
  std::vector<ColumnMarginal> kept, one_raw;
  double one_stddev = 0;
  if (dp) {
    AddMarginalNoise(&one, sh.OneWayNoise(o.sigma_m), noise, /*project=*/false);
    one_stddev = sh.OneWayNoise(o.sigma_m) * std::sqrt(double(one.size()));
    one_raw = one;
    kept = one;
    for (size_t i = 0; i < one.size(); ++i) {
      ProjectToTotal(&kept[i].p);
      if (sh.pairs() && Ordered(tok, one[i])) KeepContiguous(&one[i].p, Missing(tok, one[i]), one_stddev);
      ProjectToTotal(&one[i].p);
    }
  }
  if (!sh.pairs()) {
    Normalize(&one);
    *targets = std::move(one);
    return Status::Ok();
  }
  std::vector<double> totals;
  for (const ColumnMarginal& m : one) {
    double t = 0;
    for (double v : m.p) t += v;
    totals.push_back(t);
  }
  std::nth_element(totals.begin(), totals.begin() + totals.size() / 2, totals.end());
  rep->noisy_n = totals[totals.size() / 2];
  rep->groups = ChooseGroups(one, o, sh, rep->noisy_n);
  std::vector<std::vector<int32_t>> group_of;
  for (const ColumnMarginal& m : one) group_of.push_back(MassGroups(m.p, rep->groups));
  std::vector<ColumnMarginal> empty = one;  // the cells with zero counts
  for (ColumnMarginal& m : empty) std::fill(m.p.begin(), m.p.end(), 0.0);
  std::vector<ColumnMarginal> all = AllPairs(empty, rep->groups, &group_of);
  CountMarginals(tok, records, &all);
  double stddev = 0;
  std::vector<ColumnMarginal> all_raw;  // before the projection
  std::vector<std::vector<int>> parents;
  if (sh.exponential()) {  // dp only (SharesFor)
    // MST's noise term weighted by the share of the pairs the rounds measure,
    // R / P (docs/privacy.md "Pair scores"): whole where they leave out few
    // of the pairs (which to drop is then the tables' noise), little where
    // they pick few of many (ames: 183 of 2,701, where it sent the rounds to
    // near-constant 2 x G tables).
    const double target_stddev = sh.TargetNoise(o.sigma_m) * std::sqrt(double(sh.rounds));
    const double weight = std::min(1.0, double(sh.rounds) / double(all.size()));
    parents = SelectPairs(IndependenceScores(one, all, rep->noisy_n, one_stddev, target_stddev, weight),
                          int(one.size()), sh.rounds, o.pairs, sh.RoundEpsilon(o.sigma_m), noise);
  } else {
    if (dp) {
      AddMarginalNoise(&all, sh.SelectionNoise(o.sigma_m), noise, /*project=*/false);
      all_raw = all;
      for (ColumnMarginal& m : all) ProjectToTotal(&m.p);
      stddev = sh.SelectionNoise(o.sigma_m) * std::sqrt(double(all.size()));
    }
    parents = ChooseParents(empty, all, stddev, o.pairs);
  }
  std::vector<ColumnMarginal> pairs;
  std::vector<size_t> from;  // pairs[k]'s table in `all` (same groups)
  const std::vector<ColumnMarginal> chosen = WithParents(empty, parents, rep->groups, &group_of);
  for (size_t i = 0, at = 0; i < chosen.size(); ++i) {
    while (at < one.size() && one[at].column != chosen[i].column) ++at;
    if (chosen[i].parent < 0) continue;
    const size_t a = IndexOf(one, chosen[i].parent);
    from.push_back(at * (at - 1) / 2 + a);  // AllPairs is b-major: (0,1), (0,2), (1,2), ...
    pairs.push_back(chosen[i]);
  }
  CountMarginals(tok, records, &pairs);
  std::vector<ColumnMarginal> pairs_raw;  // dp: before the projection
  double pair_stddev = 0;                 // of a cell of pairs_raw
  if (sh.exponential()) {  // the chosen pairs, measured once
    AddMarginalNoise(&pairs, sh.TargetNoise(o.sigma_m), noise, /*project=*/false);
    pairs_raw = pairs;
    pair_stddev = sh.TargetNoise(o.sigma_m) * std::sqrt(double(pairs.size()));
    for (ColumnMarginal& m : pairs) ProjectToTotal(&m.p);
  } else if (dp && !pairs.empty()) {
    // The second measurement of each chosen pair, averaged with its first by
    // inverse variance (both unbiased), then projected.
    AddMarginalNoise(&pairs, sh.TargetNoise(o.sigma_m), noise, /*project=*/false);
    const double v1 = stddev * stddev;
    const double s2 = sh.TargetNoise(o.sigma_m) * std::sqrt(double(pairs.size()));
    const double w1 = (1 / v1) / (1 / v1 + 1 / (s2 * s2));
    for (size_t k = 0; k < pairs.size(); ++k) {
      const ColumnMarginal& first = all_raw[from[k]];
      for (size_t c = 0; c < pairs[k].p.size(); ++c)
        pairs[k].p[c] = w1 * first.p[c] + (1 - w1) * pairs[k].p[c];
    }
    pairs_raw = pairs;
    pair_stddev = 1 / std::sqrt(1 / v1 + 1 / (s2 * s2));
    for (ColumnMarginal& m : pairs) ProjectToTotal(&m.p);
  }
  // dp: the groups the release gives no evidence of leave the tables (below).
  std::vector<std::vector<char>> dead(one.size());
  if (dp) {
    std::vector<char> ordered;
    for (const ColumnMarginal& m : one) ordered.push_back(Ordered(tok, m));
    dead = DeadGroups(one_raw, one, group_of, ordered, one_stddev, pairs_raw, pair_stddev, kDeadGroupZ);
    DropDeadGroups(dead, one, &pairs);
  }
  targets->clear();
  // A column with parents: its 2-way targets, and under dp for an ordered
  // column its 1-way shape inside their groups (the network, trained on few
  // noisy steps, spreads a group's mass over all of its ids: far outside the
  // data with generous bounds).
  for (size_t i = 0; i < one.size(); ++i) {
    if (!parents[i].empty() && !(dp && Ordered(tok, one[i]))) continue;
    targets->push_back(dp && parents[i].empty() ? kept[i] : one[i]);
    if (parents[i].empty()) continue;
    targets->back().within = group_of[i];
    if (dp) FillEmptyGroups(kept[i].p, group_of[i], &targets->back().p, dead[i]);
  }
  for (ColumnMarginal& m : pairs) targets->push_back(std::move(m));
  Normalize(targets);
  return Status::Ok();
}

namespace {

template <typename T>
Status BroadcastVector(std::vector<T>* v) {
  int64_t n = int64_t(v->size());
  DS_RETURN_IF_ERROR(dist::BroadcastValue(&n));
  if (n < 0 || n > (int64_t(1) << 31)) return DS_ERR(kCorrupt, "calibrate: {} cells from rank 0", n);
  v->resize(size_t(n));
  return n == 0 ? Status::Ok() : dist::Broadcast(v->data(), size_t(n) * sizeof(T));
}

}  // namespace

Status ShareTargets(std::vector<ColumnMarginal>* targets) {
  if (!dist::Active() || dist::Size() < 2) return Status::Ok();
  int64_t n = int64_t(targets->size());
  DS_RETURN_IF_ERROR(dist::BroadcastValue(&n));
  if (n < 0 || n > (int64_t(1) << 24)) return DS_ERR(kCorrupt, "calibrate: {} targets from rank 0", n);
  targets->resize(size_t(n));
  for (ColumnMarginal& m : *targets) {
    int32_t g[8] = {m.column, m.lo, m.hi, m.parent, m.plo, m.phi, m.rows, m.cols};
    DS_RETURN_IF_ERROR(dist::Broadcast(g, sizeof g));
    m.column = g[0], m.lo = g[1], m.hi = g[2], m.parent = g[3];
    m.plo = g[4], m.phi = g[5], m.rows = g[6], m.cols = g[7];
    DS_RETURN_IF_ERROR(BroadcastVector(&m.row_of));
    DS_RETURN_IF_ERROR(BroadcastVector(&m.col_of));
    DS_RETURN_IF_ERROR(BroadcastVector(&m.within));
    DS_RETURN_IF_ERROR(BroadcastVector(&m.p));
  }
  return Status::Ok();
}

std::string MeasureReport::Describe(double sigma_m) const {
  if (!shares.pairs())
    return fmt::format("the 1-way histograms at noise multiplier {:.4g}", shares.OneWayNoise(sigma_m));
  if (shares.exponential())
    return fmt::format(
        "three measurements: the 1-way histograms at noise multiplier {:.4g}, {} "
        "exponential-mechanism rounds at epsilon {:.4g} each (choosing the pairs), the chosen "
        "pairs at {:.4g}; {} id groups per column",
        shares.OneWayNoise(sigma_m), shares.rounds, shares.RoundEpsilon(sigma_m),
        shares.TargetNoise(sigma_m), groups);
  return fmt::format(
      "three measurements: the 1-way histograms at noise multiplier {:.4g}, all pair histograms "
      "at {:.4g} (choosing the pairs), the chosen pairs again at {:.4g}; {} id groups per column",
      shares.OneWayNoise(sigma_m), shares.SelectionNoise(sigma_m), shares.TargetNoise(sigma_m),
      groups);
}
}  // namespace ds
