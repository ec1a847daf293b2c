#include "generate/workers.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "generate/resume.h"
#include "generate/worker_pool.h"
#include "model/tensor_file.h"
#include "util/fs.h"

namespace ds {

int AvailableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  unsigned h = std::thread::hardware_concurrency();
  return h ? int(h) : 1;
}

Result<int> ResolveParallelism(double p, int cpus) {
  cpus = std::max(cpus, 1);
  if (!std::isfinite(p)) return DS_ERR(kInvalidArgument, "parallelism must be a number");
  if (p == 0) return cpus;
  if (p > 0 && p < 1) return std::max(1, int(std::floor(p * cpus)));
  if (p != std::floor(p))
    return DS_ERR(kInvalidArgument,
                  "parallelism {} must be 0 (all CPUs), n (workers), -x (CPUs - x) or a "
                  "fraction in (0, 1)",
                  p);
  if (p > 100000) return DS_ERR(kInvalidArgument, "parallelism {} is too large", p);
  if (p >= 1) return int(p);
  return std::max(1, cpus + int(p));
}

namespace {
std::string FormatSeconds(double s) {
  if (s < 0) return "?";
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{}m{:02d}s", int(s / 60), int(s) % 60);
  return fmt::format("{}h{:02d}m", int(s / 3600), (int(s) / 60) % 60);
}
}  // namespace

std::string FormatProgress(const GenerateProgress& p) {
  return fmt::format("{}/{} valid ({:.1f}% valid), {:.0f} records/s, {:.0f} tokens/s, ETA {}",
                     p.valid, p.wanted, 100.0 * p.valid_share, p.records_per_s, p.tokens_per_s,
                     p.final ? "0s" : FormatSeconds(p.eta_seconds));
}

std::string FormatSummary(const GenerateSummary& s) {
  std::string out = fmt::format("{} valid and {} invalid records in {:.1f}s ({} worker{}", s.valid,
                                s.invalid, s.seconds, s.workers, s.workers == 1 ? "" : "s");
  if (s.worker_failures) out += fmt::format(", {} died", s.worker_failures);
  out += ")";
  if (s.copies_rejected)
    out += fmt::format(" ({} exact cop{} of rare training rows rejected and sampled again)",
                       s.copies_rejected, s.copies_rejected == 1 ? "y" : "ies");
  out += s.output.empty() ? " -> stdout" : " -> " + s.output;
  if (s.resumed) out += fmt::format(" (resumed after {} valid)", s.resumed_valid);
  if (!s.complete) out += " (incomplete)";
  return out;
}

