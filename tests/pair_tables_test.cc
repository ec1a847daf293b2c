// Tests for the calibration's 2-way pair correction tables
// (generate/pair_correction.h, train/calibrate.h): the filter's closed-form
// effect on the logits, fitting a known conditional on a zero network,
// parent choice, the file's round trip and its corruption checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "dp_vectors.h"
#include "generate/field_filter.h"
#include "generate/pair_correction.h"
#include "model/network.h"
#include "model/tensor_file.h"
#include "util/bytes.h"
#include "privacy/dp_config.h"
#include "privacy/rdp_accountant.h"
#include "schema/public_schema.h"
#include "tokenize/field_tokenizer.h"
#include "privacy/exponential_mechanism.h"
#include "train/calibrate.h"

namespace ds {
namespace {

using Json = nlohmann::json;

std::unique_ptr<FieldTokenizer> TwoColumns() {
  auto s = ParsePublicSchema(Json::parse(R"({"columns": [
    {"name": "x", "type": "categorical", "values": ["a", "b"]},
    {"name": "n", "type": "integer", "min": 0, "max": 9},
    {"name": "y", "type": "categorical", "values": ["u", "v", "w"]}]})"), "s");
  EXPECT_TRUE(s.ok());
  auto tok = FieldTokenizer::FromSchema(*s);
  EXPECT_TRUE(tok.ok());
  return std::move(tok).value();
}

// A one-layer network of 4 units over tok's vocabulary (the tests zero its weights).
NetworkSpec TinySpec(const FieldTokenizer& tok) {
  NetworkSpec spec;
  spec.vocab_size = tok.vocab_size();
  spec.embedding_dim = 4;
  spec.rnn_units = 4;
  spec.num_layers = 1;
  return spec;
}

// A table for child y (column 2) given parent x (column 0): 2 x 3 cells.
PairTable XyTable(const FieldTokenizer& tok) {
  PairTable t;
  t.child = 2;
  t.parent = 0;
  FirstTokenRange(tok, 2, &t.lo, &t.hi);
  FirstTokenRange(tok, 0, &t.plo, &t.phi);
  EXPECT_EQ(t.phi - t.plo, 2);
  EXPECT_EQ(t.hi - t.lo, 3);
  t.rows = 2;
  t.cols = 3;
  t.w = {1.0f, -2.0f, 0.5f, 3.0f, 0.0f, -1.0f};
  return t;
}

TEST(PairTables, FilterAddsTheParentsRowAtTheChildsFirstToken) {
  auto tok = TwoColumns();
  auto pairs = std::make_shared<PairTables>();
  pairs->tables.push_back(XyTable(*tok));
  ASSERT_TRUE(pairs->Check(*tok, "t").ok());
  const PairTable& t = pairs->tables[0];
  auto plain = NewFieldFilter(*tok, 2);
  auto corr = NewFieldFilter(*tok, 2, pairs);
  const int V = tok->vocab_size();
  std::vector<int32_t> ids;
  for (const char* x : {"a", "b"}) {
    ids.clear();
    ASSERT_TRUE(tok->EncodeRecord({x, "7", "u"}, &ids).ok());
    for (TokenFilter* f : {plain.get(), corr.get()}) {
      f->Begin(1);
      f->Accept(1, tok->end_id());
    }
    // Up to y's first token, both filters see the same logits.
    size_t i = 0;
    for (;; ++i) {
      std::vector<float> l0(size_t(V), 0.0f), l1(size_t(V), 0.0f);
      plain->Mask(1, l0.data());
      corr->Mask(1, l1.data());
      if (ids[i] >= t.lo && ids[i] < t.hi) {
        const int row = x[0] == 'a' ? 0 : 1;
        for (int id = t.lo; id < t.hi; ++id)
          EXPECT_FLOAT_EQ(l1[size_t(id)] - l0[size_t(id)], t.w[size_t(row * 3 + id - t.lo)]) << x;
        for (int id = 0; id < V; ++id)
          if (id < t.lo || id >= t.hi) {
            EXPECT_EQ(l1[size_t(id)], l0[size_t(id)]);
          }
        break;
      }
      EXPECT_EQ(l0, l1) << "position " << i;
      plain->Accept(1, ids[i]);
      corr->Accept(1, ids[i]);
    }
    EXPECT_LT(i, ids.size());
  }
}

TEST(PairTables, CalibrateFitsAConditionalOnAZeroNetwork) {
  // dense.w = 0: every position's distribution is softmax(dense.b) over its
  // legal ids, so y does not depend on x until the table makes it: the fitted
  // rows must approach log t(y | x) up to a constant per row.
  auto tok = TwoColumns();
  const NetworkSpec spec = TinySpec(*tok);
  std::vector<float> params(ParamLayout::For(spec).total, 0.0f);
  std::vector<ColumnMarginal> one = MarginalCells(*tok);
  ASSERT_EQ(one.size(), 3u);  // x, n, y
  std::vector<ColumnMarginal> target = WithParents(one, {{}, {}, {0}}, 10);
  ASSERT_EQ(target[2].parent, 0);
  ASSERT_EQ(target[2].rows, 2);
  ASSERT_EQ(target[2].cols, 3);
  std::vector<std::vector<std::string>> recs;
  // x=a: y = u 80%, v 10%, w 10%; x=b: u 10%, v 30%, w 60%.
  for (int i = 0; i < 8; ++i) recs.push_back({"a", "1", "u"});
  recs.push_back({"a", "1", "v"});
  recs.push_back({"a", "2", "w"});
  recs.push_back({"b", "3", "u"});
  for (int i = 0; i < 3; ++i) recs.push_back({"b", "3", "v"});
  for (int i = 0; i < 6; ++i) recs.push_back({"b", "4", "w"});
  CountMarginals(*tok, recs, &target);
  EXPECT_EQ(target[2].p, (std::vector<double>{8, 1, 1, 1, 3, 6}));
  Normalize(&target);
  CalibrateOptions o;
  o.samples = 6000;
  o.iterations = 4;
  o.pseudo = 0;
  CalibrateReport rep;
  PairTables pairs;
  ASSERT_TRUE(Calibrate(*tok, {"x", "n", "y"}, ',', spec, params.data(), target, o, &rep, &pairs).ok());
  EXPECT_EQ(rep.pairs, 1);
  ASSERT_EQ(pairs.tables.size(), 1u);
  const std::vector<float>& w = pairs.tables[0].w;
  EXPECT_NEAR(w[0] - w[1], std::log(8.0), 0.25);
  EXPECT_NEAR(w[0] - w[2], std::log(8.0), 0.25);
  EXPECT_NEAR(w[5] - w[3], std::log(6.0), 0.25);
  EXPECT_NEAR(w[4] - w[3], std::log(3.0), 0.25);
  EXPECT_GT(rep.tvd_before, 0.15);
  EXPECT_LT(rep.tvd_after, 0.03);
}

// The targets are what a zero network already generates (uniform n): every step
// chases sampling noise of a small sample, and the state that measured best is
// kept; where that is the model as trained, its biases are untouched.
TEST(PairTables, CalibrateKeepsTheMeasuredBestState) {
  auto tok = TwoColumns();
  const NetworkSpec spec = TinySpec(*tok);
  std::vector<ColumnMarginal> one = MarginalCells(*tok);
  ColumnMarginal n = one[1];
  std::fill(n.p.begin(), n.p.end(), 0.1);
  int kept_untrained = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    std::vector<float> params(ParamLayout::For(spec).total, 0.0f);
    CalibrateOptions o;
    o.samples = 60;
    o.iterations = 4;
    o.seed = seed;
    CalibrateReport rep;
    PairTables pairs;
    ASSERT_TRUE(Calibrate(*tok, {"x", "n", "y"}, ',', spec, params.data(), {n}, o, &rep, &pairs).ok());
    EXPECT_LE(rep.tvd_after, rep.tvd_before) << seed;
    EXPECT_GE(rep.kept_iteration, 0);
    EXPECT_LE(rep.kept_iteration, o.iterations);
    if (rep.kept_iteration != 0) continue;
    ++kept_untrained;
    EXPECT_TRUE(std::all_of(params.begin(), params.end(), [](float v) { return v == 0.0f; }));
    // Measured again with iteration 0's sample: the same distance.
    o.iterations = 0;
    CalibrateReport again;
    ASSERT_TRUE(Calibrate(*tok, {"x", "n", "y"}, ',', spec, params.data(), {n}, o, &again, &pairs).ok());
    EXPECT_DOUBLE_EQ(again.tvd_after, rep.tvd_after);
  }
  EXPECT_GT(kept_untrained, 0);  // some seeds measure no step as an improvement
}

