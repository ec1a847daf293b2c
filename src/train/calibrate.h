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
#include "util/status.h"

namespace ds {

struct ColumnMarginal {
  int column = 0;         // column index
  int lo = 0, hi = 0;     // first-token ids [lo, hi)
  // 2-way (parent >= 0): the parent column and its first-token ids, split
  // into `rows` groups; the child's ids into `cols` groups (PairTable::Row,
  // Col). 1-way: parent -1, rows 1, cols hi - lo.
  int parent = -1, plo = 0, phi = 0;
  int rows = 1, cols = 0;
  // Optional explicit groups (PairTable::row_of, col_of): the group of each
  // parent id [phi - plo] and child id [hi - lo]; empty: contiguous uniform.
  std::vector<int32_t> row_of, col_of;
  // 1-way only, optional: the groups of the column's 2-way tables (one per id);
  // the cell then fits only each id's share within its group (the tables
  // move the groups, this the ids inside them: their shape from the 1-way
  // release rather than from the network).
  std::vector<int32_t> within;
  std::vector<double> p;  // [rows * cols]: counts, or a distribution (sums to 1)
  PairTable Shape() const;  // the geometry as a table (w zero)
};

// Groups of a column's ids by their measured mass (post-processing of
// `counts`, one per id; negative read as 0): an id holding at least
// 1/groups of the mass is a group of its own (a category, a missing
// spelling, a point mass), and the other ids are cut, in id order, into
// contiguous groups of about equal mass with the groups left, so the groups
// follow where the data is rather than the schema's bounds. Returns the
// group of each id, numbered 0.. in order of their first id (at most
// `groups` groups, at least one).
std::vector<int32_t> MassGroups(const std::vector<double>& counts, int groups);

// The cells of every calibrated column (categorical, integer, decimal,
// datetime), from the tokenizer alone (every cell, whatever the data), with
// zero counts.
std::vector<ColumnMarginal> MarginalCells(const FieldTokenizer& tok);
// The cells with parents: parents[i] lists the indices in `one_way` (a
// MarginalCells result) of cell i's parents (each < i): one 2-way cell per
// parent, in that order, or cell i as it is when none. Each column's and
// parent's ids are split into at most `groups` groups.
// With `group_of` (one map per one_way cell, MassGroups of its ids; may be
// null) the ids are grouped by those maps instead.
std::vector<ColumnMarginal> WithParents(const std::vector<ColumnMarginal>& one_way,
                                        const std::vector<std::vector<int>>& parents, int groups,
                                        const std::vector<std::vector<int32_t>>* group_of = nullptr);
// Every pair (a, b), a < b, of `one_way` cells with parent a (grouped as
// WithParents does), b-major: (0,1), (0,2), (1,2), (0,3), ...; zero counts.
std::vector<ColumnMarginal> AllPairs(const std::vector<ColumnMarginal>& one_way, int groups,
                                     const std::vector<std::vector<int32_t>>* group_of = nullptr);
// For each cell b of `one_way` the (at most per_column) earlier cells a with the highest mutual
// information in `all_pairs` (AllPairs cells holding counts, possibly
// noisy: negative counts read as 0), less the Miller-Madow bias
// (R-1)(C-1)/(2N) scaled by 1 + noise_stddev^2 RC / N (the noise as extra
// variance per cell), best first; none for the first cell and where none
// reaches min_mi nats. Reads only the tables: post-processing of them.
std::vector<std::vector<int>> ChooseParents(const std::vector<ColumnMarginal>& one_way,
                                            const std::vector<ColumnMarginal>& all_pairs,
                                            double noise_stddev, int per_column = 1,
                                            double min_mi = 0.002);
// Adds each record's first tokens to the counts (records that do not encode
// are skipped and counted in *skipped when not null).
void CountMarginals(const FieldTokenizer& tok, const std::vector<std::vector<std::string>>& records,
                    std::vector<ColumnMarginal>* cells, int64_t* skipped = nullptr);
// Gaussian mechanism: adds N(0, (noise_multiplier sqrt(K))^2) to every count
// (K = cells.size(), the L2 sensitivity of the K histograms under add/remove
// of one record), then (project) projects each table onto the nonnegative
// tables of its noisy total (ProjectToTotal). Call Normalize after.
void AddMarginalNoise(std::vector<ColumnMarginal>* cells, double noise_multiplier,
                      SecureGaussian* noise, bool project = true);
// An ordered histogram's cells from `start` on (a numeric column's bins, a
// datetime's years; the missing spellings before them kept) set to 0 outside
// the contiguous runs of cells above `threshold` around the cells above 3 x
// `threshold` (around the largest cell when none is; two modes far apart,
// such as mpg's years 1999 and 2008, both stay):
// under dp the generous public bounds leave many empty cells whose noise
// would put values far outside the data (post-processing). Nothing when no
// cell is above the threshold.
void KeepContiguous(std::vector<double>* p, size_t start, double threshold);
// The cells of the groups (`group`: MassGroups' labels) that hold no mass in
// *p (a KeepContiguous-trimmed histogram) set to `untrimmed`'s: the pair
// tables may still give such a group records, and with no shape the network
// spreads them over all of its ids (penguins' body mass at epsilon 1: one
// noisy dip below the threshold, a third of the values over 4,400-10,000 g).
void FillEmptyGroups(const std::vector<double>& untrimmed, const std::vector<int32_t>& group,
                     std::vector<double>* p);
// The nearest (Euclidean) table >= 0 with the same sum: p_i -> max(0, p_i - c)
// for the one c that keeps the sum (a noisy table's sum is unbiased for the
// records; clamping at 0 alone would add the noise's positive half of every
// empty cell, spreading mass over cells the data never holds). A sum <= 0:
// clamped at 0 only.
void ProjectToTotal(std::vector<double>* p);
// Counts -> distributions (each table sums to 1; all zero -> uniform).
void Normalize(std::vector<ColumnMarginal>* cells);

// Under dp with pairs the release of noise multiplier sigma_m is spent as
// three Gaussian measurements whose Renyi DP adds up to a / (2 sigma_m^2) at
// every order: the 1-way histograms of every column (share `one_way`: the
// groups, and the targets of the columns without a parent), all pair
// histograms (`selection`: the parents), and the chosen pairs' histograms
// again (the rest; averaged with their first measurement: the 2-way
// targets). Each multiplier is sigma_m / sqrt(share).
//
// With `rounds` > 0 the selection is instead that many exponential-mechanism
// picks (privacy/exponential_mechanism.h) spending the `selection` share
// between them, each scored by how far a pair's exact grouped counts lie from
// the product of the noisy 1-way histograms (L1, sensitivity 1); only the
// chosen pairs are then measured, once, with the rest of the release.
struct MeasureShares {
  double one_way = 1, selection = 0;  // 1, 0: 1-way histograms only, at sigma_m
  int rounds = 0;                     // > 0: the selection by the exponential mechanism
  bool pairs() const { return selection > 0; }
  bool exponential() const { return rounds > 0; }
  double RoundEpsilon(double sigma_m) const;  // each round's epsilon (exponential())
  double OneWayNoise(double sigma_m) const { return sigma_m / std::sqrt(one_way); }
  double SelectionNoise(double sigma_m) const { return sigma_m / std::sqrt(selection); }
  double TargetNoise(double sigma_m) const {
    return sigma_m / std::sqrt(std::max(1e-12, 1.0 - one_way - selection));
  }
};
// The shares by the records n, the multiplier and the calibrated columns C
// (public: n sets the sampling rate and delta already), through the signal
// of all P = C (C - 1) / 2 pair histograms, r = n / (sigma_m sqrt(P)): below
// 12 no pairs, the whole release to the 1-way histograms (mpg at epsilon 1);
// below 40, 0.45 / 0.1 (mpg at epsilon 4: the groups and shapes need the
// most); else 0.2 / 0.2; the selection by the exponential mechanism, 2.5 (C - 1)
// rounds (at most the pairs `per_child` parents per column allow; measured on
// penguins, mpg and telco_churn: docs/privacy.md).
MeasureShares SharesFor(int64_t n, double sigma_m, int columns, int per_child = 3);

struct MeasureOptions {
  int pairs = 0;            // parents per column (0: 1-way targets only)
  int max_groups = 10;      // id groups per column of a 2-way table, at most
  double sigma_m = 0;       // the release's noise multiplier (0: exact counts, no dp)
  double min_cell_snr = 1;  // dp: groups G = sqrt(n / (min_cell_snr x target noise stddev))
};
struct MeasureReport {
  MeasureShares shares;    // how the release was spent (dp)
  int groups = 0;          // id groups per column used (pairs)
  double noisy_n = 0;      // the records as the 1-way histograms count them (noisy under dp)
  int64_t skipped = 0;     // records that do not encode
  // "the 1-way histograms at noise multiplier ..., ..." (dp), for the log and model_params.json.
  std::string Describe(double sigma_m) const;
};
// The calibration targets (distributions) from the training records: with
// pairs, the 1-way histogram of every column (full resolution), then the
// groups (MassGroups of those histograms, G of them by the noise: about
// min_cell_snr noise stddevs of records per cell of a G x G table of n
// records, within [2, max_groups]), the parents (ChooseParents on all pair
// histograms) and their 2-way histograms; targets: the 1-way histograms of
// the columns without a parent, then the 2-way ones. Under dp (sigma_m > 0)
// every histogram is a Gaussian measurement as above, shares by SharesFor
// (`noise` must not be null); everything else reads only the noisy counts.
// Without pairs (or when SharesFor says none): the 1-way histograms alone.
Status MeasureTargets(const FieldTokenizer& tok, const std::vector<std::vector<std::string>>& records,
                      const MeasureOptions& options, SecureGaussian* noise,
                      std::vector<ColumnMarginal>* targets, MeasureReport* report);

// Under mpirun with several ranks (dist::Active, Size() > 1): rank 0's
// targets to every rank, so that all ranks fit the same targets while they
// share the sampling (MeasureModel); under dp each rank's measurement noise is
// its own draw. A no-op otherwise.
Status ShareTargets(std::vector<ColumnMarginal>* targets);

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
  static constexpr double kMaxStep = 2.0;
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
