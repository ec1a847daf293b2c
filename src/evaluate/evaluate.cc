#include "evaluate/evaluate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "evaluate/metrics.h"
#include "evaluate/privacy.h"
#include "util/rng.h"

namespace ds {

std::string GradeOf(double score) {
  if (score >= 80) return "Excellent";
  if (score >= 60) return "Good";
  if (score >= 40) return "Moderate";
  if (score >= 20) return "Poor";
  return "Very poor";
}

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string FormatNumber(double v) { return fmt::format("{:.4g}", v); }

size_t Utf8Length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// How one evaluated column is binned and encoded; built from the real column.
// Policy: see evaluate.h (bins) and privacy.h (distance encoding).
struct ColumnModel {
  std::string name;
  ColumnKind type = ColumnKind::kCategorical;
  // Numeric values (numeric columns) or character lengths (text columns):
  std::vector<double> edges;            // [bins - 1] inner bin edges, ascending
  std::vector<std::string> bin_labels;  // [bins]
  double mean = 0, sd = 1, min = 0, range = 1;
  // Value dictionary (categorical and text columns): real values first, by
  // descending real frequency (ties by value), then values first seen in other
  // tables. "" (missing) is an ordinary entry.
  std::unordered_map<std::string, int32_t> dict;
  std::vector<std::string> dict_values;
  std::vector<double> real_share;  // [real categories] share of real rows
  int32_t real_categories = 0;
  size_t distinct_real = 0;