// Calibrates the zero network of TwoColumns (4 iterations, `samples` records a
// measurement) toward a flat marginal of n: what that network generates, so
// every step chases noise and some measure no better.
CalibrateReport CalibrateTowardNoise(uint64_t seed, int samples, bool stop_when_worse) {
  auto tok = TwoColumns();
  const NetworkSpec spec = TinySpec(*tok);
  ColumnMarginal n = MarginalCells(*tok)[1];
  std::fill(n.p.begin(), n.p.end(), 0.1);
  CalibrateOptions o;
  o.samples = samples;
  o.iterations = 4;
  o.seed = seed;
  o.stop_when_worse = stop_when_worse;
  CalibrateReport rep;
  PairTables pairs;
  std::vector<float> params(ParamLayout::For(spec).total, 0.0f);
  EXPECT_TRUE(Calibrate(*tok, {"x", "n", "y"}, ',', spec, params.data(), {n}, o, &rep, &pairs).ok());
  return rep;
}

// stop_when_worse: the run ends at the first full-size measurement no closer
// than the best before it (fewer measurements, the same kept state as the run
// without the stop up to there); every measurement before that one was an
// improvement. 60 records: under the ramp's 250, so every measurement is full.
TEST(PairTables, CalibrateStopsAtTheFirstMeasurementNoBetter) {
  const int iterations = 4;
  int stopped = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const CalibrateReport rep = CalibrateTowardNoise(seed, 60, true);
    const CalibrateReport all = CalibrateTowardNoise(seed, 60, false);
    ASSERT_EQ(all.tvd.size(), size_t(iterations + 1));
    ASSERT_GE(rep.tvd.size(), 1u);
    const size_t last = rep.tvd.size() - 1;
    for (size_t i = 1; i < last; ++i) EXPECT_LT(rep.tvd[i], rep.tvd[i - 1]) << seed;
    // The measurements are those of the full run up to the stop.
    for (size_t i = 0; i <= last; ++i) EXPECT_DOUBLE_EQ(rep.tvd[i], all.tvd[i]) << seed;
    if (last < size_t(iterations)) {
      ++stopped;
      EXPECT_GE(rep.tvd[last], rep.tvd_after) << seed;
      EXPECT_EQ(rep.kept_iteration, int(last) - 1) << seed;
    }
  }
  EXPECT_GT(stopped, 0);  // some seeds measure a step as no improvement and stop there
}

// Under the ramp (1000 records: 250, 250, 500, 1000, 1000) a smaller early
// measurement no better does not stop the run: only the full-size ones can.
TEST(PairTables, CalibrateDoesNotStopOnTheRampsSmallMeasurements) {
  const int iterations = 4, samples = 1000;
  int early_worse = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const CalibrateReport rep = CalibrateTowardNoise(seed, samples, true);
    ASSERT_GE(rep.tvd.size(), size_t(iterations));  // at most the last measurement left out
    for (size_t i = 0; i + 1 < rep.samples.size(); ++i)
      if (rep.samples[i + 1] < samples && rep.tvd[i + 1] >= rep.tvd[0]) ++early_worse;
  }
  EXPECT_GT(early_worse, 0);  // the case the rule is for: a small measurement no better
}

