// Quality and privacy evaluation of a synthetic table against the real
// (training) table, optionally with a holdout of real rows never trained on.
//
// Quality (Gretel's Synthetic Quality Score, docs/reference.md §8). Every part is a
// distance d (0 = identical) mapped to a score in [0, 100] (100 = identical):
//   Field distribution stability: per column, Jensen-Shannon distance (base 2,
//     in [0, 1]) between the real and synthetic histograms. Bins: numeric columns
//     with at most `num_bins` distinct real values get one bin per value (a value
//     falls in the bin of the nearest real value), other numeric columns
//     `num_bins` quantile bins of the real values (outer bins open-ended; fewer
//     bins for small tables, see EvalOptions::num_bins);
//     categorical columns one bin per value (real or synthetic); text columns
//     the character length, binned like a numeric column. Missing values and
//     unparseable synthetic numbers have bins of their own.
//       column score = 100 (1 - d_col);   section score = 100 (1 - mean d_col).
//   Field correlation stability: the mixed association matrix over the numeric
//     and categorical columns, M[i][j] = Pearson r (numeric-numeric), Theil's
//     U(i | j) (categorical-categorical, asymmetric), correlation ratio eta
//     (numeric-categorical), computed on both tables; categorical columns keep
//     their `corr_max_categories` most frequent real values, the rest pooled.
//     d = mean over i != j of |M_real - M_synth| (in [0, 2], typically < 0.3).
//       section score = 100 max(0, 1 - d / corr_full_scale)   (corr_full_scale 0.25:
//       a mean error of 0.05 costs 20 points, losing every association of
//       typical real data (mean |M| around 0.1-0.3) costs 40 to all 100).
//     Per pair (i < j): both directions averaged, pair score 100 (1 - |diff|).
//   Deep structure stability: the real numeric columns z-scored and the
//     categorical ones one-hot encoded (top `pca_max_onehot` values) and z-scored
//     (real statistics), a 2-component PCA fitted on the real rows, both tables
//     projected; d = mean over the 2 components of the Jensen-Shannon distance of
//     the projections (quantile-binned on the real projection, `num_bins` bins).
//       section score = 100 (1 - d).
//   Overall: the mean of the available section scores, graded
//     Excellent >= 80 > Good >= 60 > Moderate >= 40 > Poor >= 20 > Very poor.
//   Per column the report also gives SDMetrics' KSComplement (numeric) or
//   TVComplement (categorical), computed in C++ (see metrics.h).
//
// Privacy (see privacy.h for the distance):
//   Exact copies: synthetic rows equal (on every evaluated column, numbers compared
//     by value) to some training row; with a holdout, the same share for holdout
//     rows is the baseline (duplicates that occur naturally).
//   Distance to closest record (DCR): for up to `privacy_sample_rows` synthetic
//     rows (and holdout rows), the distance to the nearest training row.
//     Synthetic rows much closer to training than holdout rows are is memorisation.
//   Membership inference (holdout given): an attacker scores a candidate record by
//     its distance to the nearest synthetic row (closer = "was in training").
//     On equal-size samples of training rows (members) and holdout rows (non-
//     members): ROC AUC (0.5 = no leak) and advantage max(TPR - FPR).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "evaluate/table.h"
#include "util/status.h"

