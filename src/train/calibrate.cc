#include "train/calibrate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>

#include "backend/registry.h"
#include "dist/comm.h"
#include "dist/profile.h"
#include "generate/field_filter.h"
#include "generate/generator.h"
#include "privacy/exponential_mechanism.h"
#include "schema/column_rules.h"

namespace ds {

namespace {
double MeanTvd(const std::vector<ColumnMarginal>& a, const std::vector<ColumnMarginal>& b) {
  double sum = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    double d = 0;
    for (size_t i = 0; i < a[k].p.size(); ++i) d += std::fabs(a[k].p[i] - b[k].p[i]);
    sum += 0.5 * d;
  }
  return a.empty() ? 0 : sum / double(a.size());
}

// One fitting step of a 2-way cell: the conditional log-ratio per group.
void PairStep(const ColumnMarginal& t, const ColumnMarginal& g, double pseudo, double e,
              double damping, PairTable* table) {
  auto cond = [&](const ColumnMarginal& m, std::vector<double>* out) {
    std::vector<double> row(size_t(m.rows), 0.0), col(size_t(m.cols), 0.0);
    for (int r = 0; r < m.rows; ++r)
      for (int c = 0; c < m.cols; ++c) {
        row[size_t(r)] += m.p[size_t(r * m.cols + c)];
        col[size_t(c)] += m.p[size_t(r * m.cols + c)];
      }
    out->resize(m.p.size());
    for (int r = 0; r < m.rows; ++r)
      for (int c = 0; c < m.cols; ++c)
        (*out)[size_t(r * m.cols + c)] =
            (m.p[size_t(r * m.cols + c)] + pseudo * col[size_t(c)]) / (row[size_t(r)] + pseudo);
  };
  std::vector<double> ct, cg;
  cond(t, &ct);
  cond(g, &cg);
  for (size_t i = 0; i < ct.size(); ++i) {
    const double step = std::log(ct[i] + e) - std::log(cg[i] + e);
    const double d = damping * std::clamp(step, -CalibrateOptions::kMaxStep, CalibrateOptions::kMaxStep);
    table->w[i] = std::clamp(table->w[i] + float(d), -PairTables::kMaxWeight, PairTables::kMaxWeight);
  }
}

// One fitting step of a 1-way cell with groups (`within`): each id's share of
// its group, the groups' totals left to the tables.
void WithinStep(const ColumnMarginal& t, const ColumnMarginal& g, double e, float* bias) {
  const int groups = t.within.empty() ? 0 : *std::max_element(t.within.begin(), t.within.end()) + 1;
  std::vector<double> tg(size_t(groups), 0.0), gg(size_t(groups), 0.0);
  for (size_t i = 0; i < t.p.size(); ++i) {
    tg[size_t(t.within[i])] += t.p[i];
    gg[size_t(t.within[i])] += g.p[i];
  }
  for (size_t i = 0; i < t.p.size(); ++i) {
    const int k = t.within[i];
    if (!(tg[size_t(k)] > 0) || !(gg[size_t(k)] > 0)) continue;
    const double step = std::log(t.p[i] / tg[size_t(k)] + e) - std::log(g.p[i] / gg[size_t(k)] + e);
    bias[size_t(t.lo) + i] += float(std::clamp(step, -CalibrateOptions::kMaxStep, CalibrateOptions::kMaxStep));
  }
}

}  // namespace