TEST(PairTables, CalibrationSamplesShrinkForLongRecordsAndFewRecords) {
  EXPECT_EQ(CalibrationSamples(5634 * 30, 5634), 4000);   // telco: 30 tokens a record
  EXPECT_EQ(CalibrationSamples(455 * 141, 455), 4000);    // breast_cancer: 141, 12 x 455 > 4000
  EXPECT_EQ(CalibrationSamples(334 * 30, 334), 4000);     // 12 x 334 = 4008: all
  EXPECT_EQ(CalibrationSamples(142 * 40, 142), 1704);     // wine: 12 x 142 records
  EXPECT_EQ(CalibrationSamples(84 * 40, 84), 1008);       // stocks: 12 x 84
  EXPECT_EQ(CalibrationSamples(50 * 10, 50), 1000);       // never under 1000
  EXPECT_EQ(CalibrationSamples(8000 * 1500, 8000), 1333); // ~1,500 tokens a record
  EXPECT_EQ(CalibrationSamples(80 * 1500, 80), 1000);     // santander: the floor
  EXPECT_EQ(CalibrationSamples(10 * 5000, 10), 1000);     // long text: never under 1000
  EXPECT_EQ(CalibrationSamples(0, 0), 4000);              // no records: the default
}

// The early measurements use fewer records; the last two (the kept state is
// chosen among them) all; never more than `samples`.
TEST(PairTables, MeasureSizeRampsUpToTheLastTwo) {
  CalibrateOptions o;
  o.samples = 4000;
  o.iterations = 4;
  std::vector<int64_t> got;
  for (int it = 0; it <= o.iterations; ++it) got.push_back(MeasureSize(o, it));
  EXPECT_EQ(got, (std::vector<int64_t>{1000, 1000, 2000, 4000, 4000}));
  o.samples = 600;  // at least 250
  EXPECT_EQ(MeasureSize(o, 0), 250);
  o.samples = 60;  // fewer than 250: all of them
  EXPECT_EQ(MeasureSize(o, 0), 60);
  o.samples = 4000;
  o.iterations = 0;  // the one measurement is the last
  EXPECT_EQ(MeasureSize(o, 0), 4000);
  o.iterations = 4;
  o.ramp = false;
  EXPECT_EQ(MeasureSize(o, 1), 4000);
}

// MeasureModel's count-mode rounds count exactly GenerateForCalibration's
// records (the first `samples` valid ones of the same stream).
TEST(PairTables, MeasureModelCountsTheCalibrationRecords) {
  auto tok = TwoColumns();
  const NetworkSpec spec = TinySpec(*tok);
  std::vector<float> params(ParamLayout::For(spec).total, 0.0f);
  for (size_t i = 0; i < params.size(); ++i) params[i] = 0.05f * float(int(i % 7) - 3);
  std::vector<ColumnMarginal> one = MarginalCells(*tok);
  std::vector<ColumnMarginal> cells = WithParents(one, {{}, {}, {0}}, 10);
  CalibrateOptions o;
  o.samples = 777;
  auto recs = GenerateForCalibration(*tok, {"x", "n", "y"}, ',', spec, params.data(), o, 31);
  ASSERT_TRUE(recs.ok());
  ASSERT_EQ(recs->size(), 777u);
  std::vector<ColumnMarginal> want = cells;
  CountMarginals(*tok, *recs, &want);
  std::vector<ColumnMarginal> got = cells;
  for (ColumnMarginal& m : got) std::fill(m.p.begin(), m.p.end(), 5.0);  // overwritten
  MeasureStats ms;
  ASSERT_TRUE(MeasureModel(*tok, {"x", "n", "y"}, ',', spec, params.data(), o, 31, nullptr, &got, &ms).ok());
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k].p, want[k].p) << k;
  EXPECT_GE(ms.attempts, 777);
  EXPECT_EQ(ms.attempts_here, ms.attempts);
  EXPECT_EQ(ms.ranks, 1);
  o.samples = 500;  // another stream: other counts
  ASSERT_TRUE(MeasureModel(*tok, {"x", "n", "y"}, ',', spec, params.data(), o, 32, nullptr, &got, &ms).ok());
  double total = 0;
  for (double v : got[0].p) total += v;
  EXPECT_EQ(total, 500.0);
}

// The generated values of column n (0..9) of a calibrated zero network: a count per value.
std::vector<double> CountsOfN(const FieldTokenizer& tok, const NetworkSpec& spec, const float* params,
                              const CalibrateOptions& o) {
  auto recs = GenerateForCalibration(tok, {"x", "n", "y"}, ',', spec, params, o, 99);
  EXPECT_TRUE(recs.ok());
  std::vector<double> count(10, 0.0);
  if (recs.ok())
    for (const auto& r : *recs) count[size_t(std::stoi(r[1]))] += 1;
  return count;
}

// A 1-way cell with groups (`within`) fits each id's share inside its group
// and leaves the groups' totals to the tables (on a zero network n starts
// uniform over its 10 ids): 1 takes group 0, 7 takes group 1, still half each.
TEST(PairTables, CalibrateFitsTheShapeWithinGroups) {
  auto tok = TwoColumns();
  const NetworkSpec spec = TinySpec(*tok);
  std::vector<float> params(ParamLayout::For(spec).total, 0.0f);
  std::vector<ColumnMarginal> one = MarginalCells(*tok);
  ASSERT_EQ(one[1].hi - one[1].lo, 10);
  ColumnMarginal n = one[1];
  n.within = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
  n.p = {0, 0.3, 0, 0, 0, 0, 0, 0.7, 0, 0};
  CalibrateOptions o;
  o.samples = 3000;
  CalibrateReport rep;
  PairTables pairs;
  ASSERT_TRUE(Calibrate(*tok, {"x", "n", "y"}, ',', spec, params.data(), {n}, o, &rep, &pairs).ok());
  EXPECT_TRUE(pairs.tables.empty());
  const std::vector<double> count = CountsOfN(*tok, spec, params.data(), o);
  const double g0 = count[0] + count[1] + count[2] + count[3] + count[4];
  const double g1 = count[5] + count[6] + count[7] + count[8] + count[9];
  EXPECT_GT(count[1] / g0, 0.9);
  EXPECT_GT(count[7] / g1, 0.9);
  // The groups' totals are left alone (a plain 1-way step would move them to 0.3 / 0.7).
  EXPECT_NEAR(g0 / (g0 + g1), 0.5, 0.05);
}

