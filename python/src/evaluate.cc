// datasynth._core: the quality and privacy report over tables in memory.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include "common.h"
#include "evaluate/evaluate.h"

namespace dspy {
namespace {

using Columns = std::vector<std::vector<std::string>>;

// Columns of field text ("" = missing, as in a CSV) with the types inferred
// as ReadTable infers them.
ds::Table TableFrom(const std::string& source, const std::vector<std::string>& names,
                    Columns columns) {
  if (names.size() != columns.size())
    throw StatusError{ds::Code::kInvalidInput,
                      source + ": " + std::to_string(names.size()) + " names for " +
                          std::to_string(columns.size()) + " columns"};
  ds::Table t;
  t.source = source;
  for (size_t i = 0; i < names.size(); ++i) t.AddColumn(names[i], std::move(columns[i]));
  Check(t.Validate().WithContext(source));
  t.InferTypes();
  return t;
}

ds::EvalReport Evaluate(const std::vector<std::string>& real_names, Columns real,
                        const std::vector<std::string>& synth_names, Columns synth,
                        std::optional<std::vector<std::string>> holdout_names,
                        std::optional<Columns> holdout, int threads, uint64_t seed) {
  ds::Table r = TableFrom("real", real_names, std::move(real));
  ds::Table s = TableFrom("synthetic", synth_names, std::move(synth));
  std::optional<ds::Table> h;
  if (holdout_names && holdout) h = TableFrom("holdout", *holdout_names, std::move(*holdout));
  ds::EvalOptions o;
  o.threads = threads;
  o.seed = seed;
  nb::gil_scoped_release release;
  return Take(ds::Evaluate(r, s, h ? &*h : nullptr, o));
}

}  // namespace

void BindEvaluate(nb::module_& m) {
  nb::class_<ds::EvalReport>(m, "EvalReport")
      .def_prop_ro("overall", [](const ds::EvalReport& r) { return r.quality.overall; })
      .def_prop_ro("grade", [](const ds::EvalReport& r) { return r.quality.grade; })
      .def("to_json", [](const ds::EvalReport& r) { return ds::ReportToJson(r); })
      .def("to_html", [](const ds::EvalReport& r) { return ds::ReportToHtml(r); })
      .def("to_text", [](const ds::EvalReport& r) { return ds::ReportToText(r); });
  m.def("evaluate", &Evaluate, nb::arg("real_names"), nb::arg("real"), nb::arg("synth_names"),
        nb::arg("synth"), nb::arg("holdout_names").none(), nb::arg("holdout").none(),
        nb::arg("threads"), nb::arg("seed"));
}

}  // namespace dspy
