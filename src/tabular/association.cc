#include "tabular/association.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string_view>
#include <unordered_map>

#include "evaluate/metrics.h"
#include "schema/column_type.h"

namespace ds {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

std::vector<ColumnProfile> ProfileColumns(const ColumnRules& rules,
                                          const std::vector<std::vector<std::string>>& rows,
                                          const ProfileOptions& opt) {
  const size_t k = rules.field_count();
  // Evenly spaced sample of the rows.
  std::vector<const std::vector<std::string>*> sample;
  const size_t n = rows.size();
  const size_t m = (opt.max_rows > 0 && n > size_t(opt.max_rows)) ? size_t(opt.max_rows) : n;
  sample.reserve(m);
  for (size_t i = 0; i < m; ++i) {
    const auto& row = rows[m == n ? i : size_t(double(i) * double(n) / double(m))];
    if (row.size() == k) sample.push_back(&row);
  }
  std::vector<ColumnProfile> out(k);
  for (size_t c = 0; c < k; ++c) {
    const ColumnRule& r = rules.columns()[c];
    ColumnProfile& p = out[c];
    if (r.type == ColumnType::kInteger || r.type == ColumnType::kDecimal) {
      p.kind = AssocKind::kNumeric;
      p.num.resize(sample.size());
      for (size_t i = 0; i < sample.size(); ++i) {
        const std::string& v = (*sample[i])[c];
        NumberSyntax num;
        p.num[i] = r.IsMissing(v) || !ScanNumber(v, &num) ? kNaN : num.value;
      }
      continue;
    }
    // Categorical: codes in order of first appearance; missing is a level.
    std::unordered_map<std::string_view, int32_t> ids;
    p.code.resize(sample.size());
    bool too_many = false;
    for (size_t i = 0; i < sample.size() && !too_many; ++i) {
      const std::string& v = (*sample[i])[c];
      std::string_view key = r.IsMissing(v) ? std::string_view() : std::string_view(v);
      auto [it, fresh] = ids.emplace(key, int32_t(ids.size()));
      p.code[i] = it->second;
      if (fresh && r.type == ColumnType::kText &&
          (int(ids.size()) > opt.max_levels || 2 * ids.size() > sample.size()))
        too_many = true;
    }
    if (too_many) {
      p.code.clear();
      continue;
    }
    p.kind = AssocKind::kCategorical;
    p.levels = int32_t(ids.size());
  }
  return out;
}

double AbsPearson(const std::vector<double>& x, const std::vector<double>& y) {
  // The one Pearson correlation of the project (evaluate's; pairwise-complete rows).
  return std::fabs(PearsonCorrelation(x.data(), y.data(), std::min(x.size(), y.size())));
}

double CramersV(const std::vector<int32_t>& a, int32_t la, const std::vector<int32_t>& b,
                int32_t lb) {
  const size_t n = a.size();
  if (n < 3 || la < 2 || lb < 2) return 0;
  std::vector<double> joint(size_t(la) * size_t(lb), 0.0);  // [la, lb] counts
  std::vector<double> ra(size_t(la), 0.0), rb(size_t(lb), 0.0);
  for (size_t i = 0; i < n; ++i) {
    joint[size_t(a[i]) * size_t(lb) + size_t(b[i])] += 1;
    ra[size_t(a[i])] += 1;
    rb[size_t(b[i])] += 1;
  }
  // Levels that never occur (codes come from a larger sample) do not count.
  int r = 0, c = 0;
  for (double v : ra) r += v > 0;
  for (double v : rb) c += v > 0;
  if (r < 2 || c < 2) return 0;
  const double dn = double(n);
  double chi2 = 0;
  for (int32_t i = 0; i < la; ++i) {
    if (ra[size_t(i)] == 0) continue;
    for (int32_t j = 0; j < lb; ++j) {
      if (rb[size_t(j)] == 0) continue;
      const double e = ra[size_t(i)] * rb[size_t(j)] / dn;
      const double d = joint[size_t(i) * size_t(lb) + size_t(j)] - e;
      chi2 += d * d / e;
    }
  }
  const double phi2 = chi2 / dn;
  const double phi2c = std::max(0.0, phi2 - double(r - 1) * double(c - 1) / (dn - 1));
  const double rc = double(r) - double(r - 1) * double(r - 1) / (dn - 1);
  const double cc = double(c) - double(c - 1) * double(c - 1) / (dn - 1);
  const double den = std::min(rc - 1, cc - 1);
  if (den <= 0) return 0;
  return std::min(1.0, std::sqrt(phi2c / den));
}

double CorrelationRatio(const std::vector<int32_t>& g, int32_t levels,
                        const std::vector<double>& x) {
  // The one correlation ratio of the project (evaluate's); grouping wants at
  // least 3 complete rows.
  const size_t n = std::min(g.size(), x.size());
  if (std::count_if(x.begin(), x.begin() + long(n), [](double v) { return !std::isnan(v); }) < 3)
    return 0;
  return ds::CorrelationRatio(g.data(), std::max(levels, 1), x.data(), n);
}

double Association(const ColumnProfile& a, const ColumnProfile& b) {
  using K = AssocKind;
  if (a.kind == K::kNone || b.kind == K::kNone) return 0;
  if (a.kind == K::kNumeric && b.kind == K::kNumeric) return AbsPearson(a.num, b.num);
  if (a.kind == K::kCategorical && b.kind == K::kCategorical)
    return CramersV(a.code, a.levels, b.code, b.levels);
  if (a.kind == K::kCategorical) return CorrelationRatio(a.code, a.levels, b.num);
  return CorrelationRatio(b.code, b.levels, a.num);
}

std::vector<double> AssociationMatrix(const std::vector<ColumnProfile>& p) {
  const size_t k = p.size();
  std::vector<double> m(k * k, 0.0);  // [k, k]
  for (size_t i = 0; i < k; ++i) {
    m[i * k + i] = 1;
    for (size_t j = i + 1; j < k; ++j) m[i * k + j] = m[j * k + i] = Association(p[i], p[j]);
  }
  return m;
}

}  // namespace ds
