#include "generate/generate.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "backend/backend.h"
#include "io/line_reader.h"
#include "backend/memory_estimate.h"
#include "backend/registry.h"
#include "dist/comm.h"
#include "dist/generate.h"
#include "generate/field_filter.h"

namespace ds {

Result<GenerationModel> MakeGenerationModel(const Model& model, const RuleChecks& checks,
                                            ConstraintLevel constrain, const InferDevice& device) {
  GenerationModel g;
  g.tokenizer = model.tokenizer.get();
  g.header = model.meta.header;
  g.delimiter = model.meta.delimiter;
  if (g.delimiter) {
    if (!model.column_rules.is_null()) {
      DS_ASSIGN_OR_RETURN(
          ColumnRules rules,
          ColumnRules::FromJson(model.column_rules, model.dir + "/column_rules.json"));
      if (rules.field_count() != g.header.size())
        return DS_ERR(kCorrupt, "{}/column_rules.json: {} columns, but the header has {}",
                      model.dir, rules.field_count(), g.header.size());
      g.rules = std::move(rules);
    } else {
      g.rules = ColumnRules::FieldCountOnly(g.header);
    }
    g.rules->set_checks(checks);
    if (const auto* ft = dynamic_cast<const FieldTokenizer*>(g.tokenizer)) {
      // Value tokens: the tokenizer's own masks (types, ranges, real dates)
      // are the constraint; column_rules.json is not used to validate.
      // The calibration's pair tables (pair_correction.h) apply with the masks.
      // --constrain none: no mask, but a model trained on the legal ids only
      // (meta.loss "legal") still samples inside each position's part range:
      // its other logits were never trained.
      if (constrain != ConstraintLevel::kNone)
        g.make_filter = [ft, pairs = model.pair_tables](int slots)
            -> Result<std::unique_ptr<TokenFilter>> { return NewFieldFilter(*ft, slots, pairs); };
      else if (model.meta.loss == "legal")
        g.make_filter = [ft](int slots) -> Result<std::unique_ptr<TokenFilter>> {
          return NewFieldFilter(*ft, slots, nullptr, /*ranges_only=*/true);
        };
    } else if (ResolveConstraintLevel(constrain, *g.rules) != ConstraintLevel::kNone) {
      DS_ASSIGN_OR_RETURN(auto tables, RecordConstraints::Build(*g.tokenizer, *g.rules, constrain));
      g.make_filter = [tables](int slots) -> Result<std::unique_ptr<TokenFilter>> {
        return NewConstraintFilter(tables, slots);
      };
      g.constraints = std::move(tables);
    }
  }
  if (g.delimiter) g.copy_guard = model.copy_guard;
  const Model* m = &model;
  DS_RETURN_IF_ERROR(BackendAvailable(m->meta.spec.architecture, device.kind));
  BackendOptions o;
  o.memory = device.memory;
  o.precision = device.precision;
  const DeviceKind kind = device.kind;
  g.make_backend = [m, o, kind](int slots) {
    return MakeInferBackend(kind, m->meta.spec, m->params, slots, o);
  };
  g.device = kind;
  return g;
}

Result<std::unique_ptr<Model>> LoadModelForGeneration(const std::string& dir) {
  DS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModel(dir));
  DS_RETURN_IF_ERROR(MakeGenerationModel(*model, RuleChecks{}, ConstraintLevel::kAuto).status());
  return model;
}

Result<InferDevice> ResolveInferDevice(const std::string& device, const std::string& gpu_memory,
                                       const std::string& gpu_memory_limit, int workers,
                                       std::string* warning) {
  if (warning != nullptr) warning->clear();
  DS_ASSIGN_OR_RETURN(DeviceRequest req, ParseDevice(device));
  if (gpu_memory != "grow" && gpu_memory != "preallocate")
    return DS_ERR(kInvalidArgument, "--gpu-memory '{}': expected grow or preallocate", gpu_memory);
  InferDevice d;
  if (req == DeviceRequest::kCpu) return d;
  DS_ASSIGN_OR_RETURN(CudaProbe probe, ProbeCudaInChild());
  if (!probe.usable) {
    if (req == DeviceRequest::kCuda)
      return DS_ERR(kUnavailable, "--device cuda: no usable GPU: {}", probe.why);
    if (warning != nullptr && DeviceFallbackWarnings())
      *warning = fmt::format("no usable GPU ({}); running on the CPU", probe.why);
    return d;
  }
  d.kind = DeviceKind::kCuda;
  d.memory.preallocate = gpu_memory == "preallocate";
  if (!gpu_memory_limit.empty()) {
    DS_ASSIGN_OR_RETURN(d.memory.limit_bytes,
                        ParseMemoryLimit(gpu_memory_limit, probe.memory.total_bytes));
  } else {
    DS_ASSIGN_OR_RETURN(d.memory.limit_bytes,
                        WorkerShare(probe.memory.free_bytes, std::max(1, workers),
                                    kCudaContextReserve));
  }
  return d;
}

