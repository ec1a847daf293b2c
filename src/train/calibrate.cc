#include "train/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "backend/registry.h"
#include "generate/field_filter.h"
#include "generate/generator.h"
#include "schema/column_rules.h"

namespace ds {

namespace {

bool Calibrated(FieldType t) {
  return t == FieldType::kCategorical || t == FieldType::kInteger || t == FieldType::kDecimal ||
         t == FieldType::kDatetime;
}

double MeanTvd(const std::vector<ColumnMarginal>& a, const std::vector<ColumnMarginal>& b) {
  double sum = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    double d = 0;
    for (size_t i = 0; i < a[k].p.size(); ++i) d += std::fabs(a[k].p[i] - b[k].p[i]);
    sum += 0.5 * d;
  }
  return a.empty() ? 0 : sum / double(a.size());
}

// The generated marginals of the model under `params`.
Result<std::vector<ColumnMarginal>> Measure(const FieldTokenizer& tok,
                                            const std::vector<std::string>& header, char delimiter,
                                            const NetworkSpec& spec, const float* params,
                                            const CalibrateOptions& o, uint64_t seed) {
  GenerationModel g;
  g.tokenizer = &tok;
  g.header = header;
  g.delimiter = delimiter;
  g.rules = ColumnRules::FieldCountOnly(header);
  g.make_backend = [&spec, params](int slots) {
    return MakeInferBackend(DeviceKind::kCpu, spec, params, slots);
  };
  g.make_filter = [&tok](int slots) -> Result<std::unique_ptr<TokenFilter>> {
    return NewFieldFilter(tok, slots);
  };
  GenerateOptions go;
  go.num_lines = o.samples;
  go.seed = seed;
  go.temperature = o.temperature;
  go.max_invalid = o.samples * 10 + 1000;
  DS_ASSIGN_OR_RETURN(auto gen, RecordGenerator::Create(g, go));
  std::vector<std::vector<std::string>> recs;
  GeneratedRecord r;
  while (true) {
    DS_ASSIGN_OR_RETURN(bool more, gen->Next(&r));
    if (!more) break;
    if (r.valid) recs.push_back(r.fields);
  }
  std::vector<ColumnMarginal> cells = MarginalCells(tok);
  CountMarginals(tok, recs, &cells);
  Normalize(&cells);
  return cells;
}

}  // namespace

std::vector<ColumnMarginal> MarginalCells(const FieldTokenizer& tok) {
  std::vector<ColumnMarginal> out;
  for (size_t k = 0; k < tok.columns().size(); ++k) {
    const auto& col = tok.columns()[k];
    if (!Calibrated(col.type.type) || col.size == 0) continue;
    FieldTokenizer::Cursor c;
    c.col = int(k);
    ColumnMarginal m;
    m.column = int(k);
    tok.AllowedRange(c, &m.lo, &m.hi);
    if (m.hi - m.lo < 2) continue;  // one cell: nothing to calibrate
    m.p.assign(size_t(m.hi - m.lo), 0.0);
    out.push_back(std::move(m));
  }
  return out;
}

void CountMarginals(const FieldTokenizer& tok, const std::vector<std::vector<std::string>>& records,
                    std::vector<ColumnMarginal>* cells, int64_t* skipped) {
  std::vector<int> of(tok.columns().size(), -1);  // column -> cell index
  for (size_t i = 0; i < cells->size(); ++i) of[size_t((*cells)[i].column)] = int(i);
  std::vector<int32_t> ids;
  for (const auto& rec : records) {
    ids.clear();
    if (!tok.EncodeRecord(rec, &ids).ok()) {
      if (skipped) ++*skipped;
      continue;
    }
    FieldTokenizer::Cursor c;
    tok.Begin(&c, nullptr);
    for (int32_t id : ids) {
      if (c.broken) break;
      if (c.part == 0 && c.col < int(of.size()) && of[size_t(c.col)] >= 0) {
        ColumnMarginal& m = (*cells)[size_t(of[size_t(c.col)])];
        if (id >= m.lo && id < m.hi) m.p[size_t(id - m.lo)] += 1;
      }
      tok.Advance(&c, id, nullptr);
    }
  }
}

void AddMarginalNoise(std::vector<ColumnMarginal>* cells, double noise_multiplier,
                      SecureGaussian* noise) {
  const double stddev = noise_multiplier * std::sqrt(double(cells->size()));
  for (ColumnMarginal& m : *cells) {
    std::vector<double> z(m.p.size());
    noise->FillDouble(z.data(), z.size(), stddev);
    for (size_t i = 0; i < m.p.size(); ++i) m.p[i] = std::max(0.0, m.p[i] + z[i]);
  }
}

void Normalize(std::vector<ColumnMarginal>* cells) {
  for (ColumnMarginal& m : *cells) {
    double sum = 0;
    for (double v : m.p) sum += v;
    for (double& v : m.p) v = sum > 0 ? v / sum : 1.0 / double(m.p.size());
  }
}

std::string CalibrateReport::Describe() const {
  return fmt::format(
      "calibrate: mean total variation distance of the 1-way marginals to the targets {:.4f} -> "
      "{:.4f}",
      tvd_before, tvd_after);
}

Status Calibrate(const FieldTokenizer& tok, const std::vector<std::string>& header, char delimiter,
                 const NetworkSpec& spec, float* params, const std::vector<ColumnMarginal>& targets,
                 const CalibrateOptions& o, CalibrateReport* report) {
  const ParamLayout layout = ParamLayout::For(spec);
  float* bias = params + layout.offset("dense.b");
  const double e = 0.5 / double(std::max<int64_t>(1, o.samples));
  for (int it = 0; it <= o.iterations; ++it) {
    DS_ASSIGN_OR_RETURN(auto got, Measure(tok, header, delimiter, spec, params, o,
                                          o.seed + uint64_t(it) * 7919u));
    if (got.size() != targets.size())
      return DS_ERR(kInternal, "calibrate: {} target columns, {} cells", targets.size(), got.size());
    const double tvd = MeanTvd(got, targets);
    if (it == 0) report->tvd_before = tvd;
    report->tvd_after = tvd;
    if (it == o.iterations) break;
    for (size_t k = 0; k < got.size(); ++k) {
      const ColumnMarginal& t = targets[k];
      for (size_t i = 0; i < t.p.size(); ++i) {
        const double step = std::log(t.p[i] + e) - std::log(got[k].p[i] + e);
        bias[size_t(t.lo) + i] += float(std::clamp(step, -o.kMaxStep, o.kMaxStep));
      }
    }
  }
  return Status::Ok();
}

}  // namespace ds
