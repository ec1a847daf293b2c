#include "generate/workers.h"

#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unordered_map>

#include "generate/resume.h"
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

enum FrameType : uint8_t { kTasks = 1, kResult = 2, kError = 3, kStats = 4 };
constexpr uint32_t kMaxFrame = 256u << 20;

// ---- frame encoding ----
void PutU32(std::string* b, uint32_t v) { b->append(reinterpret_cast<const char*>(&v), 4); }
void PutU64(std::string* b, uint64_t v) { b->append(reinterpret_cast<const char*>(&v), 8); }
void PutStr(std::string* b, const std::string& s) {
  PutU32(b, uint32_t(s.size()));
  b->append(s);
}
// Appends a frame: u32 length of (type + payload), u8 type, payload.
void PutFrame(std::string* out, FrameType type, const std::string& payload) {
  PutU32(out, uint32_t(payload.size() + 1));
  out->push_back(char(type));
  out->append(payload);
}

struct Reader {
  const char* p;
  const char* end;
  bool ok = true;
  template <typename T>
  T Get() {
    T v{};
    if (size_t(end - p) < sizeof(T)) {
      ok = false;
      return v;
    }
    std::memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    return v;
  }
  std::string Str() {
    uint32_t n = Get<uint32_t>();
    if (!ok || size_t(end - p) < n) {
      ok = false;
      return {};
    }
    std::string s(p, n);
    p += n;
    return s;
  }
};

void EncodeResult(const GeneratedRecord& r, std::string* out) {
  std::string pl;
  PutU64(&pl, r.id);
  PutU32(&pl, uint32_t(r.prefix));
  pl.push_back(char(r.valid ? 1 : 0));
  PutU64(&pl, uint64_t(r.tokens));
  PutStr(&pl, r.explain);
  PutU32(&pl, uint32_t(r.fields.size()));
  for (const auto& f : r.fields) PutStr(&pl, f);
  PutFrame(out, kResult, pl);
}

// STATS: the worker's allocator (GPU backends), sent when it changed.
void EncodeStats(const AllocatorStats& m, std::string* out) {
  std::string pl;
  for (uint64_t v : {uint64_t(m.allocated_bytes), uint64_t(m.peak_allocated_bytes),
                     uint64_t(m.reserved_bytes), uint64_t(m.peak_reserved_bytes),
                     uint64_t(m.limit_bytes), uint64_t(m.num_oom_retries),
                     uint64_t(m.num_oom_failures)})
    PutU64(&pl, v);
  PutFrame(out, kStats, pl);
}

bool DecodeStats(Reader& rd, AllocatorStats* m) {
  m->allocated_bytes = size_t(rd.Get<uint64_t>());
  m->peak_allocated_bytes = size_t(rd.Get<uint64_t>());
  m->reserved_bytes = size_t(rd.Get<uint64_t>());
  m->peak_reserved_bytes = size_t(rd.Get<uint64_t>());
  m->limit_bytes = size_t(rd.Get<uint64_t>());
  m->num_oom_retries = int64_t(rd.Get<uint64_t>());
  m->num_oom_failures = int64_t(rd.Get<uint64_t>());
  return rd.ok && rd.p == rd.end;
}

bool DecodeResult(Reader& rd, GeneratedRecord* r) {
  r->id = rd.Get<uint64_t>();
  r->prefix = int32_t(rd.Get<uint32_t>());
  r->valid = rd.Get<uint8_t>() != 0;
  r->tokens = int64_t(rd.Get<uint64_t>());
  r->explain = rd.Str();
  uint32_t n = rd.Get<uint32_t>();
  if (!rd.ok || n > (1u << 24)) return false;
  r->fields.resize(n);
  for (auto& f : r->fields) f = rd.Str();
  return rd.ok && rd.p == rd.end;
}

