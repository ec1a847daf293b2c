#include "tokenize/field_relations.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "schema/column_type.h"

namespace ds {
namespace {

using i128 = __int128;

i128 Pow10(int n) {
  i128 p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

int64_t Saturate(i128 v) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  return v > kMax ? kMax : (v < kMin ? kMin : int64_t(v));
}

// floor(a / b) for b > 0.
i128 FloorDiv(i128 a, i128 b) { return a / b - ((a % b != 0) && (a < 0) ? 1 : 0); }

// P(A' > B') for A', B' drawn independently from the sorted samples a and b.
double ProbGreater(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.empty() || b.empty()) return 0;
  double pairs = 0;
  size_t j = 0;  // b[0, j) < a[i]
  for (double x : a) {
    while (j < b.size() && b[j] < x) ++j;
    pairs += double(j);
  }
  return pairs / (double(a.size()) * double(b.size()));
}

uint64_t SplitMix(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

int CompareScaled(int64_t a, int da, int64_t b, int db) {
  const int d = std::max(da, db);
  const i128 x = i128(a) * Pow10(d - da), y = i128(b) * Pow10(d - db);
  return x < y ? -1 : (x > y ? 1 : 0);
}

int64_t CeilRescale(int64_t a, int da, int d) {
  if (d >= da) return Saturate(i128(a) * Pow10(d - da));
  return Saturate(-FloorDiv(-i128(a), Pow10(da - d)));
}

int64_t FloorRescale(int64_t a, int da, int d) {
  if (d >= da) return Saturate(i128(a) * Pow10(d - da));
  return Saturate(FloorDiv(i128(a), Pow10(da - d)));
}

int64_t DateKey(const DateTime& d) {
  return ((((int64_t(d.year) * 13 + d.month) * 32 + d.day) * 25 + d.hour) * 61 + d.minute) * 61 +
         d.second;
}

DateTime DateFromKey(int64_t k) {
  DateTime d;
  d.second = int(k % 61);
  k /= 61;
  d.minute = int(k % 61);
  k /= 61;
  d.hour = int(k % 25);
  k /= 25;
  d.day = int(k % 32);
  k /= 32;
  d.month = int(k % 13);
  d.year = int(k / 13);
  return d;
}

RelationLearner::RelationLearner(std::vector<int> columns, std::vector<int> decimals,
                                 RelationOptions opts, std::vector<int> group)
    : columns_(std::move(columns)), decimals_(std::move(decimals)), opts_(opts) {
  const int k = int(columns_.size());
  for (int i = 0; i < k; ++i)
    for (int j = 0; j < k; ++j)
      if (i != j && (group.empty() || group[size_t(i)] == group[size_t(j)]))
        alive_.push_back({i, j});
  sample_.resize(size_t(k));
  seen_.assign(size_t(k), 0);
}

void RelationLearner::AddRow(const int64_t* v) {
  size_t kept = 0;
  for (size_t p = 0; p < alive_.size(); ++p) {
    Pair& q = alive_[p];
    const int64_t a = v[q.i], b = v[q.j];
    if (a != kMissing && b != kMissing) {
      if (CompareScaled(a, decimals_[size_t(q.i)], b, decimals_[size_t(q.j)]) > 0) continue;
      ++q.both;
    }
    alive_[kept++] = q;
  }
  alive_.resize(kept);
  for (size_t k = 0; k < columns_.size(); ++k) {
    if (v[k] == kMissing) continue;
    double x = double(v[k]);
    for (int d = 0; d < decimals_[k]; ++d) x /= 10;
    const int64_t n = seen_[k]++;
    if (sample_[k].size() < opts_.sample) {
      sample_[k].push_back(x);
    } else if (uint64_t r = SplitMix(&rng_) % uint64_t(n + 1); r < opts_.sample) {
      sample_[k][size_t(r)] = x;
    }
  }
}

std::vector<FieldRelation> RelationLearner::Finish() const {
  std::vector<std::vector<double>> sorted = sample_;
  for (auto& v : sorted) std::sort(v.begin(), v.end());
  std::vector<FieldRelation> out;
  for (const Pair& q : alive_) {
    if (q.both < opts_.min_rows) continue;
    const double p = ProbGreater(sorted[size_t(q.i)], sorted[size_t(q.j)]);
    // p == 0: the ranges alone keep lo <= hi (no value of lo exceeds one of hi).
    if (p <= 0 || double(q.both) * p < opts_.min_expected_violations) continue;
    out.push_back({columns_[size_t(q.i)], columns_[size_t(q.j)]});
  }
  std::sort(out.begin(), out.end(), [](const FieldRelation& a, const FieldRelation& b) {
    return a.lo != b.lo ? a.lo < b.lo : a.hi < b.hi;
  });
  if (out.size() > opts_.max_relations) out.resize(opts_.max_relations);
  return out;
}

}  // namespace ds
