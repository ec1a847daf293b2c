#include "dist/batches.h"

#include <unistd.h>

#include <cmath>

#include "dist/comm.h"

namespace ds::dist {
namespace {

using Json = nlohmann::json;
constexpr int kJobsTag = 7101, kResultTag = 7102;

Json NumOrNull(double v) { return std::isnan(v) ? Json(nullptr) : Json(v); }
double NumOf(const Json& j) { return j.is_null() ? NAN : j.get<double>(); }

Json ResultJson(const BatchTrainResult& r) {
  return {{"batch", r.batch},           {"threads", r.threads},
          {"records", r.records},       {"epochs_run", r.epochs_run},
          {"best_epoch", r.best_epoch}, {"best_metric", NumOrNull(r.best_metric)},
          {"loss", NumOrNull(r.loss)},  {"val_loss", NumOrNull(r.val_loss)},
          {"seconds", r.seconds},       {"tokens_per_s", r.tokens_per_s},
          {"stop", r.stop_reason}};
}

BatchTrainResult ResultFrom(const Json& j) {
  BatchTrainResult r;
  r.batch = j.at("batch").get<int>();
  r.threads = j.at("threads").get<int>();
  r.records = j.at("records").get<int64_t>();
  r.epochs_run = j.at("epochs_run").get<int>();
  r.best_epoch = j.at("best_epoch").get<int>();
  r.best_metric = NumOf(j.at("best_metric"));
  r.loss = NumOf(j.at("loss"));
  r.val_loss = NumOf(j.at("val_loss"));
  r.seconds = j.at("seconds").get<double>();
  r.tokens_per_s = j.at("tokens_per_s").get<double>();
  r.stop_reason = j.at("stop").get<std::string>();
  return r;
}

Json JobJson(const BatchJobMessage& m) {
  return {{"batch", m.batch},
          {"width", m.width},
          {"bytes", m.bytes},
          {"input_path", m.options.input_path},
          {"model_dir", m.options.model_dir},
          {"resume", m.options.resume},
          {"time_budget_seconds", m.options.time_budget_seconds},
          {"config", m.options.config.ToJson()}};
}

}  // namespace

bool OwnBatch(int batch) { return !Active() || batch % Size() == Rank(); }
bool ServesBatches() { return Active() && Rank() > 0; }

Status SendBatchJobs(const BatchRequest& request) {
  std::vector<Json> per_rank(size_t(Size()), Json::array());
  for (const auto& m : request.jobs) per_rank[size_t(m.batch % Size())].push_back(JobJson(m));
  for (int r = 1; r < Size(); ++r) {
    if (per_rank[size_t(r)].empty()) continue;
    Json j = {{"spec", request.spec.ToJson()},
              {"procs", request.procs},
              {"seconds", request.seconds ? Json(*request.seconds) : Json(nullptr)},
              {"jobs", per_rank[size_t(r)]}};
    DS_RETURN_IF_ERROR(SendString(j.dump(), r, kJobsTag));
  }
  return Status::Ok();
}

Status CollectBatchResults(const std::vector<int>& batches, const std::atomic<bool>* cancel,
                           std::vector<BatchTrainResult>* results) {
  std::vector<bool> waiting(size_t(Size()), false);
  for (int b : batches) waiting[size_t(b % Size())] = true;
  for (int r = 1; r < Size(); ++r) {
    if (!waiting[size_t(r)]) continue;
    while (true) {
      DS_ASSIGN_OR_RETURN(bool ready, Probe(r, kResultTag));
      if (ready) break;
      if (cancel && cancel->load()) return DS_ERR(kCancelled, "training interrupted");
      ::usleep(20000);
    }
    std::string text;
    DS_RETURN_IF_ERROR(RecvString(&text, r, kResultTag));
    Json j = Json::parse(text, nullptr, false);
    try {
      if (!j.at("ok").get<bool>())
        return Status(Code(j.at("code").get<int>()),
                      fmt::format("rank {}: {}", r, j.at("message").get<std::string>()), __FILE__,
                      __LINE__);
      for (const auto& e : j.at("results")) {
        BatchTrainResult br = ResultFrom(e);
        if (br.batch >= 0 && size_t(br.batch) < results->size()) (*results)[size_t(br.batch)] = br;
      }
    } catch (const Json::exception& e) {
      return DS_ERR(kInternal, "rank {}: bad batch results: {}", r, e.what());
    }
  }
  return Status::Ok();
}

Result<bool> ReceiveBatchJobs(BatchRequest* request) {
  std::string text;
  DS_RETURN_IF_ERROR(RecvString(&text, 0, kJobsTag));
  Json j = Json::parse(text, nullptr, false);
  if (j.is_object() && j.contains("end")) return false;
  *request = BatchRequest{};
  try {
    DS_ASSIGN_OR_RETURN(request->spec, TabularSpec::FromJson(j.at("spec"), "rank 0's plan"));
    request->procs = j.at("procs").get<int>();
    if (!j.at("seconds").is_null()) request->seconds = j.at("seconds").get<double>();
    for (const auto& e : j.at("jobs")) {
      BatchJobMessage m;
      m.batch = e.at("batch").get<int>();
      m.width = e.at("width").get<int64_t>();
      m.bytes = e.at("bytes").get<int64_t>();
      m.options.input_path = e.at("input_path").get<std::string>();
      m.options.model_dir = e.at("model_dir").get<std::string>();
      m.options.resume = e.at("resume").get<bool>();
      m.options.time_budget_seconds = e.at("time_budget_seconds").get<double>();
      DS_RETURN_IF_ERROR(m.options.config.MergeJson(e.at("config"), "rank 0's batch job"));
      request->jobs.push_back(std::move(m));
    }
  } catch (const Json::exception& e) {
    return DS_ERR(kInternal, "{}: bad batch jobs from rank 0: {}", Where(), e.what());
  }
  return true;
}

Status ReturnBatchResults(const Status& status, const std::vector<BatchTrainResult>& results,
                          const std::vector<int>& batches) {
  Json j = {{"ok", status.ok()}, {"code", int(status.code())}, {"message", status.message()}};
  Json list = Json::array();
  if (status.ok())
    for (int b : batches) list.push_back(ResultJson(results.at(size_t(b))));
  j["results"] = list;
  return SendString(j.dump(-1, ' ', false, Json::error_handler_t::replace), 0, kResultTag);
}

BatchService::~BatchService() {
  if (!Active() || Rank() != 0) return;
  for (int r = 1; r < Size(); ++r) (void)SendString(R"({"end": true})", r, kJobsTag);
}

}  // namespace ds::dist
