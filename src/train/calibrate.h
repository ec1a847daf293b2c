// Marginal calibration of a field-tokenizer model (post-processing).
//
// Each column of a field tokenizer starts with one token from its own id range
// (a category; a numeric column's missing spelling or bin; a datetime's
// missing spelling or year): the "first-token" cells of the column. After
// training, Calibrate nudges the network's output bias of those ids
// (dense.b) until the generated share of each cell matches a target
// marginal: it generates `samples` records, and adds
//   clamp(log(target + e) - log(generated + e), -kMaxStep, kMaxStep)
// to each cell's bias, `iterations` times. An id of a cell is legal only at
// its column's first position (the tokenizer's masks), so its bias changes
// only that position's distribution given the record so far (each column
// keeps its dependence on the earlier ones; the 1-way marginal moves to the
// target).
//
// Pairs (`calibrate_pairs`): a column b may instead be measured jointly with
// up to that many earlier columns a (its parents; the 2-way histogram of both
// columns' first tokens, each split into at most `groups` groups of ids that
// follow the measured 1-way mass, MassGroups). Its correction is then a
// table added to b's first-token logits given the record's value of a
// (generate/pair_correction.h), fitted by the same loop on the conditional
// shares: clamp(log t(b|a) - log g(b|a)), with t(b|a) = (t(a,b) + m t(b)) /
// (t(a) + m) smoothed by a mass m = `pseudo` towards b's marginal.
// ChooseParents picks the parents by the mutual information of all pairs'
// 2-way histograms (under dp: a Gaussian measurement of them). MeasureTargets
// does the measuring; under dp the release of noise multiplier sigma_m
// (DpPlan) is spent as the measurements MeasureShares describes, whose Renyi
// DP adds up to the one release the plan accounts.
//
// Targets: exact training marginals (no DP), or the same counts with Gaussian
// noise (NoisyMarginals) under --dp, where they are one Gaussian mechanism of
// L2 sensitivity sqrt(columns) composed with DP-SGD's accounting
// (privacy/dp_config.h, DpSettings::marginal_share). The calibration itself
// reads only the model and the targets: free, privacy-wise.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "generate/pair_correction.h"
#include "model/network.h"
#include "privacy/secure_noise.h"
#include "tokenize/field_tokenizer.h"
#include "train/marginals.h"
#include "util/status.h"