  int32_t Code(const std::string& v) {
    auto [it, inserted] = dict.emplace(v, int32_t(dict_values.size()));
    if (inserted) dict_values.push_back(v);
    return it->second;
  }
  size_t NumValueBins() const { return edges.size() + 1; }
  size_t Bin(double x) const {
    return size_t(std::upper_bound(edges.begin(), edges.end(), x) - edges.begin());
  }
};

// Row states of numeric columns.
enum : uint8_t { kOk = 0, kMissing = 1, kInvalid = 2 };

// One table's evaluated columns, encoded against the models.
struct EncodedTable {
  size_t rows = 0;
  std::vector<std::vector<double>> num;     // [cols][rows] value (numeric) / length (text); NaN
  std::vector<std::vector<uint8_t>> state;  // [cols][rows] kOk / kMissing / kInvalid (numeric)
  std::vector<std::vector<int32_t>> code;   // [cols][rows] dictionary code (categorical, text)
  std::vector<size_t> missing, invalid;     // [cols]
};

// Inner bin edges for the values `sorted` (ascending, no NaN): one bin per
// distinct value when there are at most `bins` of them (edges at midpoints),
// else quantile edges (deduplicated).
void MakeBins(const std::vector<double>& sorted, int bins, ColumnModel* m) {
  m->edges.clear();
  m->bin_labels.clear();
  std::vector<double> distinct;
  for (double v : sorted)
    if (distinct.empty() || v != distinct.back()) {
      distinct.push_back(v);
      if (distinct.size() > size_t(bins)) break;
    }
  if (distinct.empty()) {
    m->bin_labels.push_back("all");
    return;
  }
  if (distinct.size() <= size_t(bins)) {
    for (size_t i = 0; i + 1 < distinct.size(); ++i)
      m->edges.push_back(0.5 * (distinct[i] + distinct[i + 1]));
    for (double v : distinct) m->bin_labels.push_back(FormatNumber(v));
    return;
  }
  const size_t n = sorted.size();
  for (int k = 1; k < bins; ++k) {
    double e = sorted[std::min(n - 1, size_t(double(k) * double(n) / double(bins)))];
    if (e > sorted.front() && (m->edges.empty() || e > m->edges.back())) m->edges.push_back(e);
  }
  if (m->edges.empty()) {
    m->bin_labels.push_back("all");
    return;
  }
  m->bin_labels.push_back("< " + FormatNumber(m->edges.front()));
  for (size_t i = 0; i + 1 < m->edges.size(); ++i)
    m->bin_labels.push_back("[" + FormatNumber(m->edges[i]) + ", " + FormatNumber(m->edges[i + 1]) +
                            ")");
  m->bin_labels.push_back(">= " + FormatNumber(m->edges.back()));
}

ColumnModel BuildModel(const Column& col, const EvalOptions& opt) {
  ColumnModel m;
  m.name = col.name;
  m.type = col.type;
  if (col.type == ColumnKind::kCategorical || col.type == ColumnKind::kText) {
    std::unordered_map<std::string_view, size_t> counts;
    for (const std::string& v : col.values) ++counts[v];
    std::vector<std::pair<std::string_view, size_t>> order(counts.begin(), counts.end());
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    for (const auto& [v, c] : order) {
      m.Code(std::string(v));
      m.real_share.push_back(double(c) / double(std::max<size_t>(1, col.values.size())));
    }
    m.real_categories = int32_t(m.dict_values.size());
    m.distinct_real = counts.size() - (counts.count("") ? 1 : 0);
  }
  if (col.type == ColumnKind::kNumeric || col.type == ColumnKind::kText) {
    std::vector<double> v;
    v.reserve(col.values.size());
    for (const std::string& s : col.values) {
      if (s.empty()) continue;
      double x;
      if (col.type == ColumnKind::kText)
        v.push_back(double(Utf8Length(s)));
      else if (ParseNumber(s, &x))
        v.push_back(x);
    }
    std::sort(v.begin(), v.end());
    MakeBins(v, opt.num_bins, &m);
    if (!v.empty()) {
      double sum = 0, sq = 0;
      for (double x : v) sum += x;
      m.mean = sum / double(v.size());
      for (double x : v) sq += (x - m.mean) * (x - m.mean);
      m.sd = v.size() > 1 ? std::sqrt(sq / double(v.size() - 1)) : 0.0;
      if (!(m.sd > 0)) m.sd = 1;
      m.min = v.front();
      m.range = v.back() - v.front();
      if (!(m.range > 0)) m.range = 1;
    }
    if (col.type == ColumnKind::kNumeric)
      m.distinct_real = size_t(std::unique(v.begin(), v.end()) - v.begin());
  }
  return m;
}

// Encodes table columns `cols` ([evaluated columns] -> column index in t).
EncodedTable Encode(const Table& t, const std::vector<int>& cols,
                    std::vector<ColumnModel>* models) {
  EncodedTable e;
  e.rows = t.num_rows();
  const size_t k = cols.size();
  e.num.resize(k);
  e.state.resize(k);
  e.code.resize(k);
  e.missing.assign(k, 0);
  e.invalid.assign(k, 0);
  for (size_t c = 0; c < k; ++c) {
    ColumnModel& m = (*models)[c];
    const std::vector<std::string>& vals = t.columns[size_t(cols[c])].values;
    if (m.type == ColumnKind::kNumeric) {
      e.num[c].resize(e.rows);
      e.state[c].resize(e.rows);
      for (size_t r = 0; r < e.rows; ++r) {
        double x;
        if (vals[r].empty()) {
          e.num[c][r] = kNaN;
          e.state[c][r] = kMissing;
          ++e.missing[c];
        } else if (ParseNumber(vals[r], &x)) {
          e.num[c][r] = x;
          e.state[c][r] = kOk;
        } else {
          e.num[c][r] = kNaN;
          e.state[c][r] = kInvalid;
          ++e.invalid[c];
        }
      }
    } else {
      e.code[c].resize(e.rows);
      for (size_t r = 0; r < e.rows; ++r) {
        e.code[c][r] = m.Code(vals[r]);
        if (vals[r].empty()) ++e.missing[c];
      }
      if (m.type == ColumnKind::kText) {
        e.num[c].resize(e.rows);
        for (size_t r = 0; r < e.rows; ++r)
          e.num[c][r] = vals[r].empty() ? kNaN : double(Utf8Length(vals[r]));
      }
    }
  }
  return e;
}

// Histogram counts of column c: value bins, then missing, then invalid
// (numeric / text), or one bin per dictionary code (categorical).
std::vector<double> Histogram(const ColumnModel& m, const EncodedTable& e, size_t c) {
  if (m.type == ColumnKind::kCategorical) {
    std::vector<double> h(m.dict_values.size(), 0.0);
    for (int32_t v : e.code[c]) h[size_t(v)] += 1;
    return h;
  }
  const size_t nb = m.NumValueBins();
  std::vector<double> h(nb + 2, 0.0);
  for (size_t r = 0; r < e.rows; ++r) {
    double x = e.num[c][r];
    if (std::isnan(x)) {
      bool invalid = m.type == ColumnKind::kNumeric && e.state[c][r] == kInvalid;
      h[nb + (invalid ? 1 : 0)] += 1;
    } else {
      h[m.Bin(x)] += 1;
    }
  }
  return h;
}

// Codes of a categorical column for the association matrices: the `cap` most
// frequent real values keep their code, the rest share code `cap`.
std::vector<int32_t> CappedCodes(const std::vector<int32_t>& codes, int32_t cap) {
  std::vector<int32_t> out(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) out[i] = std::min(codes[i], cap);
  return out;
}

struct MatrixInput {
  std::vector<size_t> cols;     // [k] evaluated column index
  std::vector<bool> numeric;    // [k]
  std::vector<int32_t> ncodes;  // [k] code count (categorical)
};

// The mixed association matrix [k, k] of one encoded table.
std::vector<double> AssociationMatrix(const MatrixInput& in, const EncodedTable& e) {
  const size_t k = in.cols.size();
  std::vector<std::vector<int32_t>> codes(k);  // [k][rows]
  for (size_t i = 0; i < k; ++i)
    if (!in.numeric[i]) codes[i] = CappedCodes(e.code[in.cols[i]], in.ncodes[i] - 1);
  std::vector<double> mat(k * k, 1.0);
  for (size_t i = 0; i < k; ++i)
    for (size_t j = 0; j < k; ++j) {
      if (i == j) continue;
      if (in.numeric[i] && in.numeric[j]) {
        if (j < i) {
          mat[i * k + j] = mat[j * k + i];
          continue;
        }
        mat[i * k + j] =
            PearsonCorrelation(e.num[in.cols[i]].data(), e.num[in.cols[j]].data(), e.rows);
      } else if (!in.numeric[i] && !in.numeric[j]) {
        mat[i * k + j] =
            TheilsU(codes[i].data(), in.ncodes[i], codes[j].data(), in.ncodes[j], e.rows);
      } else {
        if (j < i) {
          mat[i * k + j] = mat[j * k + i];
          continue;
        }
        size_t c = in.numeric[i] ? j : i, y = in.numeric[i] ? i : j;
        mat[i * k + j] =
            CorrelationRatio(codes[c].data(), in.ncodes[c], e.num[in.cols[y]].data(), e.rows);
      }
    }
  return mat;
}

// PCA features: the numeric columns first, then one indicator per (column,
// code) for the most frequent real values of each categorical column; each
// feature is standardised with the real mean and standard deviation
// (x - mean) / sd, missing numbers as the mean (0).
struct PcaFeatures {
  std::vector<size_t> num_cols;                     // numeric evaluated columns
  std::vector<std::pair<size_t, int32_t>> onehots;  // (column, code)
  std::vector<double> mean, sd;                     // [d] from the real rows
  size_t dim() const { return num_cols.size() + onehots.size(); }
};

// The feature matrix [rows, d] (row-major) of an encoded table.
std::vector<double> BuildFeatures(const PcaFeatures& f, const EncodedTable& e,
                                  const std::vector<ColumnModel>& models) {
  const size_t d = f.dim();
  std::vector<double> x(e.rows * d);  // [rows, d]
  for (size_t r = 0; r < e.rows; ++r) {
    double* row = &x[r * d];
    for (size_t i = 0; i < f.num_cols.size(); ++i) {
      const ColumnModel& m = models[f.num_cols[i]];
      double v = e.num[f.num_cols[i]][r];
      row[i] = std::isnan(v) ? 0.0 : (v - m.mean) / m.sd;
    }
    for (size_t i = 0; i < f.onehots.size(); ++i) {
      size_t j = f.num_cols.size() + i;
      double ind = e.code[f.onehots[i].first][r] == f.onehots[i].second ? 1.0 : 0.0;
      row[j] = (ind - f.mean[j]) / f.sd[j];
    }
  }
  return x;
}

// Distances of two samples of a scalar, quantile-binned on the first.
double ScalarJs(std::vector<double> a, const std::vector<double>& b, int bins) {
  std::sort(a.begin(), a.end());
  ColumnModel m;
  MakeBins(a, bins, &m);
  std::vector<double> ha(m.NumValueBins(), 0.0), hb(m.NumValueBins(), 0.0);
  for (double v : a) ha[m.Bin(v)] += 1;
  for (double v : b) hb[m.Bin(v)] += 1;
  return JensenShannonDistance(ha, hb);
}

struct QualityDetail {
  QualitySummary summary;
  std::vector<ColumnScore> columns;
  std::vector<double> corr_real, corr_other;
  std::vector<PairScore> pairs;
  PcaResult pca;
};

void FinishSummary(QualitySummary* s) {
  double sum = 0;
  int n = 0;
  for (const SectionScore* sec : {&s->distribution, &s->correlation, &s->deep_structure})
    if (sec->available) sum += sec->score, ++n;
  s->overall = n ? sum / n : 0.0;
  s->grade = GradeOf(s->overall);
}

std::vector<size_t> SampleRows(size_t n, size_t k, uint64_t seed, uint64_t stream) {
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), size_t(0));
  if (k >= n) return idx;
  Philox rng(seed, stream);
  for (size_t i = 0; i < k; ++i) std::swap(idx[i], idx[i + rng.Below(n - i)]);
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

