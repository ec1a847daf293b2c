// The tabular observer of the binding: library callbacks as queued events.
#pragma once

#include "common.h"
#include "tabular/tabular.h"
#include "train/trainer.h"

namespace dspy {

class TabularEvents : public ds::TabularObserver {
 public:
  explicit TabularEvents(EventQueue* q) : q_(q) {}
  void OnInfo(const std::string& m) override { q_->Push({{"kind", "info"}, {"message", m}}); }
  void OnWarning(const std::string& m) override {
    q_->Push({{"kind", "warning"}, {"message", m}});
  }
  void OnBatchInfo(int b, const std::string& m) override {
    q_->Push({{"kind", "info"}, {"batch", b}, {"message", m}});
  }
  void OnBatchEpoch(int b, const ds::EpochResult& r) override {
    Json e = ds::EpochToJson(r);
    e["kind"] = "epoch";
    e["batch"] = b;
    q_->Push(std::move(e));
  }
  void OnBatchTrained(const ds::BatchTrainResult& r) override {
    q_->Push({{"kind", "batch_trained"}, {"batch", r.batch}, {"epochs_run", r.epochs_run},
              {"best_epoch", r.best_epoch}, {"records", r.records}, {"seconds", r.seconds},
              {"stop_reason", r.stop_reason}});
  }
  void OnGenerateProgress(int b, int batches, const ds::GenerateProgress& p) override {
    q_->Push({{"kind", "gen_progress"}, {"batch", b}, {"batches", batches}, {"valid", p.valid},
              {"invalid", p.invalid}, {"wanted", p.wanted}, {"records_per_s", p.records_per_s},
              {"final", p.final}},
             true);
  }
  void OnBatchGenerated(int b, const ds::GenerateSummary& s) override {
    q_->Push({{"kind", "batch_generated"}, {"batch", b}, {"valid", s.valid},
              {"invalid", s.invalid}, {"seconds", s.seconds}});
  }

 private:
  EventQueue* q_;
};

}  // namespace dspy