// Extracts complete frames from `buf` (type, payload) and calls fn for each.
// Returns false on a malformed frame.
template <typename Fn>
bool ParseFrames(std::string* buf, Fn&& fn) {
  size_t off = 0;
  bool ok = true;
  while (buf->size() - off >= 4) {
    uint32_t len;
    std::memcpy(&len, buf->data() + off, 4);
    if (len == 0 || len > kMaxFrame) {
      ok = false;
      break;
    }
    if (buf->size() - off - 4 < len) break;
    uint8_t type = uint8_t((*buf)[off + 4]);
    if (!fn(type, buf->data() + off + 5, buf->data() + off + 4 + len)) {
      ok = false;
      break;
    }
    off += 4 + size_t(len);
  }
  buf->erase(0, off);
  return ok;
}

bool SendAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t w = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    off += size_t(w);
  }
  return true;
}

// ---- worker process ----

[[noreturn]] void WorkerMain(int fd, pid_t parent, const GenerationModel& model,
                             const RunPlan& plan, int slots, int64_t kill_after) {
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGPIPE, SIG_IGN);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(3);
  omp_set_num_threads(1);
  int code = 0;
  try {
    auto made = model.make_backend(slots);
    if (!made.ok()) {
      std::string out;
      PutFrame(&out, kError, made.status().message());
      SendAll(fd, out);
      ::_exit(2);
    }
    std::unique_ptr<InferBackend> backend = std::move(made).value();
    std::unique_ptr<TokenFilter> filter;  // constrained decoding (model.make_filter)
    if (model.make_filter) {
      auto f = model.make_filter(slots);
      if (!f.ok()) {
        std::string out;
        PutFrame(&out, kError, f.status().message());
        SendAll(fd, out);
        ::_exit(2);
      }
      filter = std::move(f).value();
    }
    BatchSampler sampler(*model.tokenizer, *backend, plan.sampler, plan.prefixes, filter.get());
    std::string in, out;
    std::vector<GeneratedRecord> done;
    AllocatorStats last_stats;
    int64_t sent = 0;
    char rbuf[65536];
    while (true) {
      // Read tasks: block only when there is nothing to do.
      while (true) {
        ssize_t n = ::recv(fd, rbuf, sizeof(rbuf), sampler.idle() ? 0 : MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) ::_exit(0);  // the parent closed the socket: done
        in.append(rbuf, size_t(n));
        bool ok = ParseFrames(&in, [&](uint8_t type, const char* p, const char* end) {
          if (type != kTasks) return false;
          Reader rd{p, end};
          uint32_t count = rd.Get<uint32_t>();
          for (uint32_t k = 0; k < count && rd.ok; ++k) {
            GenTask t;
            t.id = rd.Get<uint64_t>();
            t.prefix = int32_t(rd.Get<uint32_t>());
            if (rd.ok) sampler.Submit(t);
          }
          return rd.ok;
        });
        if (!ok) ::_exit(4);
      }
      done.clear();
      sampler.Step(&done);
      if (done.empty()) continue;
      out.clear();
      for (auto& r : done) {
        ValidateRecord(model, &r);
        EncodeResult(r, &out);
      }
      if (auto m = backend->memory_stats()) {
        if (m->peak_allocated_bytes != last_stats.peak_allocated_bytes ||
            m->peak_reserved_bytes != last_stats.peak_reserved_bytes ||
            m->reserved_bytes != last_stats.reserved_bytes ||
            m->num_oom_retries != last_stats.num_oom_retries) {
          EncodeStats(*m, &out);
          last_stats = *m;
        }
      }
      if (!SendAll(fd, out)) ::_exit(0);  // parent gone
      sent += int64_t(done.size());
      if (kill_after >= 0 && sent >= kill_after) ::raise(SIGKILL);
    }
  } catch (const std::exception& e) {
    std::string out;
    PutFrame(&out, kError, std::string("worker failed: ") + e.what());
    SendAll(fd, out);
    code = 5;
  }
  ::_exit(code);
}

// ---- parent side ----

struct Worker {
  int index = 0;
  pid_t pid = -1;
  int fd = -1;
  bool alive = false;
  std::string in, out;
  std::unordered_map<uint64_t, GenTask> outstanding;
};

std::string DescribeExit(int status) {
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  return "stopped";
}