class Evaluator {
 public:
  Evaluator(std::vector<ColumnModel> models, const EvalOptions& opt)
      : models_(std::move(models)), opt_(opt) {}
  std::vector<ColumnModel>& models() { return models_; }

  // Matrix and PCA set-up from the real table.
  void Prepare(const EncodedTable& real) {
    for (size_t c = 0; c < models_.size(); ++c) {
      const ColumnModel& m = models_[c];
      if (m.type == ColumnKind::kText) continue;
      matrix_.cols.push_back(c);
      matrix_.numeric.push_back(m.type == ColumnKind::kNumeric);
      int32_t cap = std::min<int32_t>(m.real_categories, opt_.corr_max_categories);
      matrix_.ncodes.push_back(m.type == ColumnKind::kNumeric ? 0 : cap + 1);
      if (m.type == ColumnKind::kNumeric) {
        pca_.num_cols.push_back(c);
      } else {
        for (int32_t code = 0; code < std::min<int32_t>(m.real_categories, opt_.pca_max_onehot);
             ++code) {
          double p = m.real_share[size_t(code)];
          if (p <= 0 || p >= 1) continue;  // constant indicator: no variance
          pca_.onehots.push_back({c, code});
        }
      }
    }
    for (size_t c : pca_.num_cols) {
      pca_.mean.push_back(models_[c].mean);
      pca_.sd.push_back(models_[c].sd);
    }
    for (const auto& [c, code] : pca_.onehots) {
      double p = models_[c].real_share[size_t(code)];
      pca_.mean.push_back(p);
      pca_.sd.push_back(std::sqrt(p * (1 - p)));
    }
    corr_real_ = AssociationMatrix(matrix_, real);
    real_hist_.resize(models_.size());
    for (size_t c = 0; c < models_.size(); ++c) real_hist_[c] = Histogram(models_[c], real, c);
    if (pca_.dim() > 0 && real.rows >= 2) {
      std::vector<double> x = BuildFeatures(pca_, real, models_);
      fit_ = FitPca2(x, real.rows, pca_.dim());
      real_proj_ = Project(x, real.rows);
    }
  }

