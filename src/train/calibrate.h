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
// Targets: exact training marginals (no DP), or the same counts with Gaussian
// noise (NoisyMarginals) under --dp, where they are one Gaussian mechanism of
// L2 sensitivity sqrt(columns) composed with DP-SGD's accounting
// (privacy/dp_config.h, DpSettings::marginal_share). The calibration itself
// reads only the model and the targets: free, privacy-wise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/network.h"
#include "privacy/secure_noise.h"
#include "tokenize/field_tokenizer.h"
#include "util/status.h"

namespace ds {

struct ColumnMarginal {
  int column = 0;         // column index
  int lo = 0, hi = 0;     // first-token ids [lo, hi)
  std::vector<double> p;  // [hi - lo]: counts, or a distribution (sums to 1)
};

// The cells of every calibrated column (categorical, integer, decimal,
// datetime), from the tokenizer alone (every cell, whatever the data), with
// zero counts.
std::vector<ColumnMarginal> MarginalCells(const FieldTokenizer& tok);
// Adds each record's first tokens to the counts (records that do not encode
// are skipped and counted in *skipped when not null).
void CountMarginals(const FieldTokenizer& tok, const std::vector<std::vector<std::string>>& records,
                    std::vector<ColumnMarginal>* cells, int64_t* skipped = nullptr);
// Gaussian mechanism: adds N(0, (noise_multiplier sqrt(K))^2) to every count
// (K = cells.size(), the L2 sensitivity of the K histograms under add/remove
// of one record), then clamps at 0. Call Normalize after.
void AddMarginalNoise(std::vector<ColumnMarginal>* cells, double noise_multiplier,
                      SecureGaussian* noise);
// Counts -> distributions (all zero -> uniform).
void Normalize(std::vector<ColumnMarginal>* cells);

struct CalibrateOptions {
  int64_t samples = 4000;  // records generated per iteration
  int iterations = 4;
  uint64_t seed = 1;
  double temperature = 1.0;
  static constexpr double kMaxStep = 2.0;
};
struct CalibrateReport {
  double tvd_before = 0, tvd_after = 0;  // mean total variation distance to the targets
  std::string Describe() const;
};

// Adjusts params' dense.b (layout of `spec`) in place. `targets` are
// distributions over MarginalCells(tok) cells. The last measurement is the
// model before the last update: tvd_after comes from one more generation.
Status Calibrate(const FieldTokenizer& tok, const std::vector<std::string>& header, char delimiter,
                 const NetworkSpec& spec, float* params, const std::vector<ColumnMarginal>& targets,
                 const CalibrateOptions& options, CalibrateReport* report);

}  // namespace ds