namespace ds {

struct EvalOptions {
  // Histogram bins for numeric / length / PCA values; small tables get fewer:
  // max(5, min(num_bins, floor(sqrt(n)))), n the smaller of the real and
  // synthetic row counts.
  int num_bins = 20;
  int corr_max_categories = 20;       // categories kept per column in association matrices
  int pca_max_onehot = 10;            // one-hot columns per categorical column in the PCA
  double corr_full_scale = 0.25;      // mean |diff| that maps to a correlation score of 0
  size_t privacy_sample_rows = 5000;  // synthetic / holdout rows sampled for DCR and MIA
  int threads = 2;                    // nearest-neighbour search threads
  uint64_t seed = 1;                  // sampling seed (Philox)
  size_t plot_points = 1500;          // points per table in the PCA scatter plot
  int plot_max_bins = 20;             // bars per column plot (the rest pooled as "other")
  bool holdout_baseline = true;       // also score holdout vs real (the ceiling)
  bool privacy = true;                // run the privacy checks
};

struct HistogramBin {
  std::string label;
  double real = 0;       // share of real rows
  double synthetic = 0;  // share of synthetic rows
};

struct ColumnScore {
  std::string name;
  ColumnKind type = ColumnKind::kCategorical;
  double js_distance = 0;
  double score = 0;           // 100 (1 - js_distance)
  double ks_complement = -1;  // numeric columns; -1 when not applicable
  double tv_complement = -1;  // categorical columns; -1 when not applicable
  size_t missing_real = 0, missing_synthetic = 0;
  size_t invalid_synthetic = 0;  // numeric column: synthetic values that do not parse
  size_t distinct_real = 0, distinct_synthetic = 0;
  size_t unseen_synthetic = 0;     // categorical: synthetic rows with a value real never has
  std::vector<HistogramBin> bins;  // for the plot (at most plot_max_bins + pooled)
};

struct PairScore {
  std::string a, b;
  std::string kind;                // "pearson", "theils_u", "correlation_ratio"
  double real = 0, synthetic = 0;  // (M[a][b] + M[b][a]) / 2
  double abs_diff = 0;             // (|dM[a][b]| + |dM[b][a]|) / 2
};

struct SectionScore {
  bool available = false;
  double distance = 0;
  double score = 0;
};

struct QualitySummary {
  SectionScore distribution, correlation, deep_structure;
  double overall = 0;
  std::string grade;
};

struct PcaResult {
  size_t features = 0;
  double explained_variance_ratio[2] = {0, 0};
  double js_distance[2] = {0, 0};
  std::vector<float> real_points;       // [m, 2] sampled projections
  std::vector<float> synthetic_points;  // [m', 2]
};

struct PrivacyResult {
  bool available = false;
  size_t exact_copies = 0;  // synthetic rows equal to a training row
  double exact_copy_share = 0;
  size_t synthetic_duplicates = 0;  // synthetic rows repeating an earlier synthetic row
  bool has_holdout = false;
  size_t holdout_exact_copies = 0;  // baseline: holdout rows equal to a training row
  double holdout_exact_copy_share = 0;
  size_t dcr_sample_synthetic = 0, dcr_sample_holdout = 0;
  std::vector<float> dcr_synthetic;  // [dcr_sample_synthetic] sorted ascending
  std::vector<float> dcr_holdout;    // [dcr_sample_holdout] sorted ascending
  double dcr_synthetic_median = 0, dcr_holdout_median = 0;
  double dcr_synthetic_p05 = 0, dcr_holdout_p05 = 0;
  // Share of sampled synthetic rows closer to training than the 5th percentile
  // of holdout rows (about 0.05 when the generator does not memorise).
  double share_closer_than_holdout_p05 = 0;
  bool mia_available = false;
  size_t mia_members = 0, mia_non_members = 0;
  double mia_auc = 0.5;
  double mia_advantage = 0;
  std::vector<float> mia_roc;  // [points, 2] (fpr, tpr) for the plot
  std::string verdict;         // "low risk" / "review" / "high risk"
};

struct EvalReport {
  std::string real_source, synthetic_source, holdout_source;
  size_t real_rows = 0, synthetic_rows = 0, holdout_rows = 0;
  std::vector<std::string> columns;               // evaluated (common) columns
  std::vector<std::string> missing_in_synthetic;  // real columns absent from synthetic
  std::vector<std::string> extra_in_synthetic;    // synthetic columns absent from real
  std::vector<std::string> warnings;

  QualitySummary quality;
  std::vector<ColumnScore> column_scores;  // one per evaluated column, in real order
  // Association matrices over `matrix_columns` (numeric and categorical columns):
  std::vector<std::string> matrix_columns;
  std::vector<std::string> matrix_kinds;          // [k] column kinds: "numeric" or "categorical"
  std::vector<double> corr_real, corr_synthetic;  // [k, k] row-major; diagonal 1
  std::vector<PairScore> pair_scores;             // i < j, in matrix order
  PcaResult pca;
  bool has_holdout_baseline = false;
  QualitySummary holdout_baseline;  // holdout vs real: the ceiling for this data

  PrivacyResult privacy;
  int bins_used = 0;    // histogram bins after the small-table rule (see EvalOptions)
  std::string verdict;  // a few sentences for the top of the report
  double seconds = 0;   // evaluation wall time
  EvalOptions options;
};

// Grade of an overall score (see the mapping above).
std::string GradeOf(double score);

// Evaluates `synthetic` (and optionally a `holdout` of real rows not used for
// training) against `real`. Columns are matched by name; the real table's types
// decide how each column is treated. Errors: no common columns, an empty table,
// a holdout lacking an evaluated column.
Result<EvalReport> Evaluate(const Table& real, const Table& synthetic, const Table* holdout,
                            const EvalOptions& options);

// Every score as JSON (pretty-printed), for scripts and CI.
std::string ReportToJson(const EvalReport& report);
// One self-contained HTML page (inline CSS and SVG, no script, no network).
std::string ReportToHtml(const EvalReport& report);
// A few lines of plain text: the scores and the verdict.
std::string ReportToText(const EvalReport& report);

// What `datasynth evaluate` passes in.
struct EvaluateArgs {
  std::string real_path;       // --real (required)
  std::string synthetic_path;  // --synthetic (required)
  std::string holdout_path;    // --holdout ("" = none)
  std::string report_path;     // --report (HTML; "" = do not write)
  std::string json_path;       // --json ("" = do not write)
  bool overwrite = false;      // --overwrite: replace an existing report / JSON file
  char delimiter = ',';        // --delimiter
  EvalOptions options;
};

// Reads the tables, evaluates, writes the report files; `summary_text` (may be
// null) receives ReportToText's lines for the terminal. An existing report or JSON
// file is refused before anything is read (kAlreadyExists) unless args.overwrite;
// both are written atomically (a crash leaves the old file or the new one).
Status RunEvaluate(const EvaluateArgs& args, std::string* summary_text);

}  // namespace ds