  const MatrixInput& matrix() const { return matrix_; }

  QualityDetail Score(const EncodedTable& real, const EncodedTable& other, bool details) {
    QualityDetail q;
    // Field distributions.
    double dsum = 0;
    for (size_t c = 0; c < models_.size(); ++c) {
      const ColumnModel& m = models_[c];
      std::vector<double> hr = real_hist_[c], ho = Histogram(m, other, c);
      hr.resize(std::max(hr.size(), ho.size()), 0.0);  // codes new in `other`
      ho.resize(hr.size(), 0.0);
      ColumnScore cs;
      cs.name = m.name;
      cs.type = m.type;
      cs.js_distance = JensenShannonDistance(hr, ho);
      cs.score = 100 * (1 - cs.js_distance);
      dsum += cs.js_distance;
      if (details) Describe(c, real, other, hr, ho, &cs);
      q.columns.push_back(std::move(cs));
    }
    if (!models_.empty()) {
      q.summary.distribution = {true, dsum / double(models_.size()),
                                100 * (1 - dsum / double(models_.size()))};
    }
    // Field correlations.
    const size_t k = matrix_.cols.size();
    if (k >= 2) {
      std::vector<double> co = AssociationMatrix(matrix_, other);
      double diff = 0;
      for (size_t i = 0; i < k; ++i)
        for (size_t j = 0; j < k; ++j)
          if (i != j) diff += std::fabs(corr_real_[i * k + j] - co[i * k + j]);
      diff /= double(k * (k - 1));
      q.summary.correlation = {true, diff, 100 * std::max(0.0, 1 - diff / opt_.corr_full_scale)};
      if (details) {
        for (size_t i = 0; i < k; ++i)
          for (size_t j = i + 1; j < k; ++j) {
            PairScore p;
            p.a = models_[matrix_.cols[i]].name;
            p.b = models_[matrix_.cols[j]].name;
            p.kind = matrix_.numeric[i] && matrix_.numeric[j]     ? "pearson"
                     : !matrix_.numeric[i] && !matrix_.numeric[j] ? "theils_u"
                                                                  : "correlation_ratio";
            p.real = 0.5 * (corr_real_[i * k + j] + corr_real_[j * k + i]);
            p.synthetic = 0.5 * (co[i * k + j] + co[j * k + i]);
            p.abs_diff = 0.5 * (std::fabs(corr_real_[i * k + j] - co[i * k + j]) +
                                std::fabs(corr_real_[j * k + i] - co[j * k + i]));
            q.pairs.push_back(p);
          }
        q.corr_real = corr_real_;
        q.corr_other = std::move(co);
      }
    }
    if (details && k < 2) q.corr_real = q.corr_other = std::vector<double>(k * k, 1.0);
    // Deep structure.
    if (pca_.dim() > 0 && real.rows >= 2 && other.rows >= 1) {
      std::vector<double> x = BuildFeatures(pca_, other, models_);
      std::vector<std::vector<double>> proj = Project(x, other.rows);  // [2][rows]
      q.pca.features = pca_.dim();
      double dist = 0;
      const int comps = pca_.dim() >= 2 ? 2 : 1;
      for (int c = 0; c < comps; ++c) {
        q.pca.js_distance[c] = ScalarJs(real_proj_[size_t(c)], proj[size_t(c)], opt_.num_bins);
        dist += q.pca.js_distance[c];
        q.pca.explained_variance_ratio[c] =
            fit_.total_variance > 0 ? fit_.eigenvalues[c] / fit_.total_variance : 0.0;
      }
      dist /= comps;
      q.summary.deep_structure = {true, dist, 100 * (1 - dist)};
      if (details) {
        auto sample = [&](const std::vector<std::vector<double>>& p0, size_t rows, uint64_t stream,
                          std::vector<float>* out) {
          for (size_t r : SampleRows(rows, opt_.plot_points, opt_.seed, stream)) {
            out->push_back(float(p0[0][r]));
            out->push_back(float(p0.size() > 1 ? p0[1][r] : 0.0));
          }
        };
        sample(real_proj_, real.rows, 11, &q.pca.real_points);
        sample(proj, other.rows, 12, &q.pca.synthetic_points);
      }
    }
    FinishSummary(&q.summary);
    return q;
  }