namespace {

GenerationModel CalibrationModel(const FieldTokenizer& tok, const std::vector<std::string>& header,
                                 char delimiter, const NetworkSpec& spec, const float* params,
                                 std::shared_ptr<const PairTables> pairs) {
  GenerationModel g;
  g.tokenizer = &tok;
  g.header = header;
  g.delimiter = delimiter;
  g.rules = ColumnRules::FieldCountOnly(header);
  g.make_backend = [&spec, params](int slots) {
    return MakeInferBackend(DeviceKind::kCpu, spec, params, slots);
  };
  g.make_filter = [&tok, pairs](int slots) -> Result<std::unique_ptr<TokenFilter>> {
    return NewFieldFilter(tok, slots, pairs);
  };
  return g;
}

// Every record of the run `go` in id order (valid or not) to `each`.
Status ForEachRecord(const GenerationModel& g, const GenerateOptions& go,
                     const std::function<void(const GeneratedRecord&)>& each) {
  DS_ASSIGN_OR_RETURN(auto gen, RecordGenerator::Create(g, go));
  GeneratedRecord r;
  while (true) {
    DS_ASSIGN_OR_RETURN(bool more, gen->Next(&r));
    if (!more) return Status::Ok();
    each(r);
  }
}

int64_t MaxInvalid(const CalibrateOptions& o) { return o.samples * 10 + 1000; }

}  // namespace

Result<std::vector<std::vector<std::string>>> GenerateForCalibration(
    const FieldTokenizer& tok, const std::vector<std::string>& header, char delimiter,
    const NetworkSpec& spec, const float* params, const CalibrateOptions& o, uint64_t seed,
    std::shared_ptr<const PairTables> pairs) {
  const GenerationModel g = CalibrationModel(tok, header, delimiter, spec, params, pairs);
  GenerateOptions go;
  go.num_lines = o.samples;
  go.seed = seed;
  go.temperature = o.temperature;
  go.max_invalid = MaxInvalid(o);
  std::vector<std::vector<std::string>> recs;
  DS_RETURN_IF_ERROR(ForEachRecord(g, go, [&recs](const GeneratedRecord& r) {
    if (r.valid) recs.push_back(r.fields);
  }));
  return recs;
}

namespace {

// One round of MeasureModel on this rank: attempts [lo, hi) of the stream.
// `first` gets the first tokens of each valid record (columns per record),
// `encoded` whether it encodes (FirstTokens); returns the invalid attempts.
Result<int64_t> SampleRange(const GenerationModel& g, const FieldTokenizer& tok,
                            const CalibrateOptions& o, uint64_t seed, uint64_t lo, uint64_t hi,
                            std::vector<int32_t>* first, std::vector<char>* encoded) {
  first->clear();
  encoded->clear();
  if (hi <= lo) return int64_t(0);
  GenerateOptions go;
  go.seed = seed;
  go.temperature = o.temperature;
  go.first_attempt = lo;
  go.end_attempt = hi;
  go.num_lines = int64_t(hi - lo);  // count mode: every attempt of the range
  go.max_invalid = go.num_lines;
  int64_t invalid = 0;
  std::vector<int32_t> ids, one;
  DS_RETURN_IF_ERROR(ForEachRecord(g, go, [&](const GeneratedRecord& r) {
    if (!r.valid) {
      ++invalid;
      return;
    }
    encoded->push_back(FirstTokens(tok, r.fields, &ids, &one) ? 1 : 0);
    first->insert(first->end(), one.begin(), one.end());
  }));
  return invalid;
}

// The integer counts of `got` and `skipped` summed over the ranks (exact:
// every rank's counts are whole numbers, summed as integers).
Status SumCounts(std::vector<ColumnMarginal>* got, int64_t* skipped) {
  std::vector<int64_t> counts;  // every cell of `got`, flattened, then the skipped
  for (const ColumnMarginal& m : *got)
    for (double v : m.p) counts.push_back(int64_t(v));
  counts.push_back(*skipped);
  DS_RETURN_IF_ERROR(dist::AllreduceSum(counts.data(), counts.size()));
  size_t at = 0;
  for (ColumnMarginal& m : *got)
    for (double& v : m.p) v = double(counts[at++]);
  *skipped = counts.back();
  return Status::Ok();
}

}  // namespace