Result<std::vector<std::string>> ReadStartStrings(const std::string& path) {
  // The inputs' line reader (io/line_reader.h): CRLF, BOM, gzip, pipes and <(...);
  // devices and binary data refused at once, invalid UTF-8 named by line.
  Result<std::unique_ptr<LineReader>> in = LineReader::Open(path);
  if (!in.ok()) return in.status().WithContext("start strings");
  std::vector<std::string> out;
  std::string line;
  for (;;) {
    DS_ASSIGN_OR_RETURN(bool more, (*in)->Next(&line));
    if (!more) break;
    out.push_back(line);
  }
  if (out.empty()) return DS_ERR(kInvalidInput, "{}: no start strings", path);
  return out;
}

Status GenerateFromModelDir(const GenerateCommand& cmd, const GenerateEvents& events,
                            GenerateSummary* summary) {
  *summary = GenerateSummary{};
  DS_RETURN_IF_ERROR(dist::CheckLaunch());
  // LoadModel here; MakeGenerationModel below runs the rest of LoadModelForGeneration's
  // checks (the ones `info` runs) once, with the real device and constraint level.
  DS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModel(cmd.model_dir));
  // Output safety, before any work (RunGeneration checks again once it knows
  // whether there is a run to resume).
  OutputPolicy policy = cmd.run.output_policy;
  policy.model_dir = cmd.model_dir;
  policy.training_input = model->meta.input_file;
  policy.resume = cmd.run.resume;
  DS_RETURN_IF_ERROR(CheckOutputTarget(cmd.run.output, policy));
  // The device: the worker count decides each worker's share of the GPU.
  DS_ASSIGN_OR_RETURN(int workers, ResolveParallelism(cmd.run.parallelism, AvailableCpus()));
  {
    const int64_t wanted = cmd.num_lines.value_or(model->config.gen_lines);
    if (wanted > 0) workers = int(std::min<int64_t>(workers, wanted));
  }
  std::string device_warning;
  DS_ASSIGN_OR_RETURN(InferDevice device,
                      ResolveInferDevice(cmd.device, cmd.gpu_memory, cmd.gpu_memory_limit, workers,
                                         &device_warning));
  if (!device_warning.empty() && events.warning) events.warning(device_warning);
  DS_ASSIGN_OR_RETURN(device.precision,
                      ResolveInferPrecision(cmd.precision, model->meta.precision, device.kind,
                                            &device_warning));
  if (!device_warning.empty() && events.warning) events.warning(device_warning);
  DS_ASSIGN_OR_RETURN(GenerationModel gm,
                      MakeGenerationModel(*model, cmd.checks, cmd.constrain, device));
  if (!cmd.copy_guard) gm.copy_guard.reset();
  if (gm.constraints && events.warning) {
    if (cmd.constrain == ConstraintLevel::kValues && !RulesHoldValues(*gm.rules))
      events.warning(
          "--constrain values: the model stores no category set or range (trained with --dp "
          "without dp_store_value_rules), so only the structure is enforced");
    for (const auto& w : gm.constraints->unenforced()) events.warning(w);
  }
  RunOptions run = cmd.run;
  run.output_policy.model_dir = cmd.model_dir;
  run.output_policy.training_input = model->meta.input_file;
  const Config& c = model->config;
  GenerateOptions& g = run.gen;
  g.num_lines = cmd.num_lines.value_or(c.gen_lines);
  g.temperature = cmd.gen_temp.value_or(c.gen_temp);
  g.gen_chars = cmd.gen_chars.value_or(c.gen_chars);
  g.predict_batch_size = cmd.predict_batch_size.value_or(c.predict_batch_size);
  g.max_invalid = cmd.max_invalid.value_or(c.max_invalid);
  if (!cmd.start_strings_file.empty()) {
    if (g.start_string)
      return DS_ERR(kInvalidArgument, "give either --start-string or --start-strings, not both");
    DS_ASSIGN_OR_RETURN(g.prefixes, ReadStartStrings(cmd.start_strings_file));
    g.prefixes_source = cmd.start_strings_file;
  }
  run.format = cmd.format.value_or(gm.delimiter ? OutputFormat::kCsv : OutputFormat::kText);
  // Worker memory: a clear error now rather than workers dying of bad_alloc
  // or the OOM killer (backend/memory_estimate.h).
  if (auto workers = ResolveParallelism(run.parallelism, AvailableCpus()); workers.ok()) {
    const int64_t wanted = g.prefixes.empty() ? g.num_lines : int64_t(g.prefixes.size());
    const int64_t n = std::max<int64_t>(1, std::min<int64_t>(*workers, wanted));
    const uint64_t per_worker = EstimateCpuInferBytes(model->meta.spec, g.predict_batch_size);
    DS_RETURN_IF_ERROR(CheckMemory(
        per_worker > UINT64_MAX / uint64_t(n) ? UINT64_MAX : per_worker * uint64_t(n), per_worker,
        AvailableHostMemory(),
        fmt::format("generation with {} worker{} of {} records side by side (vocabulary {}, {} x "
                    "LSTM {})",
                    n, n == 1 ? "" : "s", g.predict_batch_size, model->meta.spec.vocab_size,
                    model->meta.spec.num_layers, model->meta.spec.rnn_units),
        "reduce predict_batch_size or parallelism"));
  }
  // What else the records depend on, for --resume (generate/resume.h).
  run.resume_settings["model_weights_crc32"] = model->meta.weights_crc;
  run.resume_settings["checks"] = {{"field_count", cmd.checks.field_count},
                                   {"empty", cmd.checks.empty},
                                   {"type", cmd.checks.type},
                                   {"range", cmd.checks.range},
                                   {"category", cmd.checks.category}};
  run.resume_settings["constrain"] = ConstraintLevelName(cmd.constrain);
  if (gm.copy_guard)  // absent without one, so that older progress files still resume
    run.resume_settings["copy_guard"] = {{"rows", gm.copy_guard->size()},
                                         {"min_count", gm.copy_guard->min_count()}};
  if (!c.reset_states && events.warning)
    events.warning(
        "reset_states = false is ignored: every record starts from a reset state, which is what "
        "makes the output reproducible");
  // mpirun -n N (src/dist/generate.h): the record ids spread over the ranks.
  if (dist::Active() && dist::Size() > 1) return dist::RunShardedGeneration(gm, run, events, summary);
  return RunGeneration(gm, run, events, summary);
}