 private:
  // Projections [2][rows] of the feature rows x: [rows, d].
  std::vector<std::vector<double>> Project(const std::vector<double>& x, size_t rows) const {
    std::vector<std::vector<double>> p(2, std::vector<double>(rows));
    const size_t d = fit_.dim;
    for (size_t r = 0; r < rows; ++r) {
      double out[2];
      fit_.Project(&x[r * d], out);
      p[0][r] = out[0];
      p[1][r] = out[1];
    }
    return p;
  }

  void Describe(size_t c, const EncodedTable& real, const EncodedTable& other,
                const std::vector<double>& hr, const std::vector<double>& ho, ColumnScore* cs) {
    const ColumnModel& m = models_[c];
    cs->missing_real = real.missing[c];
    cs->missing_synthetic = other.missing[c];
    cs->invalid_synthetic = other.invalid[c];
    cs->distinct_real = m.distinct_real;
    const double nr = std::max<double>(1, double(real.rows)),
                 no = std::max<double>(1, double(other.rows));
    if (m.type == ColumnKind::kNumeric) {
      cs->ks_complement = KSComplement(real.num[c], other.num[c]);
      if (std::isnan(cs->ks_complement)) cs->ks_complement = -1;
      std::vector<double> v;
      for (size_t r = 0; r < other.rows; ++r)
        if (!std::isnan(other.num[c][r])) v.push_back(other.num[c][r]);
      std::sort(v.begin(), v.end());
      cs->distinct_synthetic = size_t(std::unique(v.begin(), v.end()) - v.begin());
    } else {
      std::vector<int32_t> a = real.code[c], b = other.code[c];
      int32_t missing_code = m.dict.count("") ? m.dict.at("") : -2;
      for (int32_t& v : a)
        if (v == missing_code) v = -1;
      std::unordered_set<int32_t> seen;
      for (int32_t& v : b) {
        if (v == missing_code) {
          v = -1;
          continue;
        }
        seen.insert(v);
        if (v >= m.real_categories) ++cs->unseen_synthetic;
      }
      cs->distinct_synthetic = seen.size();
      if (m.type == ColumnKind::kCategorical) {
        cs->tv_complement = TVComplement(a, b);
        if (std::isnan(cs->tv_complement)) cs->tv_complement = -1;
      }
    }
    // Plot bins.
    if (m.type == ColumnKind::kCategorical) {
      std::vector<size_t> order(hr.size());
      std::iota(order.begin(), order.end(), size_t(0));
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return hr[a] / nr + ho[a] / no > hr[b] / nr + ho[b] / no;
      });
      size_t shown = std::min(order.size(), size_t(std::max(1, opt_.plot_max_bins)));
      if (order.size() == shown + 1) shown = order.size();  // no pool of one
      HistogramBin pooled;
      pooled.label = fmt::format("other ({} values)", order.size() - shown);
      for (size_t i = 0; i < order.size(); ++i) {
        size_t b = order[i];
        if (i < shown) {
          const std::string& v = m.dict_values[b];
          cs->bins.push_back({v.empty() ? "(missing)" : v, hr[b] / nr, ho[b] / no});
        } else {
          pooled.real += hr[b] / nr;
          pooled.synthetic += ho[b] / no;
        }
      }
      if (shown < order.size()) cs->bins.push_back(pooled);
    } else {
      const size_t nb = m.NumValueBins();
      for (size_t b = 0; b < nb; ++b)
        cs->bins.push_back({(m.type == ColumnKind::kText ? "len " : "") + m.bin_labels[b],
                            hr[b] / nr, ho[b] / no});
      if (hr[nb] + ho[nb] > 0) cs->bins.push_back({"(missing)", hr[nb] / nr, ho[nb] / no});
      if (hr[nb + 1] + ho[nb + 1] > 0)
        cs->bins.push_back({"(invalid)", hr[nb + 1] / nr, ho[nb + 1] / no});
    }
  }

  std::vector<ColumnModel> models_;
  EvalOptions opt_;
  MatrixInput matrix_;
  PcaFeatures pca_;
  Pca2 fit_;
  std::vector<double> corr_real_;
  std::vector<std::vector<double>> real_hist_;
  std::vector<std::vector<double>> real_proj_;  // [2][real rows]
};

