// ReportToJson and ReportToText. The JSON layout is documented in
// docs/evaluate.md; numbers are plain JSON numbers (distances in [0, 1],
// scores in [0, 100], shares in [0, 1]).
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "evaluate/evaluate.h"

namespace ds {

namespace {

using nlohmann::json;

// NaN / inf are not JSON; emit null.
json Num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json Section(const SectionScore& s) {
  if (!s.available) return json(nullptr);
  return json{{"distance", Num(s.distance)}, {"score", Num(s.score)}};
}

json Summary(const QualitySummary& q) {
  return json{{"overall", Num(q.overall)},
              {"grade", q.grade},
              {"field_distribution_stability", Section(q.distribution)},
              {"field_correlation_stability", Section(q.correlation)},
              {"deep_structure_stability", Section(q.deep_structure)}};
}

json Matrix(const std::vector<double>& m, size_t k) {
  json rows = json::array();
  for (size_t i = 0; i < k; ++i) {
    json row = json::array();
    for (size_t j = 0; j < k; ++j) row.push_back(Num(m[i * k + j]));
    rows.push_back(row);
  }
  return rows;
}

json ColumnScores(const std::vector<ColumnScore>& scores) {
  json cols = json::array();
  for (const ColumnScore& c : scores) {
    json bins = json::array();
    for (const HistogramBin& b : c.bins)
      bins.push_back({{"label", b.label}, {"real", Num(b.real)}, {"synthetic", Num(b.synthetic)}});
    cols.push_back({{"name", c.name},
                    {"type", ColumnKindName(c.type)},
                    {"js_distance", Num(c.js_distance)},
                    {"score", Num(c.score)},
                    {"ks_complement", c.ks_complement < 0 ? json(nullptr) : Num(c.ks_complement)},
                    {"tv_complement", c.tv_complement < 0 ? json(nullptr) : Num(c.tv_complement)},
                    {"missing_real", c.missing_real},
                    {"missing_synthetic", c.missing_synthetic},
                    {"invalid_synthetic", c.invalid_synthetic},
                    {"distinct_real", c.distinct_real},
                    {"distinct_synthetic", c.distinct_synthetic},
                    {"unseen_synthetic", c.unseen_synthetic},
                    {"bins", bins}});
  }
  return cols;
}

json Correlation(const EvalReport& r) {
  const size_t k = r.matrix_columns.size();
  json pairs = json::array();
  for (const PairScore& p : r.pair_scores)
    pairs.push_back({{"a", p.a},
                     {"b", p.b},
                     {"kind", p.kind},
                     {"real", Num(p.real)},
                     {"synthetic", Num(p.synthetic)},
                     {"abs_diff", Num(p.abs_diff)},
                     {"score", Num(100 * (1 - p.abs_diff))}});
  return {{"columns", r.matrix_columns},
          {"kinds", r.matrix_kinds},
          {"real", k ? Matrix(r.corr_real, k) : json::array()},
          {"synthetic", k ? Matrix(r.corr_synthetic, k) : json::array()},
          {"pairs", pairs}};
}

json Privacy(const PrivacyResult& p) {
  if (!p.available) return nullptr;
  json pj = {{"verdict", p.verdict},
             {"exact_copies", p.exact_copies},
             {"exact_copy_share", Num(p.exact_copy_share)},
             {"synthetic_duplicates", p.synthetic_duplicates},
             {"dcr",
              {{"distance", "gower"},
               {"synthetic_sample", p.dcr_sample_synthetic},
               {"synthetic_median", Num(p.dcr_synthetic_median)},
               {"synthetic_p05", Num(p.dcr_synthetic_p05)}}}};
  if (p.has_holdout) {
    pj["holdout_exact_copies"] = p.holdout_exact_copies;
    pj["holdout_exact_copy_share"] = Num(p.holdout_exact_copy_share);
    pj["dcr"]["holdout_sample"] = p.dcr_sample_holdout;
    pj["dcr"]["holdout_median"] = Num(p.dcr_holdout_median);
    pj["dcr"]["holdout_p05"] = Num(p.dcr_holdout_p05);
    pj["dcr"]["share_closer_than_holdout_p05"] = Num(p.share_closer_than_holdout_p05);
  }
  pj["membership_inference"] = p.mia_available ? json{{"members", p.mia_members},
                                                      {"non_members", p.mia_non_members},
                                                      {"auc", Num(p.mia_auc)},
                                                      {"advantage", Num(p.mia_advantage)}}
                                               : json(nullptr);
  return pj;
}

json Options(const EvalReport& r) {
  return {{"num_bins", r.options.num_bins},
          {"bins_used", r.bins_used},
          {"corr_max_categories", r.options.corr_max_categories},
          {"pca_max_onehot", r.options.pca_max_onehot},
          {"corr_full_scale", r.options.corr_full_scale},
          {"privacy_sample_rows", r.options.privacy_sample_rows},
          {"seed", r.options.seed}};
}

}  // namespace

std::string ReportToJson(const EvalReport& r) {
  json j;
  j["datasynth_version"] = DS_VERSION;
  j["inputs"] = {{"real", r.real_source},
                 {"synthetic", r.synthetic_source},
                 {"holdout", r.holdout_source.empty() ? json(nullptr) : json(r.holdout_source)},
                 {"real_rows", r.real_rows},
                 {"synthetic_rows", r.synthetic_rows},
                 {"holdout_rows", r.holdout_rows}};
  j["columns"] = {{"evaluated", r.columns},
                  {"missing_in_synthetic", r.missing_in_synthetic},
                  {"extra_in_synthetic", r.extra_in_synthetic}};
  j["warnings"] = r.warnings;
  j["verdict"] = r.verdict;
  j["quality"] = Summary(r.quality);
  j["holdout_baseline"] = r.has_holdout_baseline ? Summary(r.holdout_baseline) : json(nullptr);
  j["column_scores"] = ColumnScores(r.column_scores);
  j["correlation"] = Correlation(r);
  j["pca"] = {{"features", r.pca.features},
              {"explained_variance_ratio",
               {Num(r.pca.explained_variance_ratio[0]), Num(r.pca.explained_variance_ratio[1])}},
              {"js_distance", {Num(r.pca.js_distance[0]), Num(r.pca.js_distance[1])}}};
  j["privacy"] = Privacy(r.privacy);
  j["options"] = Options(r);
  j["seconds"] = Num(r.seconds);
  return j.dump(2) + "\n";
}

std::string ReportToText(const EvalReport& r) {
  std::string s;
  auto sec = [](const SectionScore& x) {
    return x.available ? fmt::format("{:5.1f}", x.score) : std::string("  n/a");
  };
  s +=
      fmt::format("Synthetic quality score: {:.1f}/100 ({})\n", r.quality.overall, r.quality.grade);
  s += fmt::format("  field distribution stability  {}\n", sec(r.quality.distribution));
  s += fmt::format("  field correlation stability   {}\n", sec(r.quality.correlation));
  s += fmt::format("  deep structure stability      {}\n", sec(r.quality.deep_structure));
  if (r.has_holdout_baseline)
    s += fmt::format("  holdout vs real (ceiling)     {:5.1f}\n", r.holdout_baseline.overall);
  const PrivacyResult& p = r.privacy;
  if (p.available) {
    s += fmt::format("Privacy: {}\n", p.verdict);
    s += fmt::format("  exact copies of training rows {} ({:.2f}%)\n", p.exact_copies,
                     100 * p.exact_copy_share);
    s += fmt::format("  median distance to closest training row: synthetic {:.4f}",
                     p.dcr_synthetic_median);
    if (p.has_holdout) s += fmt::format(", holdout {:.4f}", p.dcr_holdout_median);
    s += "\n";
    if (p.mia_available)
      s += fmt::format("  membership inference AUC {:.3f}, advantage {:.3f}\n", p.mia_auc,
                       p.mia_advantage);
  }
  for (const std::string& w : r.warnings) s += "warning: " + w + "\n";
  s += fmt::format("Evaluated {} columns, {} real / {} synthetic rows in {:.2f} s\n",
                   r.columns.size(), r.real_rows, r.synthetic_rows, r.seconds);
  return s;
}

}  // namespace ds