void ReapAll(std::vector<Worker>& workers) {
  for (auto& w : workers) {
    if (w.fd >= 0) {
      ::close(w.fd);
      w.fd = -1;
    }
  }
  auto deadline = Clock::now() + std::chrono::seconds(2);
  for (auto& w : workers) {
    if (w.pid <= 0) continue;
    int status;
    while (true) {
      pid_t r = ::waitpid(w.pid, &status, WNOHANG);
      if (r == w.pid || (r < 0 && errno != EINTR)) break;
      if (Clock::now() > deadline) {
        ::kill(w.pid, SIGKILL);
        while (::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
        }
        break;
      }
      ::usleep(1000);
    }
    w.pid = -1;
    w.alive = false;
  }
}

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

}  // namespace

Status RunGeneration(const GenerationModel& model, const RunOptions& options,
                     const GenerateEvents& events, GenerateSummary* summary) {
  *summary = GenerateSummary{};
  const auto t0 = Clock::now();
  const GenerateOptions& go = options.gen;
  const int slots = go.predict_batch_size;
  DS_ASSIGN_OR_RETURN(int workers_n, ResolveParallelism(options.parallelism, AvailableCpus()));
  const int64_t wanted = go.prefixes.empty() ? go.num_lines : int64_t(go.prefixes.size());
  workers_n = int(std::max<int64_t>(1, std::min<int64_t>(workers_n, wanted)));
  const int64_t per_worker = 2 * int64_t(slots);
  DS_ASSIGN_OR_RETURN(RunPlan plan, PlanRun(model, go, ReleaseWindow(slots, workers_n)));
  if (go.filter)
    return DS_ERR(kInvalidArgument, "token filters run in-process only (RecordGenerator)");
  int64_t kill_after = options.test_kill_worker_after;
  if (kill_after < 0) {
    if (const char* e = std::getenv("DS_TEST_KILL_WORKER_AFTER")) kill_after = std::atoll(e);
  }

  int64_t kill_after_records = options.test_kill_after_records;
  if (kill_after_records < 0) {
    if (const char* e = std::getenv("DS_TEST_KILL_AFTER_RECORDS"))
      kill_after_records = std::atoll(e);
  }

  // ---- output: a new one, or the continuation of an interrupted run ----
  const bool to_file = OutputSink::IsResumable(options.output);
  if (options.resume && !to_file)
    return DS_ERR(kInvalidArgument, "resuming needs an output file, not {}",
                  options.output.empty() || options.output == "-"
                      ? std::string("standard output")
                      : options.output + " (not a regular file)");
  const std::string progress_path = to_file ? ProgressPath(options.output) : std::string();
  nlohmann::json settings;
  std::optional<GenerationCheckpoint> resume_from;
  if (to_file) {
    settings = ResumeSettings(model, options);
    if (options.resume) {
      DS_ASSIGN_OR_RETURN(resume_from, ReadCheckpoint(progress_path));
      if (!resume_from) {
        if (events.warning)
          events.warning(fmt::format("nothing to resume ({} does not exist): starting a new run",
                                     progress_path));
      } else {
        DS_RETURN_IF_ERROR(CompareResumeSettings(resume_from->settings, settings, progress_path));
        Status cs = AttemptScheduler::CheckStart(plan.schedule, resume_from->position);
        if (!cs.ok()) return DS_ERR(kCorrupt, "{}: {}", progress_path, cs.message());
      }
    }
    OutputPolicy policy = options.output_policy;
    policy.resume = resume_from.has_value();
    DS_RETURN_IF_ERROR(CheckOutputTarget(options.output, policy));
    if (!options.resume && events.warning &&
        (PathExists(progress_path) || PathExists(PartialPath(options.output)))) {
      auto old = ReadCheckpoint(progress_path);
      std::string what = old.ok() && *old
                             ? fmt::format(" ({} valid records)", (*old)->position.valid)
                             : std::string();
      events.warning(fmt::format(
          "{} holds an interrupted run's output{}; starting again from the first record (run "
          "with resume, --resume on the command line, to continue it instead)",
          PathExists(PartialPath(options.output)) ? PartialPath(options.output) : options.output,
          what));
    }
  }
  std::unique_ptr<OutputSink> sink;
  if (resume_from) {
    DS_ASSIGN_OR_RETURN(
        sink, OutputSink::OpenForResume(options.output, resume_from->bytes, resume_from->crc32));
  } else {
    DS_ASSIGN_OR_RETURN(sink, OutputSink::Open(options.output));
    // Under the partial file's lock: the old progress file (if any) is stale.
    if (to_file && PathExists(progress_path) && ::unlink(progress_path.c_str()) != 0)
      return DS_ERR(kIo, "{}: cannot remove: {}", progress_path, strerror(errno));
  }
  summary->output = sink->is_stdout() ? "" : options.output;
  RecordWriter writer(options.format, model.header, model.delimiter, sink.get());
  AttemptScheduler sched(plan.schedule,
                         resume_from ? resume_from->position : AttemptScheduler::Position{});
  if (resume_from) {
    writer.Continue(resume_from->records);
    summary->resumed = true;
    summary->resumed_valid = resume_from->position.valid;
    summary->resumed_records = resume_from->records;
  }

  // ---- spawn ----
  std::vector<Worker> workers(static_cast<size_t>(workers_n));
  const pid_t self = ::getpid();
  ::fflush(nullptr);  // no duplicated stdio buffers in the children
  for (int i = 0; i < workers_n; ++i) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      Status st = DS_ERR(kIo, "cannot create a worker socket: {}", strerror(errno));
      ReapAll(workers);
      sink->Abort();
      return st;
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      Status st = DS_ERR(kResourceExhausted, "cannot start worker {}: {}", i, strerror(errno));
      ::close(sv[0]);
      ::close(sv[1]);
      ReapAll(workers);
      sink->Abort();
      return st;
    }
    if (pid == 0) {
      sink->CloseInChild();
      ::close(sv[0]);
      for (int k = 0; k < i; ++k) ::close(workers[size_t(k)].fd);
      WorkerMain(sv[1], self, model, plan, slots, i == 0 ? kill_after : -1);
    }
    ::close(sv[1]);
    ::fcntl(sv[0], F_SETFL, ::fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    Worker& w = workers[size_t(i)];
    w.index = i;
    w.pid = pid;
    w.fd = sv[0];
    w.alive = true;
  }
  summary->workers = workers_n;
  summary->device = model.device;

  const int64_t resumed_tokens = resume_from ? resume_from->tokens : 0;
  int64_t tokens = resumed_tokens;
  // What the output file holds: updated whenever the sink wrote its buffer
  // (which always ends at the last record handed to it), so that after a
  // write error (the sink truncates back to its last flush) the progress file
  // and the summary describe exactly the records in the file.
  GenerationCheckpoint flushed;
  flushed.settings = settings;
  if (resume_from) flushed = *resume_from;
  // `force`: the buffer was just written out (Sync), so the position covers
  // every released record even if the last ones wrote nothing (invalid
  // records in csv/text).
  auto note_flush = [&](bool force) {
    if (!sink->error().ok() || (!force && sink->committed() == flushed.bytes)) return;
    flushed.position = sched.position();
    flushed.bytes = sink->committed();
    flushed.crc32 = sink->crc32();
    flushed.records = writer.written();
    flushed.tokens = tokens;
  };
  // Checkpoint: the records written so far reach the disk, then the progress
  // file says so (generate/resume.h).
  auto checkpoint = [&]() -> Status {
    if (!to_file) return Status::Ok();
    DS_RETURN_IF_ERROR(sink->Sync());
    note_flush(/*force=*/true);
    flushed.tokens = tokens;
    return WriteCheckpoint(progress_path, flushed);
  };
  Status st = resume_from ? Status::Ok() : writer.Begin();
  if (st.ok() && !resume_from) st = checkpoint();
  auto last_checkpoint = Clock::now();
  auto last_progress = t0;
  auto report = [&](bool final) {
    if (!events.progress) return;
    GenerateProgress p;
    p.valid = sched.released_valid();
    p.invalid = sched.released_invalid();
    p.wanted = sched.wanted();
    p.tokens = tokens;
    p.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (p.seconds > 0) {
      p.records_per_s = double(p.valid - summary->resumed_valid) / p.seconds;
      p.tokens_per_s = double(p.tokens - resumed_tokens) / p.seconds;
    }
    if (p.valid + p.invalid > 0) p.valid_share = double(p.valid) / double(p.valid + p.invalid);
    if (p.records_per_s > 0) p.eta_seconds = double(p.wanted - p.valid) / p.records_per_s;
    // Workers running now; the final report comes after they exited: the
    // count the run used.
    p.workers = 0;
    for (auto& w : workers) p.workers += w.alive;
    if (final) p.workers = workers_n - summary->worker_failures;
    p.final = final;
    events.progress(p);
  };

  auto kill_worker = [&](Worker& w, const std::string& why) {
    if (!w.alive) return;
    w.alive = false;
    ::close(w.fd);
    w.fd = -1;
    int status = 0;
    std::string how = why;
    if (how.empty()) {
      while (::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
      }
      how = DescribeExit(status);
    } else {
      ::kill(w.pid, SIGKILL);
      while (::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    w.pid = -1;
    ++summary->worker_failures;
    std::vector<GenTask> lost;
    for (auto& [id, t] : w.outstanding) lost.push_back(t);
    std::sort(lost.begin(), lost.end(), [](auto& a, auto& b) { return a.id < b.id; });
    for (auto& t : lost) sched.Requeue(t);
    w.outstanding.clear();
    w.in.clear();
    w.out.clear();
    if (events.warning)
      events.warning(
          fmt::format("generation worker {} {}; its {} unfinished records are re-run "
                      "by the other workers",
                      w.index, how, lost.size()));
  };

  auto flush_out = [&](Worker& w) {
    while (!w.out.empty()) {
      ssize_t n = ::send(w.fd, w.out.data(), w.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) {
        kill_worker(w, "");
        return;
      }
      w.out.erase(0, size_t(n));
    }
  };

  std::vector<GenTask> tasks;
  std::vector<pollfd> pfds;
  std::vector<Worker*> pw;
  GeneratedRecord rec;
  char rbuf[65536];
  while (st.ok()) {
    if (options.cancel && options.cancel->load()) {
      st = DS_ERR(kCancelled, "generation interrupted after {} valid records",
                  sched.released_valid());
      break;
    }
    int alive = 0;
    for (auto& w : workers) alive += w.alive;
    if (alive == 0) {
      st = DS_ERR(kInternal, "every generation worker died ({} of {}); see the warnings above",
                  summary->worker_failures, workers_n);
      break;
    }
    // Hand out attempts, evenly over the workers.
    int64_t avail = sched.Available();
    if (avail > 0) {
      int64_t quota = (avail + alive - 1) / alive;
      for (auto& w : workers) {
        if (!w.alive) continue;
        int64_t room = per_worker - int64_t(w.outstanding.size());
        int64_t n = std::min({room, quota, int64_t(slots)});
        if (n <= 0) continue;
        tasks.clear();
        sched.Issue(n, &tasks);
        if (tasks.empty()) break;
        std::string pl;
        PutU32(&pl, uint32_t(tasks.size()));
        for (const auto& t : tasks) {
          PutU64(&pl, t.id);
          PutU32(&pl, uint32_t(t.prefix));
          w.outstanding[t.id] = t;
        }
        PutFrame(&w.out, kTasks, pl);
        flush_out(w);
      }
    }
    // Wait for results.
    pfds.clear();
    pw.clear();
    for (auto& w : workers) {
      if (!w.alive) continue;
      pfds.push_back(pollfd{w.fd, short(POLLIN | (w.out.empty() ? 0 : POLLOUT)), 0});
      pw.push_back(&w);
    }
    int pr = ::poll(pfds.data(), nfds_t(pfds.size()), 100);
    if (pr < 0 && errno != EINTR) {
      st = DS_ERR(kIo, "poll failed: {}", strerror(errno));
      break;
    }
    for (size_t k = 0; pr > 0 && k < pfds.size() && st.ok(); ++k) {
      Worker& w = *pw[k];
      if (!w.alive) continue;
      if (pfds[k].revents & POLLOUT) flush_out(w);
      if (!w.alive || !(pfds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      bool eof = false;
      while (true) {
        ssize_t n = ::recv(w.fd, rbuf, sizeof(rbuf), MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) {
          eof = true;
          break;
        }
        w.in.append(rbuf, size_t(n));
      }
      bool ok = ParseFrames(&w.in, [&](uint8_t type, const char* p, const char* end) {
        Reader rd{p, end};
        if (type == kError) {
          std::string msg = rd.Str();
          st = DS_ERR(kInternal, "generation worker {} failed: {}", w.index, msg);
          return true;
        }
        if (type == kStats) {
          AllocatorStats m;
          if (!DecodeStats(rd, &m)) return false;
          if (summary->worker_memory.size() <= size_t(w.index))
            summary->worker_memory.resize(size_t(w.index) + 1);
          summary->worker_memory[size_t(w.index)] = m;
          return true;
        }
        if (type != kResult) return false;
        GeneratedRecord r;
        if (!DecodeResult(rd, &r)) return false;
        auto it = w.outstanding.find(r.id);
        if (it == w.outstanding.end()) return false;  // not ours: protocol error
        w.outstanding.erase(it);
        r.text = JoinFields(r.fields, model.delimiter);
        tokens += r.tokens;
        sched.Complete(std::move(r));
        return true;
      });
      if (!ok) {
        kill_worker(w, "sent a malformed message (killed)");
      } else if (eof) {
        kill_worker(w, "");
      }
    }
    // Release finished records in order.
    while (st.ok() && sched.Pop(&rec)) {
      st = writer.Write(rec);
      if (st.ok()) note_flush(/*force=*/false);
    }
    if (st.ok() && kill_after_records >= 0 && writer.written() >= kill_after_records) {
      // Test hook: records past the last checkpoint reach the file, then the
      // process dies as under kill -9 (the workers follow: PR_SET_PDEATHSIG).
      (void)sink->Flush();
      ::raise(SIGKILL);
    }
    if (st.ok() && !sched.status().ok()) st = sched.status();
    if (st.ok() && sched.finished()) break;
    auto now = Clock::now();
    if (st.ok() && std::chrono::duration<double>(now - last_checkpoint).count() >=
                       options.checkpoint_interval_s) {
      st = checkpoint();
      last_checkpoint = now;
    }
    if (std::chrono::duration<double>(now - last_progress).count() >= events.progress_interval_s) {
      last_progress = now;
      report(false);
    }
  }

  ReapAll(workers);
  const bool complete = st.ok() && sched.finished();
  if (to_file && !complete) {
    // Stopped early: record how far the output is good, for a resumed run.
    // After a write error the file was truncated back to its last flush,
    // which `flushed` describes (on a full disk this may fail too; the
    // previous checkpoint then stays, and it is still right).
    Status cs = sink->error().ok() ? checkpoint() : WriteCheckpoint(progress_path, flushed);
    if (st.ok()) st = cs;
  }
  Status fin = sink->Finish();
  if (st.ok()) st = fin;
  if (to_file) {
    if (st.ok() && complete) {
      if (::unlink(progress_path.c_str()) != 0 && errno != ENOENT)
        st = DS_ERR(kIo, "{}: cannot remove: {}", progress_path, strerror(errno));
    } else {
      summary->resumable = PathExists(progress_path);
    }
  }
  // After a write error, what the output holds; else every released record.
  summary->valid = sink->error().ok() ? sched.released_valid() : flushed.position.valid;
  summary->invalid = sink->error().ok() ? sched.released_invalid() : flushed.position.invalid;
  summary->tokens = tokens;
  summary->complete = sched.finished();
  summary->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  report(true);
  return st;
}

}  // namespace ds