// Distance encoding (privacy.h) of an encoded table.
EncodedRecords ToRecords(const EncodedTable& e, const std::vector<ColumnModel>& models) {
  EncodedRecords r;
  r.rows = e.rows;
  for (size_t c = 0; c < models.size(); ++c) {
    const ColumnModel& m = models[c];
    if (m.type == ColumnKind::kNumeric) {
      std::vector<float> v(e.rows);
      for (size_t i = 0; i < e.rows; ++i) {
        double x = e.num[c][i];
        v[i] =
            std::isnan(x) ? kMissingScaled : float(std::clamp((x - m.min) / m.range, -1e20, 1e20));
      }
      r.num.push_back(std::move(v));
    } else {
      r.cat.push_back(e.code[c]);
    }
  }
  return r;
}

// Row keys for exact-copy detection: numbers by value (so "1.0" equals "1"),
// other values by dictionary code.
std::vector<std::string> RowKeys(const EncodedTable& e, const std::vector<ColumnModel>& models) {
  std::vector<std::string> keys(e.rows);
  for (size_t r = 0; r < e.rows; ++r) {
    std::string& k = keys[r];
    k.reserve(models.size() * 8);
    for (size_t c = 0; c < models.size(); ++c) {
      uint64_t bits;
      if (models[c].type == ColumnKind::kNumeric) {
        double x = e.num[c][r];
        if (std::isnan(x)) {
          bits = 0x7FF8DEAD00000000ull | e.state[c][r];
        } else {
          if (x == 0) x = 0;  // -0 == 0
          std::memcpy(&bits, &x, 8);
        }
      } else {
        bits = uint64_t(uint32_t(e.code[c][r]));
      }
      k.append(reinterpret_cast<const char*>(&bits), 8);
    }
  }
  return keys;
}

float Quantile(const std::vector<float>& sorted, double q) {
  if (sorted.empty()) return 0;
  double pos = q * double(sorted.size() - 1);
  size_t lo = size_t(pos);
  size_t hi = std::min(sorted.size() - 1, lo + 1);
  return float(sorted[lo] + (pos - double(lo)) * (sorted[hi] - sorted[lo]));
}

void RunPrivacy(const EncodedTable& real, const EncodedTable& synth, const EncodedTable* holdout,
                const std::vector<ColumnModel>& models, const EvalOptions& opt, PrivacyResult* p) {
  p->available = true;
  // Exact copies.
  std::vector<std::string> train_keys = RowKeys(real, models);
  std::unordered_set<std::string> train(train_keys.begin(), train_keys.end());
  std::unordered_set<std::string> seen;
  for (const std::string& k : RowKeys(synth, models)) {
    if (train.count(k)) ++p->exact_copies;
    if (!seen.insert(k).second) ++p->synthetic_duplicates;
  }
  p->exact_copy_share = synth.rows ? double(p->exact_copies) / double(synth.rows) : 0.0;
  if (holdout) {
    p->has_holdout = true;
    for (const std::string& k : RowKeys(*holdout, models))
      if (train.count(k)) ++p->holdout_exact_copies;
    p->holdout_exact_copy_share =
        holdout->rows ? double(p->holdout_exact_copies) / double(holdout->rows) : 0.0;
  }
  // Distance to the closest training record.
  EncodedRecords train_rec = ToRecords(real, models), synth_rec = ToRecords(synth, models);
  std::vector<size_t> sq = SampleRows(synth.rows, opt.privacy_sample_rows, opt.seed, 21);
  p->dcr_synthetic = NearestDistances(train_rec, synth_rec, sq, opt.threads);
  std::sort(p->dcr_synthetic.begin(), p->dcr_synthetic.end());
  p->dcr_sample_synthetic = sq.size();
  p->dcr_synthetic_median = Quantile(p->dcr_synthetic, 0.5);
  p->dcr_synthetic_p05 = Quantile(p->dcr_synthetic, 0.05);
  if (holdout) {
    EncodedRecords hold_rec = ToRecords(*holdout, models);
    std::vector<size_t> hq = SampleRows(holdout->rows, opt.privacy_sample_rows, opt.seed, 22);
    p->dcr_holdout = NearestDistances(train_rec, hold_rec, hq, opt.threads);
    std::sort(p->dcr_holdout.begin(), p->dcr_holdout.end());
    p->dcr_sample_holdout = hq.size();
    p->dcr_holdout_median = Quantile(p->dcr_holdout, 0.5);
    p->dcr_holdout_p05 = Quantile(p->dcr_holdout, 0.05);
    size_t closer = 0;
    for (float d : p->dcr_synthetic) closer += d < p->dcr_holdout_p05;
    p->share_closer_than_holdout_p05 =
        p->dcr_synthetic.empty() ? 0.0 : double(closer) / double(p->dcr_synthetic.size());
    // Membership inference: members = training rows, non-members = holdout rows,
    // score = -(distance to the nearest synthetic row).
    size_t m = std::min({opt.privacy_sample_rows, holdout->rows, real.rows});
    if (m > 0) {
      std::vector<size_t> members = SampleRows(real.rows, m, opt.seed, 23);
      std::vector<size_t> non_members = SampleRows(holdout->rows, m, opt.seed, 24);
      std::vector<float> dm = NearestDistances(synth_rec, train_rec, members, opt.threads);
      std::vector<float> dn = NearestDistances(synth_rec, hold_rec, non_members, opt.threads);
      for (float& d : dm) d = -d;
      for (float& d : dn) d = -d;
      p->mia_available = true;
      p->mia_members = m;
      p->mia_non_members = m;
      p->mia_auc = RocAuc(dm, dn);
      // ROC: thresholds at every distinct score, from the highest down.
      std::vector<std::pair<float, int>> all;
      for (float s : dm) all.push_back({s, 1});
      for (float s : dn) all.push_back({s, 0});
      std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.first > b.first; });
      size_t tp = 0, fp = 0;
      std::vector<std::pair<double, double>> roc = {{0, 0}};
      for (size_t i = 0; i < all.size();) {
        size_t j = i;
        while (j < all.size() && all[j].first == all[i].first) (all[j].second ? tp : fp)++, ++j;
        double tpr = double(tp) / double(m), fpr = double(fp) / double(m);
        p->mia_advantage = std::max(p->mia_advantage, tpr - fpr);
        roc.push_back({fpr, tpr});
        i = j;
      }
      const size_t step = std::max<size_t>(1, roc.size() / 200);
      for (size_t i = 0; i < roc.size(); i += step) {
        p->mia_roc.push_back(float(roc[i].first));
        p->mia_roc.push_back(float(roc[i].second));
      }
      p->mia_roc.push_back(1.0f);
      p->mia_roc.push_back(1.0f);
    }
  }
  // Verdict (thresholds documented in docs/evaluate.md).
  const double base = p->has_holdout ? p->holdout_exact_copy_share : 0.0;
  bool high = p->exact_copy_share > std::max(0.05, 2 * base + 0.01) ||
              (p->mia_available && p->mia_auc > 0.7) ||
              (p->has_holdout && p->share_closer_than_holdout_p05 > 0.25);
  bool review = p->exact_copy_share > base + 0.005 || (p->mia_available && p->mia_auc > 0.6) ||
                (p->has_holdout && p->share_closer_than_holdout_p05 > 0.1);
  p->verdict = high ? "high risk" : review ? "review" : "low risk";
}