Status MeasureModel(const FieldTokenizer& tok, const std::vector<std::string>& header,
                    char delimiter, const NetworkSpec& spec, const float* params,
                    const CalibrateOptions& o, uint64_t seed,
                    std::shared_ptr<const PairTables> pairs, std::vector<ColumnMarginal>* got,
                    MeasureStats* stats) {
  const GenerationModel g = CalibrationModel(tok, header, delimiter, spec, params, pairs);
  const bool spread = dist::Active() && dist::Size() > 1;
  const int ranks = spread ? dist::Size() : 1, rank = spread ? dist::Rank() : 0;
  const size_t columns = tok.columns().size();
  for (ColumnMarginal& m : *got) std::fill(m.p.begin(), m.p.end(), 0.0);
  int64_t valid = 0, invalid = 0, skipped = 0;
  uint64_t next = 0;
  std::vector<int32_t> first;  // [records of the range, columns]: SampleRange's first tokens
  std::vector<char> encoded;
  while (valid < o.samples) {
    if (invalid > MaxInvalid(o))
      return DS_ERR(kResourceExhausted, "calibrate: more than {} invalid records before {} valid ones",
                    MaxInvalid(o), o.samples);
    // The round's size depends only on the counts so far, never on the ranks.
    const double share = std::max(0.01, double(valid + 1) / double(valid + invalid + 1));
    uint64_t n = uint64_t(std::ceil(double(o.samples - valid) / share));
    if (next > 0) n = uint64_t(std::ceil(double(n) * 1.1)) + 16;
    const uint64_t lo = next + n * uint64_t(rank) / uint64_t(ranks);
    const uint64_t hi = next + n * uint64_t(rank + 1) / uint64_t(ranks);
    DS_ASSIGN_OR_RETURN(int64_t bad, SampleRange(g, tok, o, seed, lo, hi, &first, &encoded));
    std::vector<int64_t> per(size_t(2 * ranks), 0);  // valid, invalid of each rank's range
    per[size_t(2 * rank)] = int64_t(encoded.size());
    per[size_t(2 * rank + 1)] = bad;
    if (spread) DS_RETURN_IF_ERROR(dist::AllreduceSum(per.data(), per.size()));
    int64_t before = valid;  // valid records in id order before this rank's range
    for (int q = 0; q < rank; ++q) before += per[size_t(2 * q)];
    const int64_t take = std::clamp<int64_t>(o.samples - before, 0, per[size_t(2 * rank)]);
    for (int64_t k = 0; k < take; ++k) {
      if (!encoded[size_t(k)]) {
        ++skipped;
        continue;
      }
      AddRecord(first.data() + k * int64_t(columns), got);
    }
    for (int q = 0; q < ranks; ++q) {
      valid += per[size_t(2 * q)];
      invalid += per[size_t(2 * q + 1)];
    }
    next += n;
    stats->attempts_here += int64_t(hi - lo);
  }
  if (spread) DS_RETURN_IF_ERROR(SumCounts(got, &skipped));
  stats->attempts = int64_t(next);
  stats->skipped = skipped;
  stats->ranks = ranks;
  return Status::Ok();
}


std::string CalibrateReport::Describe() const {
  std::vector<std::string> each;
  for (double d : tvd) each.push_back(fmt::format("{:.4f}", d));
  const std::string spread =
      ranks > 1 ? fmt::format(", sampled over {} ranks ({} attempts on this one)", ranks, attempts_here)
                : "";
  return fmt::format(
      "calibrate: mean total variation distance of the {} marginals ({} of them 2-way) to the "
      "targets {:.4f} -> {:.4f} (iteration {} kept{}; measured {} with {} records{}; {:.1f}s, cpu {:.1f}s){}{}",
      cells, pairs, tvd_before, tvd_after, kept_iteration,
      measured_last ? "" : ", its step unmeasured after a steady fall", fmt::join(each, ", "),
      fmt::join(samples, ", "), spread, seconds, cpu_seconds,
      links.empty() ? "" : "; pairs: ", fmt::join(links, ", "));
}

