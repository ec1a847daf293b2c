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
// one earlier column a (its parent; the 2-way histogram of both columns'
// first tokens, each split into at most `groups` contiguous groups of ids).
// Its correction is then a table added to b's first-token logits given the
// record's value of a (generate/pair_correction.h), fitted by the same loop
// on the conditional shares: clamp(log t(b|a) - log g(b|a)), with t(b|a) =
// (t(a,b) + m t(b)) / (t(a) + m) smoothed by a mass m = `pseudo` towards b's
// marginal. ChooseParents picks each column's parent by the mutual
// information of all pairs' 2-way histograms (under dp: a first Gaussian
// measurement of them, SelectionNoise below). Every calibrated column then
// has exactly one target histogram (1-way or 2-way): L2 sensitivity sqrt(K).
//
// Under dp the release of noise multiplier sigma_m (DpPlan) is spent as two
// Gaussian measurements: all P pair histograms with multiplier
// sigma_m / sqrt(f) (selection; sensitivity sqrt(P)), then the K targets with
// sigma_m / sqrt(1 - f). Their Renyi DP adds up to a / (2 sigma_m^2) at every
// order a: exactly the one release the plan accounts (f = kSelectionShare).
//
// Targets: exact training marginals (no DP), or the same counts with Gaussian
// noise (NoisyMarginals) under --dp, where they are one Gaussian mechanism of
// L2 sensitivity sqrt(columns) composed with DP-SGD's accounting
// (privacy/dp_config.h, DpSettings::marginal_share). The calibration itself
// reads only the model and the targets: free, privacy-wise.
#pragma once

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
  std::vector<double> p;  // [rows * cols]: counts, or a distribution (sums to 1)
  PairTable Shape() const;  // the geometry as a table (w zero)
};

// The cells of every calibrated column (categorical, integer, decimal,
// datetime), from the tokenizer alone (every cell, whatever the data), with
// zero counts.
std::vector<ColumnMarginal> MarginalCells(const FieldTokenizer& tok);
// The cells with parents: parents[i] lists the indices in `one_way` (a
// MarginalCells result) of cell i's parents (each < i): one 2-way cell per
// parent, in that order, or cell i as it is when none. Each column's and
// parent's ids are split into at most `groups` groups.
std::vector<ColumnMarginal> WithParents(const std::vector<ColumnMarginal>& one_way,
                                        const std::vector<std::vector<int>>& parents, int groups);
// Every pair (a, b), a < b, of `one_way` cells with parent a (grouped as
// WithParents does), b-major: (0,1), (0,2), (1,2), (0,3), ...; zero counts.
std::vector<ColumnMarginal> AllPairs(const std::vector<ColumnMarginal>& one_way, int groups);
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
// of one record), then clamps at 0. Call Normalize after.
void AddMarginalNoise(std::vector<ColumnMarginal>* cells, double noise_multiplier,
                      SecureGaussian* noise);
// Counts -> distributions (each table sums to 1; all zero -> uniform).
void Normalize(std::vector<ColumnMarginal>* cells);

inline constexpr double kSelectionShare = 0.25;
// The noise multipliers of the two measurements for a release of sigma_m.
inline double SelectionNoise(double sigma_m) { return sigma_m / std::sqrt(kSelectionShare); }
inline double TargetNoise(double sigma_m, bool pairs) {
  return pairs ? sigma_m / std::sqrt(1.0 - kSelectionShare) : sigma_m;
}

struct CalibrateOptions {
  int64_t samples = 4000;  // records generated per iteration
  int iterations = 4;
  uint64_t seed = 1;
  double temperature = 1.0;
  double pseudo = 0.002;  // pair cells: smoothing mass of the conditionals (share of records)
  static constexpr double kMaxStep = 2.0;
};
struct CalibrateReport {
  double tvd_before = 0, tvd_after = 0;  // mean total variation distance to the targets
  int cells = 0, pairs = 0;               // marginals, and the 2-way ones among them
  std::vector<std::string> links;         // "child<-parent" per 2-way marginal
  std::string Describe() const;
};

// Adjusts params' dense.b (layout of `spec`) in place for the 1-way cells
// and sets *pairs to one fitted table per 2-way cell (none: empty; pairs may
// be null only when there is none). `targets` are distributions over
// MarginalCells(tok) or WithParents(...) cells. The last measurement is the
// model before the last update: tvd_after comes from one more generation.
Status Calibrate(const FieldTokenizer& tok, const std::vector<std::string>& header, char delimiter,
                 const NetworkSpec& spec, float* params, const std::vector<ColumnMarginal>& targets,
                 const CalibrateOptions& options, CalibrateReport* report,
                 PairTables* pairs = nullptr);

// `samples` valid records generated from the model (with `pairs` applied
// when not null), as the calibration measures it.
Result<std::vector<std::vector<std::string>>> GenerateForCalibration(
    const FieldTokenizer& tok, const std::vector<std::string>& header, char delimiter,
    const NetworkSpec& spec, const float* params, const CalibrateOptions& options, uint64_t seed,
    std::shared_ptr<const PairTables> pairs = nullptr);

}  // namespace ds