std::string BuildVerdict(const EvalReport& r) {
  std::string v =
      fmt::format("Overall quality {:.0f}/100 ({}).", r.quality.overall, r.quality.grade);
  std::vector<std::string> parts;
  if (r.quality.distribution.available)
    parts.push_back(fmt::format("distributions {:.0f}", r.quality.distribution.score));
  if (r.quality.correlation.available)
    parts.push_back(fmt::format("correlations {:.0f}", r.quality.correlation.score));
  if (r.quality.deep_structure.available)
    parts.push_back(fmt::format("deep structure {:.0f}", r.quality.deep_structure.score));
  if (!parts.empty()) v += " Scores: " + fmt::format("{}", fmt::join(parts, ", ")) + ".";
  if (r.has_holdout_baseline)
    v += fmt::format(" A held-out sample of the real data scores {:.0f} (the ceiling).",
                     r.holdout_baseline.overall);
  std::vector<const ColumnScore*> worst;
  for (const ColumnScore& c : r.column_scores) worst.push_back(&c);
  std::sort(worst.begin(), worst.end(),
            [](const ColumnScore* a, const ColumnScore* b) { return a->score < b->score; });
  std::vector<std::string> names;
  for (size_t i = 0; i < worst.size() && i < 3; ++i)
    if (worst[i]->score < 90)
      names.push_back(fmt::format("'{}' ({:.0f})", worst[i]->name, worst[i]->score));
  if (!names.empty()) v += fmt::format(" Weakest columns: {}.", fmt::join(names, ", "));
  const PrivacyResult& p = r.privacy;
  if (p.available) {
    v += fmt::format(" Privacy: {}: {} exact copies of training rows ({:.2f}%", p.verdict,
                     p.exact_copies, 100 * p.exact_copy_share);
    if (p.has_holdout)
      v += fmt::format("; holdout rows found in training: {:.2f}%",
                       100 * p.holdout_exact_copy_share);
    v += ")";
    if (p.has_holdout)
      v += fmt::format(", median distance to the closest training row {:.3f} (holdout {:.3f})",
                       p.dcr_synthetic_median, p.dcr_holdout_median);
    else
      v += fmt::format(", median distance to the closest training row {:.3f}",
                       p.dcr_synthetic_median);
    if (p.mia_available)
      v += fmt::format(", membership inference AUC {:.2f} (0.5 = no leak)", p.mia_auc);
    v += ".";
  }
  if (!r.missing_in_synthetic.empty())
    v += fmt::format(" {} real column(s) missing from the synthetic data.",
                     r.missing_in_synthetic.size());
  return v;
}

}  // namespace