// Ids whose within-group target is 0 (trimmed, dead, projected to 0) are
// forbidden: the fit moves only the ids a measurement draws, so an id the
// network gives ~3e-4 (about one draw per measurement) kept most of it.
TEST(PairTables, CalibrateForbidsIdsOfNoRecords) {
  auto tok = TwoColumns();
  const NetworkSpec spec = TinySpec(*tok);
  std::vector<float> params(ParamLayout::For(spec).total, 0.0f);
  float* bias = params.data() + ParamLayout::For(spec).offset("dense.b");
  std::vector<ColumnMarginal> one = MarginalCells(*tok);
  ColumnMarginal n = one[1];
  bias[n.lo + 9] = -8;  // value 9: ~3e-4 of n's first tokens
  n.within = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
  n.p = {0.1, 0.2, 0.1, 0.05, 0.05, 0.1, 0.2, 0.2, 0, 0};
  CalibrateOptions o;
  o.samples = 3000;
  CalibrateReport rep;
  PairTables pairs;
  ASSERT_TRUE(Calibrate(*tok, {"x", "n", "y"}, ',', spec, params.data(), {n}, o, &rep, &pairs).ok());
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(bias[n.lo + i] == CalibrateOptions::kForbiddenBias, n.p[size_t(i)] == 0) << i;
  const std::vector<double> count = CountsOfN(*tok, spec, params.data(), o);
  EXPECT_EQ(count[8], 0);
  EXPECT_EQ(count[9], 0);
  EXPECT_GT(count[7], count[5]);  // the shape inside the group still fitted (0.2 vs 0.1)
}

// The bins outside the run around the largest one are noise; the missing
// spelling (before `start`) stays.
TEST(PairTables, KeepContiguousDropsFarCells) {
  std::vector<double> p = {5, 0, 9, 0, 20, 30, 15, 0, 8, 1};
  KeepContiguous(&p, 1, 5);
  EXPECT_EQ(p, (std::vector<double>{5, 0, 0, 0, 20, 30, 15, 0, 0, 0}));
  std::vector<double> two = {0, 40, 0, 4, 3, 30, 9, 0};  // two modes, each with its run
  KeepContiguous(&two, 0, 5);
  EXPECT_EQ(two, (std::vector<double>{0, 40, 0, 0, 0, 30, 9, 0}));
  std::vector<double> low = {1, 2, 3};
  KeepContiguous(&low, 0, 5);  // nothing above the threshold: kept
  EXPECT_EQ(low, (std::vector<double>{1, 2, 3}));
}

// A group whose cells were all trimmed takes the untrimmed shape; a group
// with mass keeps its trimmed cells (zeros included).
TEST(PairTables, FillEmptyGroupsTakesTheUntrimmedShape) {
  std::vector<double> p = {0, 5, 0, 0, 0, 7};
  FillEmptyGroups({1, 4, 6, 2, 3, 8}, {0, 1, 1, 2, 2, 3}, &p);
  EXPECT_EQ(p, (std::vector<double>{1, 5, 0, 2, 3, 7}));
}

TEST(PairTables, ChooseParentsFindsTheDependentColumn) {
  auto tok = TwoColumns();
  std::vector<ColumnMarginal> one = MarginalCells(*tok);
  std::vector<std::vector<std::string>> recs;
  for (int i = 0; i < 400; ++i) {
    const bool a = i % 2 == 0;
    recs.push_back({a ? "a" : "b", std::to_string(i % 7), a ? "u" : (i % 4 == 1 ? "v" : "w")});
  }
  std::vector<ColumnMarginal> all = AllPairs(one, 10);
  ASSERT_EQ(all.size(), 3u);  // (x, n), (x, y), (n, y)
  EXPECT_EQ(all[1].column, 2);
  EXPECT_EQ(all[1].parent, 0);
  CountMarginals(*tok, recs, &all);
  using P = std::vector<std::vector<int>>;
  EXPECT_EQ(ChooseParents(one, all, 0.0), (P{{}, {}, {0}}));  // y depends on x, not on n
  // Two per column: n's dependence on y's parent is below the threshold.
  EXPECT_EQ(ChooseParents(one, all, 0.0, 2), (P{{}, {}, {0}}));
  // Noise large against the counts: the bias term keeps every column 1-way.
  EXPECT_EQ(ChooseParents(one, all, 1000.0), (P{{}, {}, {}}));
}

