// datasynth._core: training (ordinary and tabular models) and the config table.
#include <cmath>

#include "common.h"
#include "config/config.h"
#include "tabular/tabular.h"
#include "train/trainer.h"
#include "tabular_events.h"

namespace dspy {
namespace {

// The keys of a JSON object set on a Config through the key table: the same
// types, ranges and messages as a --config file or a CLI flag.
ds::Config ConfigFrom(const std::string& config_json) {
  ds::Config c;
  Json j = Json::parse(config_json);
  for (auto it = j.begin(); it != j.end(); ++it) Check(c.SetJson(it.key(), it.value()));
  Check(c.Validate());
  return c;
}

class TrainEvents : public ds::TrainObserver {
 public:
  explicit TrainEvents(EventQueue* q) : q_(q) {}
  void OnInfo(const std::string& m) override { q_->Push({{"kind", "info"}, {"message", m}}); }
  void OnProgress(const ds::TrainProgress& p) override {
    q_->Push({{"kind", "progress"}, {"epoch", p.epoch}, {"epochs", p.epochs}, {"step", p.step},
              {"steps", p.steps}, {"loss", p.loss}, {"tokens_per_s", p.tokens_per_s},
              {"eta_seconds", p.eta_seconds}},
             true);
  }
  void OnEpoch(const ds::EpochResult& r) override {
    Json e = ds::EpochToJson(r);
    e["kind"] = "epoch";
    q_->Push(std::move(e));
  }

 private:
  EventQueue* q_;
};

Json SummaryJson(const ds::TrainSummary& s) {
  Json h = Json::array();
  for (const auto& e : s.history) h.push_back(ds::EpochToJson(e));
  auto num = [](double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); };
  return {{"epochs_run", s.meta.epochs_run}, {"best_epoch", s.meta.best_epoch},
          {"stop_reason", s.meta.stop_reason}, {"records", s.meta.records},
          {"seconds", s.seconds},          {"tokens_per_s", s.tokens_per_s},
          {"untrained_val_loss", num(s.untrained_val_loss)},
          {"dp", s.meta.dp}, {"epsilon", s.meta.epsilon}, {"delta", s.meta.delta},
          {"history", h}};
}

std::string Train(const std::string& input, const std::string& model_dir,
                  const std::string& config_json, bool resume, nb::handle on_events) {
  ds::TrainOptions o;
  o.config = ConfigFrom(config_json);
  o.input_path = input;
  o.model_dir = model_dir;
  o.resume = resume;
  std::atomic<bool> cancel{false};
  o.cancel = &cancel;
  EventQueue q;
  TrainEvents obs(&q);
  std::optional<ds::TrainSummary> out;
  RunInterruptible([&] { out = Take(ds::Train(o, &obs)); }, &cancel, &q, on_events);
  return SummaryJson(*out).dump();
}

}  // namespace

namespace {

ds::TabularConfig TabularFrom(const std::string& tabular_json) {
  ds::TabularConfig t;
  Json j = Json::parse(tabular_json);
  auto get = [&](const char* k, auto* v) {
    if (j.contains(k)) *v = j.at(k).get<std::decay_t<decltype(*v)>>();
  };
  get("tabular_batch_size", &t.batch_columns);
  get("tabular_grouping", &t.grouping);
  get("tabular_condition_columns", &t.condition_columns);
  get("tabular_min_condition_gain", &t.min_condition_gain);
  get("tabular_parallel_batches", &t.parallel_batches);
  get("tabular_association_rows", &t.association_rows);
  get("tabular_header_groups", &t.header_groups);
  get("tabular_seed_columns", &t.seed_columns);
  Check(t.Validate());
  return t;
}

std::string TrainTabular(const std::string& input, const std::string& model_dir,
                         const std::string& config_json, const std::string& tabular_json,
                         bool resume, nb::handle on_events) {
  ds::TabularTrainOptions o;
  o.config = ConfigFrom(config_json);
  if (o.config.field_delimiter.empty()) o.config.field_delimiter = ",";
  o.tabular = TabularFrom(tabular_json);
  o.input_path = input;
  o.model_dir = model_dir;
  o.resume = resume;
  std::atomic<bool> cancel{false};
  o.cancel = &cancel;
  EventQueue q;
  TabularEvents obs(&q);
  std::optional<ds::TabularTrainSummary> out;
  RunInterruptible([&] { out = Take(ds::TrainTabular(o, &obs)); }, &cancel, &q, on_events);
  return Json{{"batches", int(out->batches.size())}, {"seconds", out->seconds},
              {"processes", out->processes}, {"spec", out->spec.ToJson()}}
      .dump();
}

// Every key of the table: name, type, group, default, valid range and help.
std::string ConfigKeys() {
  Json out = Json::array();
  const ds::Config defaults;
  const Json all = defaults.ToJson();
  for (const auto& k : ds::Config::Keys()) {
    static const char* kTypes[] = {"bool", "int", "int", "float", "str"};
    static const char* kGroups[] = {"training", "tokenizer", "privacy", "generation"};
    out.push_back({{"name", k.name}, {"type", kTypes[int(k.type)]},
                   {"group", kGroups[int(k.group)]}, {"help", k.help},
                   {"range", k.RangeText()}, {"default", all.value(k.name, Json(nullptr))}});
  }
  return out.dump();
}

// Checks a config as train would, without training (for config objects).
void ValidateConfig(const std::string& config_json) { ConfigFrom(config_json); }

}  // namespace

void BindTrain(nb::module_& m) {
  m.def("train", &Train, nb::arg("input"), nb::arg("model_dir"), nb::arg("config_json"),
        nb::arg("resume"), nb::arg("on_events").none());
  m.def("train_tabular", &TrainTabular, nb::arg("input"), nb::arg("model_dir"),
        nb::arg("config_json"), nb::arg("tabular_json"), nb::arg("resume"),
        nb::arg("on_events").none());
  m.def("config_keys", &ConfigKeys);
  m.def("validate_config", &ValidateConfig);
}

}  // namespace dspy
