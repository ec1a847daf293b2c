// The marginals a field-tokenizer model is calibrated to (train/calibrate.h):
// the cells of each column's first tokens, their 1-way and 2-way histograms,
// the choice of pairs, and their measurement (exact, or under dp Gaussian
// measurements and exponential-mechanism picks composed into one release).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "generate/pair_correction.h"
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
// Groups marked in `dead` (DeadGroups; may be empty) stay empty.
void FillEmptyGroups(const std::vector<double>& untrimmed, const std::vector<int32_t>& group,
                     std::vector<double>* p, const std::vector<char>& dead = {});
// Under dp with pairs, per 1-way cell i (`trimmed`: KeepContiguous-trimmed,
// projected; `one_raw`: the same noisy counts before either; `group_of`:
// their MassGroups): the groups of an ordered column the release gives no
// evidence of. A group is dead when the trim left it no mass and the
// inverse-variance mean of its noisy mass, over its 1-way cells (stddev
// one_stddev each) and the row or column sums of every measured pair table
// it is in (`pairs_raw`, before the projection, stddev pair_stddev a cell),
// is not above z of its own stddev. Post-processing of the release only.
// The pair sums matter: the 1-way mass alone also cut real tails below the
// noise (seattle weather's rain above 10 mm at epsilon 1, 9.5% of the days,
// is kept by the 5 pair tables precipitation is in; docs/privacy.md).
std::vector<std::vector<char>> DeadGroups(const std::vector<ColumnMarginal>& one_raw,
                                          const std::vector<ColumnMarginal>& trimmed,
                                          const std::vector<std::vector<int32_t>>& group_of,
                                          const std::vector<char>& ordered, double one_stddev,
                                          const std::vector<ColumnMarginal>& pairs_raw,
                                          double pair_stddev, double z);
// The pair tables' cells in a dead group of their column or parent set to 0
// (the tables are normalized after: their other cells take the mass). Without
// it the tables' noise gave groups far outside the data records (mpg's model
// years 1990 and 1998 at epsilon 10: 4.0% and 6.8% of the rows; none real).
void DropDeadGroups(const std::vector<std::vector<char>>& dead, const std::vector<ColumnMarginal>& one,
                    std::vector<ColumnMarginal>* pairs);
// The z of DeadGroups under dp.
inline constexpr double kDeadGroupZ = 2.0;
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
// the product of the noisy 1-way histograms (L1, sensitivity 1), less what
// noise is expected to add to it (IndependenceScores); only the
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
// 40, 0.45 / 0.1 (mpg at epsilon 4: the groups and shapes need the most); else
// 0.2 / 0.2; the selection by the exponential mechanism, R = 2.5 (C - 1) rounds
// (at most the pairs `per_child` parents per column allow; measured on
// penguins, mpg and telco_churn: docs/privacy.md). No pairs, the whole release
// to the 1-way histograms, when a 2 x 2 table of the R chosen pairs at the
// 0.45 / 0.1 split would hold under 3 noise stddevs of records a cell
// (n / 4 < 3 sigma_m sqrt(R / 0.45): mpg at epsilon 1; ames at epsilon 1, 74
// columns, has pairs).
MeasureShares SharesFor(int64_t n, double sigma_m, int columns, int per_child = 3);

// The exponential mechanism's score of every pair of `all` (AllPairs cells
// over `one`, exact grouped counts): the L1 distance of its counts to what
// the released 1-way histograms `one` (noisy, projected) predict for
// independent columns, n p_a(row) p_b(col), less what noise alone is
// expected to add to that distance: the 1-way noise's (one_stddev a 1-way
// cell: sqrt(2 / pi) |n d(p_a p_b)| a cell, first order, a group's noisy mass
// one_stddev sqrt(its nonzero cells)), and `noise_weight` x the pair's own
// measurement noise's, sqrt(2 / pi) target_stddev a cell (MST's term at 1:
// it favours few cells). What is subtracted reads only released values and
// public stddevs, so one record still moves a score by at most 1.
std::vector<double> IndependenceScores(const std::vector<ColumnMarginal>& one,
                                       const std::vector<ColumnMarginal>& all, double n,
                                       double one_stddev, double target_stddev,
                                       double noise_weight);

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

// The first token id of every column of `rec` into *first ([columns], -1:
// none; *ids is scratch for the encoding); false when the record does not encode.
bool FirstTokens(const FieldTokenizer& tok, const std::vector<std::string>& rec,
                 std::vector<int32_t>* ids, std::vector<int32_t>* first);
// The cell of `m` a record with first tokens `first` ([columns]) falls in (-1: none).
int64_t CellOf(const ColumnMarginal& m, const int32_t* first);
// Adds one record, of first tokens `first` ([columns], FirstTokens), to the
// counts of every cell it falls in: CountMarginals' and MeasureModel's one count.
void AddRecord(const int32_t* first, std::vector<ColumnMarginal>* cells);

}  // namespace ds