// x and y dependent (a: u 30, v 10; b: u 10, v 50), n independent of both
// (0 and 1 alike in every (x, y) cell): the exponential mechanism's scores,
// AllPairs order (x, n), (x, y), (n, y).
TEST(PairTables, PairScoresAreTheL1DistanceToIndependence) {
  auto tok = TwoColumns();
  std::vector<std::vector<std::string>> recs;
  auto add = [&](const char* x, const char* y, int count) {
    for (int i = 0; i < count; ++i) recs.push_back({x, std::to_string(i % 2), y});
  };
  add("a", "u", 30), add("a", "v", 10), add("b", "u", 10), add("b", "v", 50);
  std::vector<ColumnMarginal> one = MarginalCells(*tok);
  CountMarginals(*tok, recs, &one);
  std::vector<ColumnMarginal> all = AllPairs(MarginalCells(*tok), 10);
  CountMarginals(*tok, recs, &all);
  ASSERT_EQ(all.size(), 3u);
  ASSERT_EQ(all[1].rows, 2);
  ASSERT_EQ(all[1].cols, 3);  // u, v, w (no records)
  // Exact 1-way histograms, no noise: x-y's counts against 100 (.4, .6)' (.4, .6, 0).
  std::vector<double> s = IndependenceScores(one, all, 100, 0, 0, 0);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_NEAR(s[0], 0, 1e-9);
  EXPECT_NEAR(s[1], 14 + 14 + 14 + 14, 1e-9);
  EXPECT_NEAR(s[2], 0, 1e-9);
  // x's released histogram reads 50 / 50: the independent x-n now scores
  // |20 - 25| on each of its four nonzero cells.
  std::vector<ColumnMarginal> skewed = one;
  skewed[0].p = {50, 50};
  s = IndependenceScores(skewed, all, 100, 0, 0, 0);
  EXPECT_NEAR(s[0], 20, 1e-9);
  EXPECT_NEAR(s[1], 10 + 20 + 10 + 20, 1e-9);
  // The 1-way noise (stddev 2 a cell, one cell per group of x and y; w's
  // empty group counts as one): sqrt(2 / pi) sum over cells of
  // hypot(sd pb, pa sd); and the pair's own noise at weight 1/2 (stddev 3):
  // sqrt(2 / pi) 3 / 2 a cell, 6 cells.
  const double k = std::sqrt(2 / std::numbers::pi);
  const double one_way = k * 2 * (std::hypot(.4, .4) + 2 * std::hypot(.4, .6) + std::hypot(.6, .6) + .4 + .6);
  s = IndependenceScores(one, all, 100, 2, 3, 0.5);
  EXPECT_NEAR(s[1], 56 - one_way - k * 1.5 * 6, 1e-9);
  // One record moves the scores by at most 1 (what is subtracted reads the release only).
  std::vector<ColumnMarginal> more = AllPairs(MarginalCells(*tok), 10);
  recs.push_back({"a", "7", "w"});
  CountMarginals(*tok, recs, &more);
  const std::vector<double> s2 = IndependenceScores(one, more, 100, 2, 3, 0.5);
  for (size_t i = 0; i < s.size(); ++i) EXPECT_LE(std::fabs(s2[i] - s[i]), 1 + 1e-9) << i;
}

TEST(PairTables, RoundTripAndCorruption) {
  auto tok = TwoColumns();
  PairTables pairs;
  pairs.tables.push_back(XyTable(*tok));
  const std::string bytes = pairs.Serialize();
  auto back = PairTables::Parse(bytes, "p.bin");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ((*back)->tables.size(), 1u);
  EXPECT_EQ((*back)->tables[0].w, pairs.tables[0].w);
  EXPECT_EQ((*back)->Serialize(), bytes);
  EXPECT_TRUE((*back)->Check(*tok, "p.bin").ok());
  // Any flipped byte: refused (checksum or header).
  for (size_t i = 0; i < bytes.size(); i += 7) {
    std::string bad = bytes;
    bad[i] = char(bad[i] ^ 0x5a);
    EXPECT_FALSE(PairTables::Parse(bad, "p.bin").ok()) << "byte " << i;
  }
  EXPECT_FALSE(PairTables::Parse(bytes.substr(0, bytes.size() - 5), "p.bin").ok());
  // Tables that do not fit the tokenizer: refused by Check.
  PairTables other = pairs;
  other.tables[0].hi += 1;
  EXPECT_FALSE(other.Check(*tok, "p.bin").ok());
  other = pairs;
  other.tables[0].parent = 2;  // not before the child
  EXPECT_FALSE(other.Check(*tok, "p.bin").ok());
  other = pairs;
  other.tables[0].child = 7;
  EXPECT_FALSE(other.Check(*tok, "p.bin").ok());
  // A non-finite weight with a valid checksum: refused by Parse.
  other = pairs;
  other.tables[0].w[1] = NAN;
  auto r = PairTables::Parse(other.Serialize(), "p.bin");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("weight 2"), std::string::npos) << r.status().message();
}

TEST(PairTables, MassGroupsFollowTheData) {
  // 1 missing spelling + 40 bins, the data in bins 20..29 only, a point mass at 25.
  std::vector<double> c(41, 0.0);
  for (int i = 20; i < 30; ++i) c[size_t(i)] = 10;
  c[25] = 60;
  const std::vector<int32_t> g = MassGroups(c, 5);
  ASSERT_EQ(g.size(), c.size());
  EXPECT_EQ(*std::max_element(g.begin(), g.end()), 4);  // 5 groups
  std::vector<double> mass(5, 0.0);
  for (size_t i = 0; i < c.size(); ++i) mass[size_t(g[i])] += c[i];
  EXPECT_EQ(mass[size_t(g[25])], 60);  // the point mass alone
  for (double m : mass) EXPECT_GE(m, 20) << "every group holds data";
  for (int i = 1; i < 20; ++i) EXPECT_EQ(g[size_t(i)], g[0]);  // the empty low bins: one group
  // Large categories each alone, the rest shared; never more than asked.
  const std::vector<int32_t> cat = MassGroups({50, 1, 1, 40, 1, 1}, 3);
  EXPECT_EQ(cat, (std::vector<int32_t>{0, 1, 1, 2, 1, 1}));
  EXPECT_EQ(MassGroups({0, 0, 0, 0}, 2), (std::vector<int32_t>{0, 0, 1, 1}));
  EXPECT_EQ(MassGroups({5}, 4), (std::vector<int32_t>{0}));
}

TEST(PairTables, VersionOneFilesStillRead) {
  // A version-1 file (no map flags): the uniform groups.
  auto tok = TwoColumns();
  const PairTable t = XyTable(*tok);
  std::string b("DSPAIRT1", 8);
  PutU32(&b, 1);
  PutU32(&b, 1);
  for (int v : {t.child, t.parent, t.lo, t.hi, t.plo, t.phi, t.rows, t.cols}) PutU32(&b, uint32_t(v));
  for (float w : t.w) {
    uint32_t u;
    std::memcpy(&u, &w, 4);
    PutU32(&b, u);
  }
  PutU32(&b, Crc32(b.data(), b.size()));
  auto back = PairTables::Parse(b, "v1.bin");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ((*back)->tables[0].w, t.w);
  EXPECT_TRUE((*back)->tables[0].row_of.empty());
  EXPECT_TRUE((*back)->Check(*tok, "v1.bin").ok());
}