Result<EvalReport> Evaluate(const Table& real, const Table& synthetic, const Table* holdout,
                            const EvalOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  if (options.num_bins < 2) return DS_ERR(kInvalidArgument, "num_bins must be >= 2");
  if (options.corr_max_categories < 1 || options.pca_max_onehot < 0 || options.threads < 1 ||
      !(options.corr_full_scale > 0))
    return DS_ERR(kInvalidArgument, "invalid evaluation options");
  DS_RETURN_IF_ERROR(real.Validate());
  DS_RETURN_IF_ERROR(synthetic.Validate());
  if (holdout) DS_RETURN_IF_ERROR(holdout->Validate());
  EvalReport r;
  r.options = options;
  r.real_source = real.source;
  r.synthetic_source = synthetic.source;
  r.real_rows = real.num_rows();
  r.synthetic_rows = synthetic.num_rows();
  if (real.num_rows() == 0) return DS_ERR(kInvalidInput, "{}: real table has no rows", real.source);
  if (synthetic.num_rows() == 0)
    return DS_ERR(kInvalidInput, "{}: synthetic table has no rows", synthetic.source);
  std::vector<int> real_cols, synth_cols, hold_cols;
  for (size_t c = 0; c < real.num_cols(); ++c) {
    int s = synthetic.FindColumn(real.columns[c].name);
    if (s < 0) {
      r.missing_in_synthetic.push_back(real.columns[c].name);
      continue;
    }
    real_cols.push_back(int(c));
    synth_cols.push_back(s);
    r.columns.push_back(real.columns[c].name);
  }
  for (const Column& c : synthetic.columns)
    if (real.FindColumn(c.name) < 0) r.extra_in_synthetic.push_back(c.name);
  if (real_cols.empty())
    return DS_ERR(kInvalidInput, "{} and {} have no column name in common", real.source,
                  synthetic.source);
  if (!r.missing_in_synthetic.empty())
    r.warnings.push_back(
        fmt::format("columns of the real data missing from the synthetic data "
                    "(not scored): {}",
                    fmt::join(r.missing_in_synthetic, ", ")));
  if (!r.extra_in_synthetic.empty())
    r.warnings.push_back(fmt::format("synthetic columns not in the real data (ignored): {}",
                                     fmt::join(r.extra_in_synthetic, ", ")));
  if (holdout) {
    r.holdout_source = holdout->source;
    r.holdout_rows = holdout->num_rows();
    if (holdout->num_rows() == 0)
      return DS_ERR(kInvalidInput, "{}: holdout table has no rows", holdout->source);
    for (const std::string& name : r.columns) {
      int h = holdout->FindColumn(name);
      if (h < 0)
        return DS_ERR(kInvalidInput, "{}: holdout lacks column '{}' of the real data",
                      holdout->source, name);
      hold_cols.push_back(h);
    }
  }

  // Fewer bins for small tables, so that sampling noise does not dominate the
  // histograms: max(5, min(num_bins, floor(sqrt(n)))), n the smaller row count.
  EvalOptions eff = options;
  const size_t n_small = std::min(real.num_rows(), synthetic.num_rows());
  eff.num_bins = std::max(5, std::min(options.num_bins, int(std::sqrt(double(n_small)))));
  eff.num_bins = std::min(eff.num_bins, options.num_bins);
  r.bins_used = eff.num_bins;
  std::vector<ColumnModel> models;
  for (int c : real_cols) models.push_back(BuildModel(real.columns[size_t(c)], eff));
  Evaluator ev(std::move(models), eff);
  EncodedTable er = Encode(real, real_cols, &ev.models());
  EncodedTable es = Encode(synthetic, synth_cols, &ev.models());
  EncodedTable eh;
  if (holdout) eh = Encode(*holdout, hold_cols, &ev.models());
  ev.Prepare(er);

  QualityDetail q = ev.Score(er, es, /*details=*/true);
  r.quality = q.summary;
  r.column_scores = std::move(q.columns);
  r.corr_real = std::move(q.corr_real);
  r.corr_synthetic = std::move(q.corr_other);
  r.pair_scores = std::move(q.pairs);
  r.pca = std::move(q.pca);
  for (size_t i = 0; i < ev.matrix().cols.size(); ++i) {
    r.matrix_columns.push_back(ev.models()[ev.matrix().cols[i]].name);
    r.matrix_kinds.push_back(ev.matrix().numeric[i] ? "numeric" : "categorical");
  }
  for (const ColumnScore& c : r.column_scores)
    if (c.invalid_synthetic > 0)
      r.warnings.push_back(fmt::format("column '{}': {} synthetic values are not numbers", c.name,
                                       c.invalid_synthetic));
  if (holdout && options.holdout_baseline) {
    r.holdout_baseline = ev.Score(er, eh, /*details=*/false).summary;
    r.has_holdout_baseline = true;
  }
  if (options.privacy) RunPrivacy(er, es, holdout ? &eh : nullptr, ev.models(), eff, &r.privacy);
  r.verdict = BuildVerdict(r);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace ds