int64_t CalibrationSamples(int64_t tokens, int64_t records) {
  const int64_t per_record = std::max<int64_t>(1, tokens / std::max<int64_t>(1, records));
  const int64_t by_records =
      records > 0 ? kCalibrateSamplesPerRecord * records : CalibrateOptions{}.samples;
  return std::clamp<int64_t>(std::min(kCalibrateTokens / per_record, by_records), 1000,
                             CalibrateOptions{}.samples);
}

namespace {

// One fitting step of every cell: a 2-way cell moves its table, a 1-way cell with
// groups its ids' shares within their groups, any other 1-way cell its ids' biases.
void CalibrationSteps(const std::vector<ColumnMarginal>& targets,
                      const std::vector<ColumnMarginal>& got, const std::vector<int>& table_of,
                      const std::vector<int>& per_child, const CalibrateOptions& o, double e,
                      float* bias, PairTables* tables) {
  for (size_t k = 0; k < got.size(); ++k) {
    const ColumnMarginal& t = targets[k];
    if (table_of[k] >= 0) {
      PairStep(t, got[k], o.pseudo, e, 1.0 / per_child[size_t(t.column)],
               &tables->tables[size_t(table_of[k])]);
      continue;
    }
    if (!t.within.empty()) {
      WithinStep(t, got[k], e, bias);
      continue;
    }
    for (size_t i = 0; i < t.p.size(); ++i) {
      const double step = std::log(t.p[i] + e) - std::log(got[k].p[i] + e);
      bias[size_t(t.lo) + i] += float(std::clamp(step, -o.kMaxStep, o.kMaxStep));
    }
  }
}

// The ids of a 1-way cell with groups (`within`: under dp, an ordered
// column with parents) whose target is 0 (trimmed by KeepContiguous, in a
// dead group, or projected to 0) get the bias kForbiddenBias: the release
// says they hold no records, and the fit's steps move only the ids a
// measurement draws, so an id the network gives 1e-4 kept it (diamonds' z at
// epsilon 4: 30 bins beyond the data's 2-6 mm at ~1e-4 each put 3 of 2,000
// generated values at 75-91 mm and its Pearson with x at 0.23 against 0.97).
void ForbidEmptyIds(const std::vector<ColumnMarginal>& targets, float* bias) {
  for (const ColumnMarginal& t : targets) {
    if (t.within.empty()) continue;  // (only 1-way cells have `within`)
    for (size_t i = 0; i < t.p.size(); ++i)
      if (t.p[i] == 0) bias[size_t(t.lo) + i] = CalibrateOptions::kForbiddenBias;
  }
}

}  // namespace

namespace {

// The tables to fit, one per 2-way cell (table_of[k]: its index, -1 for
// 1-way), the tables sharing each child (per_child: their steps are damped)
// and the report's links.
struct Fit {
  std::shared_ptr<PairTables> tables = std::make_shared<PairTables>();
  std::vector<int> table_of, per_child;
};
Fit TablesFor(const FieldTokenizer& tok, const std::vector<std::string>& header,
              const std::vector<ColumnMarginal>& targets, CalibrateReport* report) {
  Fit f;
  f.table_of.assign(targets.size(), -1);
  f.per_child.assign(tok.columns().size(), 0);
  for (size_t k = 0; k < targets.size(); ++k) {
    if (targets[k].parent < 0) continue;
    f.table_of[k] = int(f.tables->tables.size());
    f.tables->tables.push_back(targets[k].Shape());
    if (size_t(targets[k].column) < header.size() && size_t(targets[k].parent) < header.size())
      report->links.push_back(header[size_t(targets[k].column)] + "<-" +
                              header[size_t(targets[k].parent)]);
    if (size_t(targets[k].column) < f.per_child.size()) ++f.per_child[size_t(targets[k].column)];
  }
  return f;
}

}  // namespace