TEST(PairTables, ProjectionKeepsTheNoisyTotal) {
  // Clamping at 0 would keep 5 + 3 + 3 = 11 of a table whose noisy total is 1.
  std::vector<double> p = {3, 3, -5};
  ProjectToTotal(&p);
  EXPECT_EQ(p, (std::vector<double>{0.5, 0.5, 0}));
  p = {5, -1};
  ProjectToTotal(&p);
  EXPECT_EQ(p, (std::vector<double>{4, 0}));
  p = {2, 1, 0};  // nonnegative already: unchanged
  ProjectToTotal(&p);
  EXPECT_EQ(p, (std::vector<double>{2, 1, 0}));
  p = {-1, -2};  // total <= 0: clamped
  ProjectToTotal(&p);
  EXPECT_EQ(p, (std::vector<double>{0, 0}));
  // The sums in two orders differ by rounding (0.6000000000000001 and 0.6):
  // an empty cell stays exactly 0, not ~3e-17 (calibrate forbids the ids of
  // the cells that are exactly 0).
  p = {0.1, 0.2, 0.3, 0};
  ProjectToTotal(&p);
  EXPECT_EQ(p[3], 0.0);
  EXPECT_EQ(p[0], 0.1);
}

TEST(PairTables, MeasuredGroupsResolveANarrowRange) {
  // A wide public bound (0..1000, 32 bins of 31) and data in 400..520: the
  // uniform grouping (8 bins a group) puts it all in two groups; the
  // measured ones spread it over all four, and y's dependence on n shows.
  auto s = ParsePublicSchema(Json::parse(R"({"columns": [
    {"name": "n", "type": "integer", "min": 0, "max": 1000},
    {"name": "y", "type": "categorical", "values": ["lo", "hi"]}]})"), "s");
  ASSERT_TRUE(s.ok());
  auto tok = FieldTokenizer::FromSchema(*s);
  ASSERT_TRUE(tok.ok());
  std::vector<std::vector<std::string>> recs;
  for (int i = 0; i < 400; ++i) {
    const int n = 400 + (i * 37) % 121;
    recs.push_back({std::to_string(n), n < 460 ? "lo" : "hi"});
  }
  MeasureOptions o;
  o.pairs = 1;
  o.max_groups = 4;
  std::vector<ColumnMarginal> t;
  MeasureReport rep;
  ASSERT_TRUE(MeasureTargets(**tok, recs, o, nullptr, &t, &rep).ok());
  EXPECT_EQ(rep.groups, 4);
  EXPECT_EQ(rep.noisy_n, 400);
  ASSERT_EQ(t.size(), 2u);  // the 1-way n, then y given n (y has a parent: no 1-way)
  const ColumnMarginal& m = t[1];
  EXPECT_EQ(m.parent, 0);
  ASSERT_EQ(m.rows, 4);
  ASSERT_EQ(m.cols, 2);
  for (int r = 0; r < 4; ++r) EXPECT_GT(m.p[size_t(r * 2)] + m.p[size_t(r * 2 + 1)], 0.15) << r;
  // y is nearly a function of n's group (uniform groups of 8 bins: 0.67).
  double determined = 0;
  for (int r = 0; r < 4; ++r) determined += std::max(m.p[size_t(r * 2)], m.p[size_t(r * 2 + 1)]);
  EXPECT_GT(determined, 0.85);
  // The table carries the maps through the file.
  PairTables pt;
  pt.tables.push_back(m.Shape());
  ASSERT_TRUE(pt.Check(**tok, "p").ok());
  auto back = PairTables::Parse(pt.Serialize(), "p");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ((*back)->tables[0].row_of, m.row_of);
  EXPECT_EQ((*back)->tables[0].Row(m.plo + 14), m.row_of[14]);
  PairTables bad = pt;
  bad.tables[0].row_of[3] = 9;  // a group that does not exist
  EXPECT_FALSE(PairTables::Parse(bad.Serialize(), "p").ok());
  bad = pt;
  bad.tables[0].row_of.pop_back();
  EXPECT_FALSE(bad.Check(**tok, "p").ok());
}

}  // namespace
}  // namespace ds