namespace ds {

struct CalibrateOptions {
  int64_t samples = 4000;  // records generated per iteration
  int iterations = 4;
  uint64_t seed = 1;
  double temperature = 1.0;
  double pseudo = 0.002;  // pair cells: smoothing mass of the conditionals (share of records)
  // Fewer records for the early measurements (MeasureSize): they only steer
  // the big first steps; the last two, which the kept state is chosen from, use all.
  bool ramp = true;
  // Stop at the first full-size measurement (MeasureSize == samples) no
  // closer than the best before it (the best state is kept either way). The
  // ramp's small early measurements do not stop it: on telco_churn the step
  // from 1000 records measured worse (0.0299 -> 0.0350) and the later ones
  // recovered to 0.0236. The trainer sets it without dp only (the dp figures
  // of docs/privacy.md ran every step).
  bool stop_when_worse = true;
  // The last step taken without its measurement when every step before it
  // brought the measured distance to at most kSteadyFall of the one before
  // (the state after it is kept, unmeasured: report->measured_last false). The
  // last measurement only checks the last step, and where every step fell
  // steadily the last one fell too on every table measured (breast_cancer:
  // 0.400, 0.239, 0.145, 0.094, 0.078), at a full-size measurement's cost
  // (4000 of breast_cancer's 12,000 calibration records). A run whose distance
  // ever rose or stalled (telco_churn's ramp: 0.0299 -> 0.0350; vega_zipcodes'
  // last step, worse than none) measures every step as before. The trainer sets
  // it without dp only.
  bool skip_steady_last = false;
  static constexpr double kSteadyFall = 0.8;
  static constexpr double kMaxStep = 2.0;
  // The output bias of an id the release gives no records (ForbidEmptyIds in
  // calibrate.cc): exp(-10000) is 0 in float, and the steps, +-kMaxStep each,
  // cannot bring it back.
  static constexpr float kForbiddenBias = -10000.0f;
};
// Records generated per calibration iteration for a training stream of
// `tokens` tokens in `records` records (the field tokenizer's default without
// dp): CalibrateOptions' 4000, fewer for long records so that an iteration
// generates about kCalibrateTokens tokens, and at most
// kCalibrateSamplesPerRecord x records (a measurement of 12 n records adds
// 1/12 of the sampling variance an output of n records has anyway), never
// under 1000 (a 2-way table's 10 x 10 groups then hold ~10 records a cell).
// santander (202 columns, ~1,500 tokens a record, 80 records): 1000; records
// up to 500 tokens (telco: 30) of 334 records or more keep 4000; stocks (84
// records) 1008, wine (142) 1704, tips (195) 2340 (docs/typed_fields.md
// "Pair calibration": 4000 -> 1000 cost wine, diabetes and tips 0.5-1.3 SQS).
inline constexpr int64_t kCalibrateTokens = 2000000;
inline constexpr int64_t kCalibrateSamplesPerRecord = 12;
int64_t CalibrationSamples(int64_t tokens, int64_t records);

// The valid records measured at iteration `it` (0 .. iterations): `samples`
// for the last two; with `ramp`, samples / 2 for the one before and samples / 4
// for the earlier ones (at least 250, or samples when fewer): 3 x samples in
// all for 4 iterations instead of 5 x. Measured on 7 tables (docs/typed_fields.md
// "Pair calibration"): the same SQS, 40% less calibration time.
int64_t MeasureSize(const CalibrateOptions& options, int it);

struct CalibrateReport {
  double tvd_before = 0, tvd_after = 0;  // mean total variation distance to the targets
  int kept_iteration = 0;                 // the measured best (0: the model as trained)
  int cells = 0, pairs = 0;               // marginals, and the 2-way ones among them
  std::vector<std::string> links;         // "child<-parent" per 2-way marginal
  std::vector<double> tvd;                // the distance measured at each iteration
  std::vector<int64_t> samples;           // the valid records each iteration measured
  bool measured_last = true;              // false: the last step kept unmeasured (skip_steady_last)
  int64_t attempts_here = 0;              // attempts this rank generated, all iterations
  int ranks = 1;                          // the ranks the sampling was spread over
  double seconds = 0, cpu_seconds = 0;    // wall clock; this process's CPU time
  std::string Describe() const;
};

// Adjusts params' dense.b (layout of `spec`) in place for the 1-way cells
// and sets *pairs to one fitted table per 2-way cell (none: empty; pairs may
// be null only when there is none). `targets` are distributions over
// MarginalCells(tok) or WithParents(...) cells. Every iteration measures the
// model and then steps; the state that measured best is kept (kept_iteration, its
// distance tvd_after <= tvd_before), the model as trained when no step helped.
Status Calibrate(const FieldTokenizer& tok, const std::vector<std::string>& header, char delimiter,
                 const NetworkSpec& spec, float* params, const std::vector<ColumnMarginal>& targets,
                 const CalibrateOptions& options, CalibrateReport* report,
                 PairTables* pairs = nullptr);

// `samples` valid records generated from the model (with `pairs` applied
// when not null): the first of attempt ids 0, 1, ... of the stream `seed`.
Result<std::vector<std::vector<std::string>>> GenerateForCalibration(
    const FieldTokenizer& tok, const std::vector<std::string>& header, char delimiter,
    const NetworkSpec& spec, const float* params, const CalibrateOptions& options, uint64_t seed,
    std::shared_ptr<const PairTables> pairs = nullptr);

struct MeasureStats {
  int64_t attempts = 0;       // attempt ids generated, all ranks (past the cut included)
  int64_t attempts_here = 0;  // of them on this rank
  int64_t skipped = 0;        // valid records that do not encode
  int ranks = 1;              // the ranks the attempts were spread over
};
// `got` (cells with any counts) set to the counts (CountMarginals) of
// GenerateForCalibration's records, generated in count mode: rounds of
// attempt ids (the first `samples`, then enough for the valid ones missing,
// sizes from the counts alone), each cut into one contiguous range per rank
// under mpirun (dist::Active, Size() > 1); each rank counts the valid records
// of its range that fall before the samples-th valid id (the ranks' valid
// counts are summed after each round) and the integer counts are summed once.
// Attempt k is a function of (seed, k) alone, so the counts, and everything
// the calibration computes from them, are those of one process for any
// number of ranks. kResourceExhausted past max_invalid (10 x samples + 1000).
Status MeasureModel(const FieldTokenizer& tok, const std::vector<std::string>& header,
                    char delimiter, const NetworkSpec& spec, const float* params,
                    const CalibrateOptions& options, uint64_t seed,
                    std::shared_ptr<const PairTables> pairs, std::vector<ColumnMarginal>* got,
                    MeasureStats* stats);

}  // namespace ds