namespace {
// Every measured distance at most kSteadyFall of the one before it.
bool SteadyFall(const std::vector<double>& tvd) {
  for (size_t i = 1; i < tvd.size(); ++i)
    if (!(tvd[i] <= CalibrateOptions::kSteadyFall * tvd[i - 1])) return false;
  return tvd.size() >= 2;
}
}  // namespace

int64_t MeasureSize(const CalibrateOptions& o, int it) {
  if (!o.ramp || it >= o.iterations - 1) return o.samples;
  const int64_t s = it == o.iterations - 2 ? o.samples / 2 : o.samples / 4;
  return std::max(s, std::min<int64_t>(o.samples, 250));
}

Status Calibrate(const FieldTokenizer& tok, const std::vector<std::string>& header, char delimiter,
                 const NetworkSpec& spec, float* params, const std::vector<ColumnMarginal>& targets,
                 const CalibrateOptions& o, CalibrateReport* report, PairTables* pairs) {
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = dist::CpuNow();
  const ParamLayout layout = ParamLayout::For(spec);
  float* bias = params + layout.offset("dense.b");
  Fit fit = TablesFor(tok, header, targets, report);
  PairTables& tables = *fit.tables;
  if (!tables.tables.empty() && !pairs)
    return DS_ERR(kInternal, "calibrate: 2-way targets without a place for the tables");
  DS_RETURN_IF_ERROR(tables.Check(tok, "calibrate"));
  report->cells = int(targets.size());
  report->pairs = int(tables.tables.size());
  std::shared_ptr<const PairTables> applied;
  if (!tables.tables.empty()) applied = fit.tables;
  // The measured best state is kept: a step can overshoot, and on a column of many
  // cells (vega_zipcodes) the last iteration measured worse than the first.
  const size_t nb = size_t(spec.vocab_size);
  ForbidEmptyIds(targets, bias);
  std::vector<float> best_bias(bias, bias + nb);
  PairTables best_tables = tables;
  double best = std::numeric_limits<double>::infinity();
  for (int it = 0; it <= o.iterations; ++it) {
    if (it == o.iterations && it >= 2 && o.skip_steady_last && SteadyFall(report->tvd)) {
      // The last step kept unmeasured (CalibrateOptions::skip_steady_last).
      report->measured_last = false;
      report->kept_iteration = it;
      best_bias.assign(bias, bias + nb);
      best_tables = tables;
      break;
    }
    CalibrateOptions oi = o;
    oi.samples = MeasureSize(o, it);
    std::vector<ColumnMarginal> got = targets;
    MeasureStats ms;
    DS_RETURN_IF_ERROR(MeasureModel(tok, header, delimiter, spec, params, oi,
                                    o.seed + uint64_t(it) * 7919u, applied, &got, &ms));
    report->attempts_here += ms.attempts_here;
    report->ranks = ms.ranks;
    report->samples.push_back(oi.samples);
    Normalize(&got);
    const double tvd = MeanTvd(got, targets);
    report->tvd.push_back(tvd);
    if (it == 0) report->tvd_before = tvd;
    if (tvd < best) {
      best = tvd;
      report->kept_iteration = it;
      best_bias.assign(bias, bias + nb);
      best_tables = tables;
    } else if (o.stop_when_worse && oi.samples == o.samples) {
      break;  // a full measurement no better: the best state is kept, no more steps from here
    }
    if (it == o.iterations) break;
    const double e = 0.5 / double(std::max<int64_t>(1, oi.samples));
    CalibrationSteps(targets, got, fit.table_of, fit.per_child, o, e, bias, &tables);
  }
  report->tvd_after = best;
  report->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  report->cpu_seconds = dist::CpuNow() - cpu0;
  std::copy(best_bias.begin(), best_bias.end(), bias);
  if (pairs) *pairs = std::move(best_tables);
  return Status::Ok();
}

}  // namespace ds