namespace ds {
namespace {

// The three Gaussian measurements of the pair calibration (1-way at
// sigma_m / sqrt(f1), selection at sigma_m / sqrt(fs), targets at
// sigma_m / sqrt(1 - f1 - fs)) are charged as one
// Gaussian of multiplier sigma_m: against dp-accounting's composition of the
// three events (scripts/make_dp_composed_vectors.py, split_vectors.csv).
TEST(PairAccounting, TwoMeasurementsMatchDpAccounting) {
  const auto rows = ReadComposedVectors(std::string(DS_TEST_DATA) + "/privacy/split_vectors.csv");
  for (const auto& v : rows) {
    RdpAccountant charged;  // what the trainer accounts
    charged.AddSteps(v.q, v.sigma, v.steps);
    charged.AddGaussian(v.marginal_sigma);
    EXPECT_NEAR(charged.GetEpsilon(v.delta).epsilon, v.epsilon, 1e-9 * v.epsilon) << v.line;
    EXPECT_EQ(charged.GetEpsilon(v.delta).order, v.order) << v.line;
    for (int64_t n : {100, 1000, 100000}) {  // every split SharesFor makes
      const MeasureShares sh = SharesFor(n, v.marginal_sigma, 8);
      RdpAccountant spent;  // what the calibration releases
      spent.AddSteps(v.q, v.sigma, v.steps);
      spent.AddGaussian(sh.OneWayNoise(v.marginal_sigma));
      if (sh.exponential()) {  // each round: (eps^2 / 8)-zCDP = a Gaussian of multiplier 2 / eps
        for (int k = 0; k < sh.rounds; ++k) spent.AddGaussian(2.0 / sh.RoundEpsilon(v.marginal_sigma));
        spent.AddGaussian(sh.TargetNoise(v.marginal_sigma));
      } else if (sh.pairs()) {
        spent.AddGaussian(sh.SelectionNoise(v.marginal_sigma));
        spent.AddGaussian(sh.TargetNoise(v.marginal_sigma));
      }
      EXPECT_NEAR(spent.GetEpsilon(v.delta).epsilon, v.epsilon, 1e-9 * v.epsilon) << v.line << " n " << n;
    }

  }
  EXPECT_EQ(rows.size(), 5u);
  // The rule's three regimes (r = n / (sigma_m sqrt(28)) for 8 columns; no
  // pairs by the coarse 2 x 2 cell: n / 4 against the stddev of the 18 chosen
  // pairs at share 0.45, sigma_m sqrt(18 / 0.45)).
  EXPECT_FALSE(SharesFor(275, 5.0, 8).pairs());  // r = 10, 2.2 stddevs: 1-way only
  EXPECT_EQ(SharesFor(275, 5.0, 8).OneWayNoise(5.0), 5.0);
  EXPECT_EQ(SharesFor(275, 3.0, 8).one_way, 0.45);  // r = 17
  EXPECT_EQ(SharesFor(275, 1.2, 8).one_way, 0.2);  // r = 43
  EXPECT_EQ(SharesFor(275, 1.2, 8).rounds, 18);  // 2.5 x 7, within the 18 pairs 3 parents allow
  EXPECT_EQ(SharesFor(275, 1.2, 8, 1).rounds, 7);  // one parent each: a tree at most
  // Many columns: P grows as C^2, the chosen pairs as C. ames at epsilon 1
  // (74 columns, r = 11.8): 183 pairs of 7.6 stddevs a coarse cell, pairs on;
  // mpg at epsilon 1 (11 columns, r = 8.8): 25 pairs of 2.2, off.
  EXPECT_TRUE(SharesFor(2344, 3.813, 74).pairs());
  EXPECT_EQ(SharesFor(2344, 3.813, 74).one_way, 0.45);
  EXPECT_EQ(SharesFor(2344, 3.813, 74).rounds, 183);
  EXPECT_FALSE(SharesFor(187, 2.877, 11).pairs());
  // At the boundary: 3 stddevs exactly (n = 12 sigma_m sqrt(18 / 0.45)).
  const double at3 = 12.0 * std::sqrt(18 / 0.45);
  EXPECT_TRUE(SharesFor(int64_t(std::ceil(at3)), 1.0, 8).pairs());
  EXPECT_FALSE(SharesFor(int64_t(std::floor(at3)), 1.0, 8).pairs());
}

// The dp default split at epsilon 1 (most of it to the marginals) still
// composes to the target, and DP-SGD alone spends the smaller part.
TEST(PairAccounting, DefaultSplitMeetsTheTarget) {
  EXPECT_EQ(DefaultMarginalShare(1.0), 0.8);
  EXPECT_EQ(DefaultMarginalShare(4.0), 0.65);
  EXPECT_EQ(DefaultMarginalShare(10.0), 0.5);
  EXPECT_EQ(DefaultMarginalShare(10.0, 5634), 0.5);
  EXPECT_EQ(DefaultMarginalShare(4.0, 275), 0.8);  // few records: most to the marginals
  EXPECT_EQ(DefaultMarginalShare(10.0, 999), 0.8);
  DpSettings s;
  s.dp = true;
  s.dp_target_epsilon = 1.0;
  s.marginal_share = DefaultMarginalShare(1.0);
  auto p = PlanDp(s, 5634, 512, 15);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_NEAR(p->marginal_epsilon_alone, 0.8, 1e-3);
  EXPECT_LT(p->sgd_epsilon_alone, 0.8);
  RdpAccountant a;
  a.AddSteps(p->sampling_rate, p->noise_multiplier, p->steps);
  const MeasureShares sh = SharesFor(5634, p->marginal_noise_multiplier, 20);
  ASSERT_TRUE(sh.pairs());
  a.AddGaussian(sh.OneWayNoise(p->marginal_noise_multiplier));
  a.AddGaussian(sh.SelectionNoise(p->marginal_noise_multiplier));
  a.AddGaussian(sh.TargetNoise(p->marginal_noise_multiplier));
  EXPECT_LE(a.GetEpsilon(p->delta).epsilon, 1.0 + 1e-9);
  EXPECT_GT(a.GetEpsilon(p->delta).epsilon, 0.999);
}


// The exponential mechanism: the draw follows exp(eps score / 2), and the
// first C - 1 rounds of SelectPairs make a spanning tree.
TEST(PairAccounting, ExponentialPickFollowsItsWeights) {
  SecureGaussian noise = SecureGaussian::Deterministic(7);
  const std::vector<double> score = {0.0, 2.0, 4.0};  // eps 1: weights e^0, e^1, e^2
  std::vector<int> hits(3, 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++hits[ExponentialPick(score, 1.0, 1.0, &noise)];
  const double z = 1 + std::exp(1.0) + std::exp(2.0);
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(hits[size_t(k)] / double(n), std::exp(double(k)) / z, 0.015) << k;
  for (int i = 0; i < 1000; ++i) {
    const double u = noise.Uniform();
    ASSERT_TRUE(u >= 0 && u < 1);
  }
}

TEST(PairAccounting, SelectPairsBuildsATreeFirst) {
  SecureGaussian noise = SecureGaussian::Deterministic(3);
  // 4 columns, pairs (0,1) (0,2) (1,2) (0,3) (1,3) (2,3): (0,1) and (0,2) and
  // (1,2) score high, but after two of them the third closes a cycle.
  const std::vector<double> score = {100, 100, 100, 0, 0, 0};
  const auto p = SelectPairs(score, 4, 3, 3, 10.0, &noise);
  int edges = 0;
  for (const auto& ps : p) edges += int(ps.size());
  EXPECT_EQ(edges, 3);
  EXPECT_EQ(p[3].size(), 1u);  // column 3 joined by the third round despite its low scores
  EXPECT_NEAR(RoundEpsilon(2.0, 0.5, 4), std::sqrt(0.5) / 2.0, 1e-12);
  // Four more rounds: every pair the per-child limit allows.
  const auto all = SelectPairs(score, 4, 7, 3, 10.0, &noise);
  EXPECT_EQ(all[1].size() + all[2].size() + all[3].size(), 6u);
}

}  // namespace
}  // namespace ds

namespace ds {
namespace {

// skip_steady_last: where every measured step fell to at most 0.8 of the
// distance before it, the last step is kept without its measurement (one
// full-size measurement fewer). Here the steps reach the 4000-record
// measurement's noise floor by step 3: the full run measures step 4 as
// 0.0076 against 0.0073 and keeps step 3; the kept unmeasured step 4 measures,
// again, within 0.005 of that best (the cost of the rule: a state at the noise
// floor rather than the lowest noisy measurement).
TEST(PairTables, CalibrateKeepsASteadyLastStepUnmeasured) {
  auto tok = TwoColumns();
  const NetworkSpec spec = TinySpec(*tok);
  std::vector<ColumnMarginal> target = MarginalCells(*tok);
  std::vector<std::vector<std::string>> recs;
  for (int i = 0; i < 17; ++i) recs.push_back({"a", "1", "u"});
  recs.push_back({"b", "3", "v"});
  recs.push_back({"b", "4", "w"});
  recs.push_back({"a", "2", "w"});
  CountMarginals(*tok, recs, &target);
  Normalize(&target);
  auto run = [&](bool skip, int iterations, std::vector<float> params, CalibrateReport* rep) {
    CalibrateOptions o;
    o.samples = 4000;
    o.iterations = iterations;
    o.skip_steady_last = skip;
    o.seed = iterations == 0 ? 99 : 1;
    PairTables pairs;
    EXPECT_TRUE(Calibrate(*tok, {"x", "n", "y"}, ',', spec, params.data(), target, o, rep, &pairs).ok());
    return params;
  };
  const std::vector<float> zero(ParamLayout::For(spec).total, 0.0f);
  CalibrateReport all, skipped, again;
  const std::vector<float> p_all = run(false, 4, zero, &all);
  const std::vector<float> p_skip = run(true, 4, zero, &skipped);
  ASSERT_EQ(all.tvd.size(), 5u);
  for (size_t i = 1; i < 4; ++i) ASSERT_LE(all.tvd[i], 0.8 * all.tvd[i - 1]) << i;  // the case under test
  EXPECT_TRUE(all.measured_last);
  EXPECT_FALSE(skipped.measured_last);
  EXPECT_EQ(skipped.kept_iteration, 4);
  ASSERT_EQ(skipped.tvd.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(skipped.tvd[i], all.tvd[i]);
  EXPECT_EQ(std::vector<int64_t>(all.samples.begin(), all.samples.end() - 1), skipped.samples);
  EXPECT_NE(skipped.Describe().find("its step unmeasured"), std::string::npos);
  EXPECT_NE(p_skip, zero);
  run(false, 0, p_skip, &again);  // the kept state, measured on a fresh sample
  EXPECT_LT(again.tvd_after, all.tvd_after + 0.005);
  EXPECT_LT(again.tvd_after, 0.05 * all.tvd_before);
}


// A group the trim emptied is dead only without evidence: its noisy 1-way
// mass and the row or column sums of the pair tables it is in, averaged by
// inverse variance, not above z of their stddev. Categorical columns: none.
TEST(PairTables, DeadGroupsNeedNoEvidenceOfRecords) {
  ColumnMarginal cat;  // column 0: two categories, a group each
  cat.column = 0;
  cat.cols = 2;
  cat.p = {60, 40};
  ColumnMarginal num;  // column 1: six bins in three groups
  num.column = 1;
  num.cols = 6;
  num.p = {50, 50, 1, -1, 30, 2};
  std::vector<ColumnMarginal> raw = {cat, num};
  std::vector<ColumnMarginal> trimmed = raw;
  trimmed[1].p = {50, 50, 0, 0, 0, 0};
  const std::vector<std::vector<int32_t>> groups = {{0, 1}, {0, 0, 1, 1, 2, 2}};
  const std::vector<char> ordered = {0, 1};
  // 1-way only (stddev 5 a cell, 7.07 a group): group 1 (mass 0) is dead,
  // group 2 (mass 32 > 2 x 7.07) is not, group 0 kept its cells.
  auto dead = DeadGroups(raw, trimmed, groups, ordered, 5, {}, 0, 2);
  ASSERT_EQ(dead.size(), 2u);
  EXPECT_TRUE(dead[0].empty());
  EXPECT_EQ(dead[1], (std::vector<char>{0, 1, 0}));
  // A pair table (parent column 0, child column 1) holding 40 records of
  // group 1 in each row: column sum 80, stddev 5 sqrt(2); with the 1-way
  // mass 0 the mean is 40 against a stddev of 5: alive.
  ColumnMarginal pair;
  pair.column = 1;
  pair.parent = 0;
  pair.rows = 2;
  pair.cols = 3;
  pair.p = {30, 40, 0, 20, 40, 2};
  dead = DeadGroups(raw, trimmed, groups, ordered, 5, {pair}, 5, 2);
  EXPECT_EQ(dead[1], (std::vector<char>{0, 0, 0}));
  // The same table with no records there: dead again, and dropped from it.
  pair.p = {30, 1, 0, 20, -2, 2};
  dead = DeadGroups(raw, trimmed, groups, ordered, 5, {pair}, 5, 2);
  EXPECT_EQ(dead[1], (std::vector<char>{0, 1, 0}));
  std::vector<ColumnMarginal> pairs = {pair};
  DropDeadGroups(dead, raw, &pairs);
  EXPECT_EQ(pairs[0].p, (std::vector<double>{30, 0, 0, 20, 0, 2}));
  // A dead group is not filled from the untrimmed shape; an empty live one is.
  std::vector<double> p = {50, 50, 0, 0, 0, 0};
  FillEmptyGroups({50, 50, 1, 0, 30, 2}, groups[1], &p, dead[1]);
  EXPECT_EQ(p, (std::vector<double>{50, 50, 0, 0, 30, 2}));
}

}  // namespace
}  // namespace ds
