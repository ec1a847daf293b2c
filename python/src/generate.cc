// datasynth._core: generation (ordinary and tabular models), model info and
// reading the generated CSV back.
#include <cmath>

#include "common.h"
#include "config/config.h"
#include "generate/generate.h"
#include "generate/overrides.h"
#include "io/csv.h"
#include "tabular/tabular.h"
#include "tabular_events.h"

#include <nanobind/stl/vector.h>

namespace dspy {

namespace {

// Generation settings from Python: keys named as the Python arguments, each
// checked by the config key table like the CLI's flags ("num_rows: config
// key 'gen_lines': value -1 out of range [0, 1000000000000]").
struct GenSettings : ds::GenerationOverrides {
  double parallelism = 0;
};

GenSettings SettingsFrom(const Json& j) {
  ds::Config c;
  const std::pair<const char*, const char*> keys[] = {
      {"num_rows", "gen_lines"},   {"temperature", "gen_temp"},
      {"gen_chars", "gen_chars"},  {"predict_batch_size", "predict_batch_size"},
      {"max_invalid", "max_invalid"}, {"seed", "seed"}};
  for (const auto& [arg, key] : keys)
    if (j.contains(arg) && !j.at(arg).is_null())
      Check(c.SetJson(key, j.at(arg)).WithContext(arg));
  GenSettings g;
  static_cast<ds::GenerationOverrides&>(g) = ds::GenerationOverrides::FromConfig(c);
  g.parallelism = j.value("parallelism", 0.0);
  if (!std::isfinite(g.parallelism))
    throw StatusError{ds::Code::kInvalidArgument, "parallelism: expected a finite number"};
  return g;
}

Json SummaryJson(const ds::GenerateSummary& s) {
  return {{"valid", s.valid},     {"invalid", s.invalid},   {"tokens", s.tokens},
          {"seconds", s.seconds}, {"workers", s.workers},   {"complete", s.complete},
          {"output", s.output},   {"worker_failures", s.worker_failures}};
}

ds::GenerateEvents EventsTo(EventQueue* q) {
  ds::GenerateEvents ev;
  ev.progress = [q](const ds::GenerateProgress& p) {
    q->Push({{"kind", "gen_progress"}, {"valid", p.valid}, {"invalid", p.invalid},
             {"wanted", p.wanted}, {"records_per_s", p.records_per_s},
             {"tokens_per_s", p.tokens_per_s}, {"workers", p.workers}, {"final", p.final}},
            true);
  };
  ev.warning = [q](const std::string& w) { q->Push({{"kind", "warning"}, {"message", w}}); };
  return ev;
}

// options: num_rows, temperature, gen_chars, predict_batch_size, max_invalid,
// seed, parallelism, format, start_string, prefixes, overwrite, device,
// constrain. The CLI's `generate` runs the same GenerateFromModelDir.
std::string Generate(const std::string& model_dir, const std::string& output,
                     const std::string& options_json, nb::handle on_events) {
  const Json j = Json::parse(options_json);
  const GenSettings g = SettingsFrom(j);
  ds::GenerateCommand c;
  c.model_dir = model_dir;
  c.run.output = output;
  c.run.parallelism = g.parallelism;
  c.run.output_policy.overwrite = j.value("overwrite", false);
  c.run.gen.seed = g.seed;
  if (j.contains("start_string") && !j["start_string"].is_null())
    c.run.gen.start_string = j["start_string"].get<std::string>();
  if (j.contains("prefixes")) {
    c.run.gen.prefixes = j["prefixes"].get<std::vector<std::string>>();
    c.run.gen.prefixes_source = "seed_fields";
  }
  if (j.contains("format")) c.format = Take(ds::ParseOutputFormat(j["format"].get<std::string>()));
  g.ApplyTo(&c);
  c.constrain = Take(ds::ParseConstraintLevel(j.value("constrain", std::string("auto"))));
  c.device = j.value("device", std::string("auto"));
  std::atomic<bool> cancel{false};
  c.run.cancel = &cancel;
  EventQueue q;
  const ds::GenerateEvents ev = EventsTo(&q);
  ds::GenerateSummary sum;
  RunInterruptible([&] { Check(ds::GenerateFromModelDir(c, ev, &sum)); }, &cancel, &q, on_events);
  return SummaryJson(sum).dump();
}

// A generated (or any) CSV: (header, columns), each column a list of str.
nb::tuple ReadCsvColumns(const std::string& path, const std::string& delimiter) {
  const char d = delimiter.empty() ? ',' : delimiter[0];
  ds::RowTable t;
  {
    nb::gil_scoped_release release;
    t = Take(ds::ReadRowTable(path, d));
  }
  nb::list header, columns;
  for (size_t c = 0; c < t.header.size(); ++c) {
    header.append(nb::str(t.header[c].data(), t.header[c].size()));
    nb::list col;
    for (const auto& row : t.rows) col.append(nb::str(row[c].data(), row[c].size()));
    columns.append(col);
  }
  return nb::make_tuple(header, columns);
}

// What `datasynth info` checks, as JSON: {"tabular": false, "config": ...,
// "meta": ...} or {"tabular": true, "spec": ..., "batches": [...]}.
std::string ModelInfo(const std::string& dir) {
  nb::gil_scoped_release release;
  if (ds::IsTabularModel(dir)) {
    std::vector<std::unique_ptr<ds::Model>> batches;
    ds::TabularSpec spec = Take(ds::CheckTabularModel(dir, &batches));
    Json b = Json::array();
    for (const auto& m : batches) b.push_back({{"config", m->config.ToJson()}, {"meta", m->meta.ToJson()}});
    return Json{{"tabular", true}, {"spec", spec.ToJson()}, {"batches", b}}.dump();
  }
  std::unique_ptr<ds::Model> m = Take(ds::LoadModelForGeneration(dir));
  return Json{{"tabular", false}, {"config", m->config.ToJson()}, {"meta", m->meta.ToJson()}}
      .dump();
}

}  // namespace

namespace {

// Tabular generation: the same settings plus seeds {"columns", "rows", "per_row"}.
std::string GenerateTabular(const std::string& model_dir, const std::string& output,
                            const std::string& options_json, nb::handle on_events) {
  const Json j = Json::parse(options_json);
  const GenSettings g = SettingsFrom(j);
  ds::TabularGenerateOptions o;
  o.model_dir = model_dir;
  o.output = output;
  o.overwrite = j.value("overwrite", false);
  g.ApplyTo(&o);
  o.seed = g.seed;
  o.parallelism = g.parallelism;
  o.device = j.value("device", std::string("auto"));
  if (j.contains("seeds")) {
    ds::TabularSeeds s;
    s.columns = j["seeds"]["columns"].get<std::vector<std::string>>();
    s.rows = j["seeds"]["rows"].get<std::vector<std::vector<std::string>>>();
    s.per_row = j["seeds"]["per_row"].get<bool>();
    s.source = "seed_fields";
    o.seeds = std::move(s);
  }
  std::atomic<bool> cancel{false};
  o.cancel = &cancel;
  EventQueue q;
  TabularEvents obs(&q);
  ds::TabularGenerateSummary sum;
  RunInterruptible([&] { Check(ds::GenerateTabular(o, &obs, &sum)); }, &cancel, &q, on_events);
  return Json{{"rows", sum.rows}, {"invalid", sum.invalid}, {"seconds", sum.seconds},
              {"output", sum.output}}
      .dump();
}

}  // namespace

void BindGenerate(nb::module_& m) {
  m.def("generate", &Generate, nb::arg("model_dir"), nb::arg("output"), nb::arg("options_json"),
        nb::arg("on_events").none());
  m.def("read_csv_columns", &ReadCsvColumns, nb::arg("path"), nb::arg("delimiter"));
  m.def(
      "sniff_delimiter",
      [](const std::string& path, const std::string& preferred) {
        return std::string(1, ds::SniffDelimiter(path, preferred.empty() ? ',' : preferred[0]));
      },
      nb::arg("path"), nb::arg("preferred"));
  m.def("model_info", &ModelInfo, nb::arg("dir"));
  m.def("is_tabular_model", [](const std::string& dir) { return ds::IsTabularModel(dir); });
  m.def("generate_tabular", &GenerateTabular, nb::arg("model_dir"), nb::arg("output"),
        nb::arg("options_json"), nb::arg("on_events").none());
}

}  // namespace dspy