namespace {
std::atomic<bool> g_interrupted{false};
std::atomic<int64_t> g_first_signal_ns{0};

int64_t MonotonicNs() {  // clock_gettime is async-signal-safe
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void OnInterrupt(int sig) {
  const int64_t now = MonotonicNs();
  if (!g_interrupted.exchange(true)) {
    g_first_signal_ns.store(now);
    return;
  }
  // The same stop delivered twice at once (`timeout` signals the command and
  // then its process group) is one request; a later signal ends at once.
  if (now - g_first_signal_ns.load() < 200000000) return;
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}
}  // namespace

const std::atomic<bool>* InstallInterruptThread() {
  // Threads that exist already (a BLAS pool started when a library loaded)
  // keep the signals unblocked: the handler runs there (they are idle).
  struct sigaction sa = {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);  // inherited by every later thread
  std::thread([set] {
    while (true) {
      int sig = 0;
      if (::sigwait(&set, &sig) != 0) continue;
      const int64_t now = MonotonicNs();
      if (!g_interrupted.exchange(true)) {
        g_first_signal_ns.store(now);
        continue;
      }
      if (now - g_first_signal_ns.load() < 200000000) continue;  // the same request
      ::signal(sig, SIG_DFL);
      ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
      ::raise(sig);  // the default action: the process ends
    }
  }).detach();
  return &g_interrupted;
}

const std::atomic<bool>* InstallInterruptFlag() {
  struct sigaction sa = {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: poll() returns EINTR at once
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  return &g_interrupted;
}

}  // namespace ds