std::string FormatWorkerMemory(const GenerateSummary& s) {
  if (s.worker_memory.empty()) return "";
  size_t peak = 0, reserved = 0, limit = 0;
  int64_t retries = 0;
  for (const auto& m : s.worker_memory) {
    peak = std::max(peak, m.peak_allocated_bytes);
    reserved = std::max(reserved, m.peak_reserved_bytes);
    limit = std::max(limit, m.limit_bytes);
    retries += m.num_oom_retries;
  }
  std::string out = fmt::format("GPU memory per worker ({} workers): peak in use {}, peak reserved {}, limit {}",
                                s.worker_memory.size(), FormatBytes(peak), FormatBytes(reserved),
                                limit ? FormatBytes(limit) : "none");
  if (retries) out += fmt::format(", {} OOM retries", retries);
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;

// The settings a resumed run must share with the interrupted one: everything
// the output bytes depend on (not parallelism, not max_invalid).
nlohmann::json ResumeSettings(const GenerationModel& model, const RunOptions& o) {
  nlohmann::json s = o.resume_settings.is_object() ? o.resume_settings : nlohmann::json::object();
  const GenerateOptions& g = o.gen;
  s["format"] = OutputFormatName(o.format);
  s["seed"] = g.seed;
  s["gen_temp"] = g.temperature;
  s["gen_chars"] = g.gen_chars;
  s["max_tokens"] = g.max_tokens;
  s["predict_batch_size"] = g.predict_batch_size;
  if (g.prefixes.empty()) {
    s["num_lines"] = g.num_lines;
  } else {
    uint32_t crc = 0;
    for (const auto& p : g.prefixes) {
      crc = Crc32(p.data(), p.size(), crc);
      crc = Crc32("\n", 1, crc);
    }
    s["start_strings"] = g.prefixes.size();
    s["start_strings_crc32"] = crc;
  }
  s["start_string"] = g.start_string ? nlohmann::json(*g.start_string) : nlohmann::json(nullptr);
  s["header"] = model.header;
  s["delimiter"] = model.delimiter ? std::string(1, model.delimiter) : std::string();
  // As the progress file will hold them (invalid UTF-8 replaced), so that a
  // comparison with a file's settings compares like with like.
  return nlohmann::json::parse(s.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

// Test hooks: the option, else the environment variable.
int64_t TestHook(int64_t option, const char* env) {
  if (option >= 0) return option;
  const char* e = std::getenv(env);
  return e ? std::atoll(e) : option;
}

// The run's state that progress reports read.
struct RunState {
  Clock::time_point t0;
  int workers = 0;
  int64_t resumed_tokens = 0;
  const AttemptScheduler* sched = nullptr;
  const WorkerPool* pool = nullptr;
  const GenerateSummary* summary = nullptr;
  int64_t tokens() const { return resumed_tokens + pool->tokens(); }
};

void Report(const RunState& r, const GenerateEvents& events, bool final) {
  if (!events.progress) return;
  const AttemptScheduler& sched = *r.sched;
  GenerateProgress p;
  p.valid = sched.released_valid();
  p.invalid = sched.released_invalid();
  p.wanted = sched.wanted();
  p.tokens = r.tokens();
  p.seconds = std::chrono::duration<double>(Clock::now() - r.t0).count();
  if (p.seconds > 0) {
    p.records_per_s = double(p.valid - r.summary->resumed_valid) / p.seconds;
    p.tokens_per_s = double(p.tokens - r.resumed_tokens) / p.seconds;
  }
  if (p.valid + p.invalid > 0) p.valid_share = double(p.valid) / double(p.valid + p.invalid);
  if (p.records_per_s > 0) p.eta_seconds = double(p.wanted - p.valid) / p.records_per_s;
  // Workers running now; the final report comes after they exited: the
  // count the run used.
  p.workers = final ? r.workers - r.pool->failures() : r.pool->alive();
  p.final = final;
  events.progress(p);
}

// The main loop: attempts out, results in, records released in order, until
// the scheduler is finished or something fails.
Status Drive(const RunOptions& options, const GenerateEvents& events, int64_t kill_after_records,
             const RunState& run, AttemptScheduler& sched, WorkerPool& pool, ResumableOutput& out,
             int64_t* copies) {
  auto last_checkpoint = Clock::now();
  auto last_progress = run.t0;
  GeneratedRecord rec;
  while (true) {
    if (options.cancel && options.cancel->load())
      return DS_ERR(kCancelled, "generation interrupted after {} valid records",
                    sched.released_valid());
    if (pool.alive() == 0)
      return DS_ERR(kInternal, "every generation worker died ({} of {}); see the warnings above",
                    pool.failures(), run.workers);
    DS_RETURN_IF_ERROR(pool.Exchange(100));
    // Release finished records in order.
    while (sched.Pop(&rec)) {
      if (rec.copy_rejected) ++*copies;
      DS_RETURN_IF_ERROR(out.Write(rec, sched.position(), run.tokens()));
    }
    if (kill_after_records >= 0 && out.written() >= kill_after_records) {
      // Test hook: records past the last checkpoint reach the file, then the
      // process dies as under kill -9 (the workers follow: PR_SET_PDEATHSIG).
      (void)out.Flush();
      ::raise(SIGKILL);
    }
    DS_RETURN_IF_ERROR(sched.status());
    if (sched.finished()) return Status::Ok();
    auto now = Clock::now();
    if (std::chrono::duration<double>(now - last_checkpoint).count() >=
        options.checkpoint_interval_s) {
      DS_RETURN_IF_ERROR(out.Checkpoint(sched.position(), run.tokens()));
      last_checkpoint = now;
    }
    if (std::chrono::duration<double>(now - last_progress).count() >= events.progress_interval_s) {
      last_progress = now;
      Report(run, events, false);
    }
  }
}

}  // namespace

Status RunGeneration(const GenerationModel& model, const RunOptions& options,
                     const GenerateEvents& events, GenerateSummary* summary) {
  *summary = GenerateSummary{};
  RunState run;
  run.t0 = Clock::now();
  const GenerateOptions& go = options.gen;
  const int slots = go.predict_batch_size;
  DS_ASSIGN_OR_RETURN(int workers_n, ResolveParallelism(options.parallelism, AvailableCpus()));
  const int64_t wanted = go.prefixes.empty() ? go.num_lines : int64_t(go.prefixes.size());
  workers_n = int(std::max<int64_t>(1, std::min<int64_t>(workers_n, wanted)));
  DS_ASSIGN_OR_RETURN(RunPlan plan, PlanRun(model, go, ReleaseWindow(slots, workers_n)));
  if (go.filter)
    return DS_ERR(kInvalidArgument, "token filters run in-process only (RecordGenerator)");
  const int64_t kill_after = TestHook(options.test_kill_worker_after, "DS_TEST_KILL_WORKER_AFTER");
  const int64_t kill_after_records =
      TestHook(options.test_kill_after_records, "DS_TEST_KILL_AFTER_RECORDS");

  // ---- output: a new one, or the continuation of an interrupted run ----
  const ResumableOutputOptions oo{
      .path = options.output,
      .format = options.format,
      .header = model.header,
      .delimiter = model.delimiter,
      .resume = options.resume,
      .policy = options.output_policy,
      .settings = OutputSink::IsResumable(options.output) ? ResumeSettings(model, options)
                                                           : nlohmann::json::object(),
      .schedule = &plan.schedule,
      .warning = events.warning,
  };
  DS_ASSIGN_OR_RETURN(std::unique_ptr<ResumableOutput> out, ResumableOutput::Open(oo));
  summary->output = out->path();
  AttemptScheduler sched(plan.schedule, out->start());
  if (const auto& from = out->resumed()) {
    summary->resumed = true;
    summary->resumed_valid = from->position.valid;
    summary->resumed_records = from->records;
    run.resumed_tokens = from->tokens;
  }

  // ---- workers ----
  WorkerPool pool(model, plan, slots, &sched, events.warning);
  Status st = pool.Start(workers_n, kill_after, [&] { out->CloseInChild(); });
  if (!st.ok()) {
    out->Abort();
    return st;
  }
  summary->workers = workers_n;
  summary->device = model.device;
  run.workers = workers_n;
  run.sched = &sched;
  run.pool = &pool;
  run.summary = summary;

  st = out->Begin(sched.position(), run.tokens());
  if (st.ok())
    st = Drive(options, events, kill_after_records, run, sched, pool, *out,
               &summary->copies_rejected);
  pool.Stop();
  const bool complete = st.ok() && sched.finished();
  st = out->Finish(st, complete, sched.position(), run.tokens());
  summary->resumable = out->resumable();
  // After a write error, what the output holds; else every released record.
  summary->valid = out->write_ok() ? sched.released_valid() : out->flushed().position.valid;
  summary->invalid = out->write_ok() ? sched.released_invalid() : out->flushed().position.invalid;
  summary->tokens = run.tokens();
  summary->complete = sched.finished();
  summary->worker_failures = pool.failures();
  summary->worker_memory = pool.memory();
  summary->seconds = std::chrono::duration<double>(Clock::now() - run.t0).count();
  Report(run, events, true);
  return st;
}
}  // namespace ds
