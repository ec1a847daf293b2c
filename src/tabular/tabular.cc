#include "tabular/tabular.h"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "dist/batches.h"
#include "generate/generate.h"
#include "generate/output.h"
#include "io/csv.h"
#include "io/input.h"
#include "model/model_dir.h"
#include "tabular/association.h"
#include "util/fs.h"
#include "util/json_fields.h"
#include "util/subprocess.h"

namespace ds {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

constexpr const char* kSpecFile = "tabular.json";
constexpr const char* kTmpDir = ".tabular-tmp";
// An unfinished run: the plan and settings that --resume needs (with the
// batch CSVs in kTmpDir and the batch directories' own checkpoints).
constexpr const char* kResumeFile = "tabular_checkpoint.json";
constexpr int kResumeVersion = 1;

uint64_t Mix(uint64_t seed, uint64_t k) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (k + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// "a, b, c" shortened for messages.
std::string Names(const std::vector<std::string>& v, size_t max = 4) {
  std::vector<std::string> s(v.begin(), v.begin() + std::min(v.size(), max));
  std::string out = fmt::format("{}", fmt::join(s, ", "));
  if (v.size() > max) out += fmt::format(", ... {} columns", v.size());
  return out;
}

std::string BatchName(const TabularSpec& spec, size_t b) {
  return fmt::format("batch {} ({})", b, Names(spec.batches[b].columns));
}

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

char TableDelimiter(const Config& c) {
  if (c.field_delimiter.empty()) return ',';
  Result<char> d = ParseDelimiter(c.field_delimiter);
  return d.ok() ? *d : ',';
}

// A byte that occurs in no value of the table: the table's delimiter when
// possible (see TabularSpec::batch_delimiter).
Result<char> ChooseBatchDelimiter(const RowTable& t) {
  bool seen[256] = {};
  for (const auto& row : t.rows)
    for (const auto& v : row)
      for (unsigned char c : v) seen[c] = true;
  for (char c : {t.delimiter, '\x1f', '\x1e', '\x1d', '\x1c', '|', ';', '\t', '~', '^', '\x01'})
    if (!seen[static_cast<unsigned char>(c)]) return c;
  for (int c = 2; c < 0x7f; ++c)
    if (!seen[c] && c != '"' && c != '\r' && c != '\n') return char(c);
  return DS_ERR(kInvalidInput,
                "{}: every ASCII byte occurs in the values; no field delimiter is left for the "
                "batch models",
                t.path);
}

// ---------------------------------------------------------------------------
// Per-batch training in child processes.

// A double that is NaN when unknown: null in JSON (which has no NaN), and
// any non-number reads back as NaN.
JsonField<BatchTrainResult> MaybeNumber(const char* key, double BatchTrainResult::*member) {
  return {key, JsonNeed::kOptional,
          [member](const BatchTrainResult& r) {
            return std::isnan(r.*member) ? Json(nullptr) : Json(r.*member);
          },
          [member](const Json& j, BatchTrainResult* r, const std::string&) {
            r->*member = j.is_number() ? j.get<double>() : NAN;
            return Status::Ok();
          }};
}

// The "done" message of a batch process (its BatchTrainResult), one row per key.
const JsonFields<BatchTrainResult>& DoneFields() {
  using R = BatchTrainResult;
  constexpr JsonNeed kOpt = JsonNeed::kOptional;
  static const JsonFields<R> fields = {
      JsonMember("records", &R::records, kOpt),
      JsonMember("epochs_run", &R::epochs_run, kOpt),
      JsonMember("best_epoch", &R::best_epoch, kOpt),
      MaybeNumber("best_metric", &R::best_metric),
      MaybeNumber("loss", &R::loss),
      MaybeNumber("val_loss", &R::val_loss),
      MaybeNumber("seconds", &R::seconds),
      MaybeNumber("tokens_per_s", &R::tokens_per_s),
      JsonMember("stop", &R::stop_reason, kOpt),
  };
  return fields;
}

// Sends the child's Train() events to the parent as JSON lines.
class PipeObserver : public TrainObserver {
 public:
  explicit PipeObserver(int fd) : fd_(fd) {}
  void Send(const Json& j) { (void)WriteAll(fd_, Dump(j) + "\n"); }  // false: parent gone
  void OnInfo(const std::string& m) override { Send({{"t", "info"}, {"m", m}}); }
  void OnEpoch(const EpochResult& r) override {
    Json j = EpochToJson(r);
    j["t"] = "epoch";
    Send(j);
  }

 private:
  int fd_;
};

[[noreturn]] void RunChild(int fd, const TrainOptions& options) {
  // The parent stops the batch processes with SIGTERM (also when it dies):
  // Train() stops between steps and keeps its last saved epoch.
  TrainOptions opts = options;
  opts.cancel = InstallInterruptThread();
  ::signal(SIGINT, SIG_IGN);  // a terminal's Ctrl-C goes to the parent's decision
  ::signal(SIGPIPE, SIG_IGN);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  PipeObserver obs(fd);
  Result<TrainSummary> r = Train(opts, &obs);
  if (!r.ok()) {
    obs.Send({{"t", "error"}, {"code", int(r.status().code())}, {"m", r.status().message()}});
    ::_exit(1);
  }
  const TrainSummary& s = *r;
  BatchTrainResult res;
  res.loss = res.val_loss = NAN;
  for (const auto& e : s.history)
    if (e.best) res.loss = e.loss, res.val_loss = e.val_loss;
  res.records = s.meta.records;
  res.epochs_run = s.meta.epochs_run;
  res.best_epoch = s.meta.best_epoch;
  res.best_metric = s.meta.best_metric;
  res.seconds = s.seconds;
  res.tokens_per_s = s.tokens_per_s;
  res.stop_reason = s.meta.stop_reason;
  Json done = ToJsonFields(res, DoneFields());
  done["t"] = "done";
  obs.Send(done);
  ::_exit(0);
}

struct Child {
  Subprocess proc;
  int batch = 0;
  std::string buf;
  bool done = false;
  Status error;
  BatchTrainResult result;
  Clock::time_point end;  // of its time budget (scheduling)
};

void HandleLine(Child& c, const std::string& line, TabularObserver& obs);

// Passes on the complete lines the child has sent.
void HandleLines(Child& c, TabularObserver& obs) {
  size_t pos;
  while ((pos = c.buf.find('\n')) != std::string::npos) {
    HandleLine(c, c.buf.substr(0, pos), obs);
    c.buf.erase(0, pos + 1);
  }
}

// Stops the batch processes (SIGTERM: each stops between steps and keeps its
// last saved epoch), passes on what they still report, and waits for them.
void KillAll(std::vector<Child>& running, TabularObserver* obs = nullptr) {
  for (auto& c : running) c.proc.Signal(SIGTERM);
  for (auto& c : running) {
    if (obs) {
      c.proc.ReadToEnd(&c.buf);
      HandleLines(c, *obs);
    }
    c.proc.CloseChannel();
    (void)c.proc.Wait();
  }
  running.clear();
}

// Handles one JSON line from a child.
void HandleLine(Child& c, const std::string& line, TabularObserver& obs) {
  Json j = Json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return;
  try {
    std::string t = j.value("t", "");
    if (t == "info") {
      obs.OnBatchInfo(c.batch, j.value("m", ""));
    } else if (t == "epoch") {
      obs.OnBatchEpoch(c.batch, EpochFromJson(j));
    } else if (t == "error") {
      int code = j.value("code", int(Code::kInternal));
      if (code <= 0 || code > int(Code::kInternal)) code = int(Code::kInternal);
      c.error = Status(Code(code), j.value("m", std::string("unknown error")), __FILE__, __LINE__);
    } else if (t == "done") {
      c.done = true;
      c.result.batch = c.batch;
      (void)ReadJsonFields(j, DoneFields(), &c.result, "");  // throws on a mistyped value
    }
  } catch (const Json::exception&) {
  }
}

struct BatchJob {
  int batch = 0;
  TrainOptions options;
  int64_t width = 0;  // columns incl. conditioning (scheduling: widest first)
  int64_t bytes = 0;  // of its CSV: the share of the time budget
};

// The time budget of a batch starting now, of `remaining` seconds: the largest
// k such that the jobs not yet started (`pending`, this one first, k seconds
// per byte each) scheduled greedily on the free slots and on those of the
// running batches (free when their budgets end, `busy` seconds from now) all
// end in time. The batch gets k x its bytes: later batches are not starved.
double AllotSeconds(double remaining, int procs, const std::vector<double>& busy,
                    const std::vector<int64_t>& pending) {
  auto fits = [&](double k) {
    std::vector<double> slots = busy;
    slots.resize(size_t(std::max<int>(procs, int(busy.size()) + 1)), 0.0);
    for (int64_t bytes : pending) {
      auto it = std::min_element(slots.begin(), slots.end());
      *it += k * double(std::max<int64_t>(bytes, 1));
      if (*it > remaining) return false;
    }
    return true;
  };
  double lo = 0, hi = remaining / double(std::max<int64_t>(pending.front(), 1));
  for (int i = 0; i < 60; ++i) (fits(0.5 * (lo + hi)) ? lo : hi) = 0.5 * (lo + hi);
  return std::min(remaining, lo * double(std::max<int64_t>(pending.front(), 1)));
}

// The time budget of jobs[j], starting now (the jobs after it are not started).
double BudgetFor(const std::vector<BatchJob>& jobs, size_t j, const std::vector<Child>& running,
                 int procs, Clock::time_point deadline) {
  const auto now = Clock::now();
  std::vector<double> busy;
  for (const auto& c : running)
    busy.push_back(std::max(0.0, std::chrono::duration<double>(c.end - now).count()));
  std::vector<int64_t> pending;
  for (size_t k = j; k < jobs.size(); ++k) pending.push_back(jobs[k].bytes);
  const double left = std::max(0.0, std::chrono::duration<double>(deadline - now).count());
  return std::max(1e-3, AllotSeconds(left, procs, busy, pending));
}

// Starts jobs[next] (its time budget set first, with a deadline).
Status StartJob(std::vector<BatchJob>& jobs, size_t next, int procs, const TabularSpec& spec,
                std::optional<Clock::time_point> deadline, TabularObserver& obs,
                std::vector<Child>* running) {
  BatchJob& job = jobs[next];
  std::string budget_note;
  if (deadline) {
    job.options.time_budget_seconds = BudgetFor(jobs, next, *running, procs, *deadline);
    budget_note = fmt::format(", time budget {:.1f}s", job.options.time_budget_seconds);
  }
  Result<Subprocess> proc =
      Subprocess::Spawn(Subprocess::Channel::kPipe, [&](int fd) { RunChild(fd, job.options); });
  if (!proc.ok()) {
    if (proc.status().code() == Code::kIo)
      return DS_ERR(kIo, "pipe failed: {}", proc.status().message());
    return DS_ERR(kResourceExhausted, "fork failed: {}", proc.status().message());
  }
  Child c;
  c.proc = std::move(proc).value();
  c.batch = job.batch;
  c.result.threads = job.options.config.threads;
  c.end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(job.options.time_budget_seconds));
  running->push_back(std::move(c));
  const TabularBatch& b = spec.batches[size_t(job.batch)];
  obs.OnInfo(fmt::format("{}: {} ({} + {} conditioning columns, {} threads{})",
                         BatchName(spec, size_t(job.batch)),
                         job.options.resume ? "resuming" : "training", b.columns.size(),
                         b.condition.size(), job.options.config.threads, budget_note));
  return Status::Ok();
}

// A batch process whose output ended: its result, or the failure.
Status FinishChild(Child& c, const TabularSpec& spec) {
  c.proc.CloseChannel();
  const int st = c.proc.Wait();
  const std::string name = BatchName(spec, size_t(c.batch));
  if (!c.error.ok())
    return Status(c.error.code(), name + ": " + c.error.message(), c.error.file(), c.error.line());
  if (c.done && ExitToStatus(st, "").ok()) return Status::Ok();
  if (TermSignal(st)) return ExitToStatus(st, name + ": the training process was");
  return DS_ERR(kInternal, "{}: the training process ended without a result", name);
}

// Runs the jobs in at most `procs` child processes at a time; with a deadline,
// each batch gets its share of the time left (AllotSeconds).
Status RunBatchJobs(std::vector<BatchJob> jobs, int procs, const TabularSpec& spec,
                    const std::atomic<bool>* cancel, std::optional<Clock::time_point> deadline,
                    TabularObserver& obs, std::vector<BatchTrainResult>* results) {
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const BatchJob& a, const BatchJob& b) { return a.width > b.width; });
  results->assign(spec.batches.size(), BatchTrainResult{});
  std::vector<Child> running;
  size_t next = 0;
  // Stops the running batches; `drain`: passes on what they still report.
  auto fail = [&](Status st, bool drain) {
    KillAll(running, drain ? &obs : nullptr);
    return st;
  };
  while (next < jobs.size() || !running.empty()) {
    if (cancel && cancel->load()) return fail(DS_ERR(kCancelled, "training interrupted"), true);
    while (next < jobs.size() && int(running.size()) < procs) {
      Status st = StartJob(jobs, next++, procs, spec, deadline, obs, &running);
      if (!st.ok()) return fail(st, false);
    }
    std::vector<pollfd> pfds;
    for (const auto& c : running) pfds.push_back({c.proc.fd(), POLLIN, 0});
    Result<int> pr = PollFds(&pfds, 250);
    if (!pr.ok()) return fail(pr.status(), false);
    for (size_t i = 0; i < running.size();) {
      Child& c = running[i];
      const bool eof = !c.proc.ReadAvailable(&c.buf);
      HandleLines(c, obs);
      if (!eof) {
        ++i;
        continue;
      }
      Status failure = FinishChild(c, spec);
      if (!failure.ok()) {
        running.erase(running.begin() + long(i));
        KillAll(running, &obs);
        return failure;
      }
      (*results)[size_t(c.batch)] = c.result;
      obs.OnBatchTrained(c.result);
      running.erase(running.begin() + long(i));
    }
  }
  return Status::Ok();
}

// Removes what a failed training run left (see TrainTabular).
void CleanUp(const std::string& dir, bool created, size_t batches) {
  if (created) {
    (void)RemoveTree(dir);
    return;
  }
  std::remove((dir + "/" + kResumeFile).c_str());  // first: never resumable with parts missing
  (void)RemoveTree(dir + "/" + kTmpDir);
  for (size_t b = 0; b < batches; ++b) (void)RemoveTree(fmt::format("{}/batch_{}", dir, b));
}

// A model (or an interrupted run) in dir that a new run must not replace
// without --overwrite.
Status RefuseExisting(const std::string& dir, bool overwrite) {
  if (overwrite) return Status::Ok();
  const bool tabular = IsTabularModel(dir);
  if (tabular || LooksLikeModel(dir))
    return DS_ERR(kAlreadyExists,
                  "{}: already holds a trained {}model; pass --overwrite to replace it", dir,
                  tabular ? "tabular " : "");
  if (PathExists(dir + "/" + kResumeFile))
    return DS_ERR(kAlreadyExists,
                  "{}: holds an interrupted tabular training run; continue it with `datasynth "
                  "train --tabular --resume --model-dir {}` or pass --overwrite to start again",
                  dir, dir);
  return Status::Ok();
}

Status PrepareModelDir(const std::string& dir, bool overwrite, bool* created) {
  *created = false;
  if (dir.empty()) return DS_ERR(kInvalidArgument, "no model directory given (--model-dir)");
  DS_RETURN_IF_ERROR(RefuseExisting(dir, overwrite));
  // tabular.json (and the resume state) first: the directory never pairs an
  // old description with new batches.
  for (const char* f : {kSpecFile, kResumeFile})
    if (std::remove((dir + "/" + f).c_str()) != 0 && errno != ENOENT && errno != ENOTDIR)
      return DS_ERR(kIo, "{}/{}: cannot remove: {}", dir, f, strerror(errno));
  if (!PathExists(dir)) {
    DS_RETURN_IF_ERROR(MakeDirs(dir));
    *created = true;
    return Status::Ok();
  }
  // Old batch directories and temporary files go.
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name == kTmpDir || (name.rfind("batch_", 0) == 0 && name.size() > 6 &&
                            name.find_first_not_of("0123456789", 6) == std::string::npos))
      DS_RETURN_IF_ERROR(RemoveTree(e.path().string()));
  }
  return Status::Ok();
}

// The settings of batch b's model: the table's, with the batch delimiter and
// the batch's own seed.
Config BatchConfig(const Config& base, const TabularSpec& spec, size_t b) {
  Config c = base;
  c.field_delimiter = std::string(1, spec.batch_delimiter);
  c.max_lines = 0;
  c.overwrite = true;
  c.seed = int64_t(Mix(spec.seed, b) >> 1) | 1;
  // Batches start from their conditioning columns and seeds fix the leading
  // columns: both need the field tokenizer's header order (docs/typed_fields.md).
  if (!base.IsExplicit("field_order")) c.field_order = "header";
  return c;
}

// What a batch directory holds: 0 nothing saved, 1 saved epochs, 2 finished.
int BatchState(const std::string& batch_dir) {
  Result<std::string> text = ReadFile(batch_dir + "/checkpoint.json", 256 << 20);
  if (!text.ok()) return 0;
  Json j = Json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("done") || !j["done"].is_boolean()) return 1;
  return j["done"].get<bool>() ? 2 : 1;
}

// One training run of a table (fresh or resumed), from the batch jobs on.
struct TabularRun {
  const TabularTrainOptions* o = nullptr;
  TabularSpec spec;
  Config base;  // the batch models' settings before BatchConfig
  int parallel_batches = 0;
  std::vector<BatchJob> jobs;
  bool created = false, resumed = false;
  double prior_wall = 0;  // seconds of earlier sessions (the time budget)
  Clock::time_point t0;
};

Status WriteResumeState(const TabularRun& run, double wall_seconds) {
  Json j = {{"version", kResumeVersion},
            {"spec", run.spec.ToJson()},
            {"config", run.base.ToJson()},
            {"parallel_batches", run.parallel_batches},
            {"input_path", run.spec.input_path},
            {"wall_seconds", wall_seconds}};
  return WriteFileAtomic(run.o->model_dir + "/" + kResumeFile, j.dump(1) + "\n");
}

// A failed or interrupted run: an interrupted one that saved something stays
// resumable; a fresh one that fails otherwise leaves nothing (CleanUp).
Status RunFailed(const TabularRun& run, const Status& st) {
  const std::string& dir = run.o->model_dir;
  const size_t n = run.spec.batches.size();
  size_t saved = 0, finished = 0;
  for (size_t b = 0; b < n; ++b) {
    int state = BatchState(dir + "/" + run.spec.batches[b].dir);
    saved += state > 0;
    finished += state == 2;
  }
  const bool cancelled = st.code() == Code::kCancelled;
  if (cancelled && (saved > 0 || run.resumed)) {
    (void)WriteResumeState(run, run.prior_wall + Since(run.t0));
    return DS_ERR(kCancelled,
                  "interrupted; continue with --resume (in {}: {} of {} batch models finished, "
                  "{} partly trained; finished ones are not trained again)",
                  dir, finished, n, saved - finished);
  }
  if (run.resumed) return st;  // the interrupted run's state stays for another --resume
  CleanUp(dir, run.created, n);
  if (cancelled)
    return DS_ERR(kCancelled,
                  "interrupted before any batch model saved an epoch; removed {} (nothing to "
                  "resume)",
                  run.created ? dir : "this run's files from " + dir);
  return st;
}

// Typed fields: up to 30 columns, one model of the whole row scored higher
// than column batches; on a 74-column table batches did (docs/tabular.md).
// Applies when tabular_batch_size and header groups were not given and the
// batch models' tokenizer is field (the default unless another is given, or
// --dp, which uses char). Returns whether it set one batch of all columns.
bool OneModelForFields(const Config& config, size_t columns, TabularConfig* t) {
  constexpr size_t kOneModelColumns = 30;
  const bool field = config.IsExplicit("tokenizer") ? config.tokenizer == "field" : !config.dp;
  if (!t->batch_columns_default || !field || !t->header_groups.empty() ||
      columns <= size_t(t->batch_columns) || columns > kOneModelColumns)
    return false;
  t->batch_columns = int(columns);
  return true;
}

// 3. trains the batches, 4. writes tabular.json.
Result<TabularTrainSummary> RunTabular(TabularRun& run, TabularObserver& obs) {
  const std::string& dir = run.o->model_dir;
  const int budget = run.base.threads > 0 ? run.base.threads : AvailableCpus();
  int procs = run.parallel_batches > 0 ? run.parallel_batches : budget;
  procs = std::max(1, std::min<int>(procs, int(run.jobs.size())));
  const int threads = std::max(1, budget / procs);
  for (auto& j : run.jobs) j.options.config.threads = threads;
  obs.OnInfo(fmt::format("training {} batches, {} at a time with {} thread{} each",
                         run.jobs.size(), procs, threads, threads == 1 ? "" : "s"));
  std::optional<Clock::time_point> deadline;
  if (run.base.max_training_time_seconds > 0) {
    const double left = std::max(run.base.max_training_time_seconds - run.prior_wall, 1e-3);
    deadline = run.t0 + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(left));
    obs.OnInfo(fmt::format("time budget: {:.4g}s for the whole run{}, shared by the batches in "
                           "proportion to their size",
                           run.base.max_training_time_seconds,
                           run.prior_wall > 0
                               ? fmt::format(" ({:.1f}s used by earlier sessions)", run.prior_wall)
                               : ""));
  }
  std::vector<BatchTrainResult> results;
  // mpirun (src/dist/batches.h): batch b trains on rank b % N; the others' results come here.
  dist::BatchRequest remote{run.spec, procs, std::nullopt, {}};
  if (deadline) remote.seconds = std::chrono::duration<double>(*deadline - Clock::now()).count();
  std::vector<BatchJob> own;
  std::vector<int> remote_ids;
  for (auto& j : run.jobs) {
    if (dist::OwnBatch(j.batch)) {
      own.push_back(std::move(j));
    } else {
      remote_ids.push_back(j.batch);
      remote.jobs.push_back({j.batch, j.options, j.width, j.bytes});
    }
  }
  Status st = dist::SendBatchJobs(remote);
  if (st.ok()) {
    dist::Local local;  // the batch processes train as single processes
    st = RunBatchJobs(std::move(own), procs, run.spec, run.o->cancel, deadline, obs, &results);
  }
  if (st.ok()) st = dist::CollectBatchResults(remote_ids, run.o->cancel, &results);
  for (int b : remote_ids)
    if (st.ok()) obs.OnBatchTrained(results[size_t(b)]);
  if (st.ok())
    st = WriteFileAtomic(dir + "/" + kSpecFile, run.spec.ToJson().dump(1) + "\n");
  if (!st.ok()) return RunFailed(run, st);
  std::remove((dir + "/" + kResumeFile).c_str());
  (void)RemoveTree(dir + "/" + kTmpDir);
  TabularTrainSummary summary;
  summary.spec = run.spec;
  summary.batches = std::move(results);
  summary.processes = procs;
  summary.seconds = Since(run.t0);
  return summary;
}

// mpirun, ranks other than 0: the batch jobs rank 0 sends, until it ends the service.
Result<TabularTrainSummary> ServeBatches(const std::atomic<bool>* cancel, TabularObserver& obs) {
  dist::BatchRequest req;
  while (true) {
    DS_ASSIGN_OR_RETURN(bool more, dist::ReceiveBatchJobs(&req));
    if (!more) return TabularTrainSummary{};
    std::vector<BatchJob> jobs;
    std::vector<int> ids;
    for (auto& m : req.jobs) {
      ids.push_back(m.batch);
      jobs.push_back({m.batch, std::move(m.options), m.width, m.bytes});
    }
    std::optional<Clock::time_point> deadline;
    if (req.seconds)
      deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(*req.seconds));
    std::vector<BatchTrainResult> results;
    dist::Local local;  // the batch processes train as single processes
    Status st = RunBatchJobs(std::move(jobs), req.procs, req.spec, cancel, deadline, obs, &results);
    DS_RETURN_IF_ERROR(dist::ReturnBatchResults(st, results, ids));
  }
}

// train --tabular --resume: the stored plan and settings, the kept batch CSVs;
// finished batches are only reloaded, the others continue from their
// checkpoints (or start).
Result<TabularTrainSummary> ResumeTabular(const TabularTrainOptions& o, TabularObserver& obs,
                                          Clock::time_point t0) {
  const std::string& dir = o.model_dir;
  const std::string path = dir + "/" + kResumeFile;
  if (!PathExists(path))
    return IsTabularModel(dir)
               ? DS_ERR(kInvalidArgument, "{}: training already finished; nothing to resume", dir)
               : DS_ERR(kNotFound, "{}: nothing to resume (no {})", dir, kResumeFile);
  DS_ASSIGN_OR_RETURN(std::string text, ReadFile(path, 64 << 20));
  Json j = Json::parse(text, nullptr, false);
  if (!j.is_object()) return DS_ERR(kCorrupt, "{}: not valid JSON", path);
  TabularRun run;
  run.o = &o;
  run.t0 = t0;
  run.resumed = true;
  try {
    if (j.at("version").get<int>() != kResumeVersion)
      return DS_ERR(kCorrupt, "{}: unsupported version", path);
    DS_ASSIGN_OR_RETURN(run.spec, TabularSpec::FromJson(j.at("spec"), path));
    DS_RETURN_IF_ERROR(run.base.MergeJson(j.at("config"), path));
    run.parallel_batches = o.tabular.parallel_batches > 0 ? o.tabular.parallel_batches
                                                          : j.at("parallel_batches").get<int>();
    run.prior_wall = j.value("wall_seconds", 0.0);
  } catch (const Json::exception& e) {
    return DS_ERR(kCorrupt, "{}: {}", path, e.what());
  }
  // What may change between sessions (as for train --resume).
  const Json given = o.config.ToJson();
  for (const char* k : {"epochs", "max_training_time_seconds", "max_training_steps", "threads"})
    if (o.config.IsExplicit(k)) DS_RETURN_IF_ERROR(run.base.SetJson(k, given[k]));
  int finished = 0;
  for (size_t b = 0; b < run.spec.batches.size(); ++b) {
    BatchJob job;
    job.batch = int(b);
    job.width = int64_t(run.spec.batches[b].columns.size() + run.spec.batches[b].condition.size());
    job.options.input_path = fmt::format("{}/{}/batch_{}.csv", dir, kTmpDir, b);
    job.options.model_dir = dir + "/" + run.spec.batches[b].dir;
    job.options.config = BatchConfig(run.base, run.spec, b);
    std::error_code ec;
    job.bytes = int64_t(std::filesystem::file_size(job.options.input_path, ec));
    if (ec)
      return DS_ERR(kCorrupt, "{}: missing ({}); train again with --overwrite",
                    job.options.input_path, ec.message());
    const int state = BatchState(job.options.model_dir);
    job.options.resume = state > 0;
    finished += state == 2;
    if (state == 2) job.bytes = 0;  // only reloaded: no share of the time budget
    run.jobs.push_back(std::move(job));
  }
  obs.OnInfo(fmt::format("resuming {}: {} of {} batch models finished", dir, finished,
                         run.jobs.size()));
  return RunTabular(run, obs);
}

}  // namespace

// ---------------------------------------------------------------------------

bool IsTabularModel(const std::string& dir) { return PathExists(dir + "/" + kSpecFile); }

Result<TabularSpec> ReadTabularSpec(const std::string& dir) {
  const std::string path = dir + "/" + kSpecFile;
  if (!PathExists(dir)) return DS_ERR(kNotFound, "{}: model directory does not exist", dir);
  if (!PathExists(path))
    return DS_ERR(kNotFound, "{}: not a tabular model (no {}){}", dir, kSpecFile,
                  LooksLikeModel(dir) ? "; it holds an ordinary model" : "");
  DS_ASSIGN_OR_RETURN(std::string text, ReadFile(path, 64 << 20));
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded()) return DS_ERR(kCorrupt, "{}: not valid JSON", path);
  return TabularSpec::FromJson(j, path);
}

Result<RowTable> ReadRowTable(const std::string& path, char delimiter, int64_t max_rows) {
  CsvOptions o;
  o.delimiter = delimiter;
  DS_ASSIGN_OR_RETURN(auto reader, CsvReader::Open(path, o));
  DS_RETURN_IF_ERROR(reader->RequireHeader());
  DS_RETURN_IF_ERROR(ValidateHeader(reader->header(), reader->path()));
  RowTable t;
  t.path = path;
  t.delimiter = delimiter;
  t.header = reader->header();
  std::vector<std::string> fields;
  while (max_rows <= 0 || int64_t(t.rows.size()) < max_rows) {
    DS_ASSIGN_OR_RETURN(bool more, reader->Next(&fields));
    if (!more) break;
    if (fields.size() != t.header.size())
      return DS_ERR(kInvalidInput, "{}:{}: {} fields, the header has {}", reader->path(),
                    reader->record_line(), fields.size(), t.header.size());
    t.rows.push_back(fields);
  }
  if (t.rows.empty()) return DS_ERR(kInvalidInput, "{}: a header but no rows", reader->path());
  return t;
}

Status WriteRowTable(const std::string& path, const std::vector<std::string>& header,
                  const std::vector<std::vector<std::string>>& rows, char delimiter) {
  const bool to_stdout = path.empty() || path == "-";
  AtomicFileWriter w;
  if (!to_stdout) DS_RETURN_IF_ERROR(w.Open(path));
  std::string buf;
  auto flush = [&]() -> Status {
    if (to_stdout) {
      if (std::fwrite(buf.data(), 1, buf.size(), stdout) != buf.size() || std::fflush(stdout) != 0)
        return DS_ERR(kIo, "<stdout>: write failed: {}", strerror(errno));
    } else {
      DS_RETURN_IF_ERROR(w.Write(buf));
    }
    buf.clear();
    return Status::Ok();
  };
  AppendCsvRecord(&buf, header, delimiter);
  for (const auto& r : rows) {
    AppendCsvRecord(&buf, r, delimiter);
    if (buf.size() > (1u << 20)) DS_RETURN_IF_ERROR(flush());
  }
  DS_RETURN_IF_ERROR(flush());
  if (!to_stdout) DS_RETURN_IF_ERROR(w.Commit());
  return Status::Ok();
}

namespace {

// The plan of a new run: column rules, associations (not under dp), batches.
// Its messages go to *infos (shown once the plan stands).
Result<TabularSpec> PlanTable(const TabularTrainOptions& o, const RowTable& table, char delim,
                              std::vector<std::string>* infos_out) {
  std::vector<std::string>& infos = *infos_out;
  RuleOptions ropts;
  if (o.config.dp && !o.config.dp_store_value_rules) ropts.store_values = false;
  ColumnRules rules = LearnColumnRules(table.header, table.rows, ropts);
  std::vector<PlanColumn> cols(table.header.size());
  for (size_t c = 0; c < cols.size(); ++c) {
    cols[c].name = table.header[c];
    cols[c].type = rules.columns()[c].type;
  }
  for (const auto& row : table.rows)
    for (size_t c = 0; c < cols.size(); ++c)
      for (unsigned char ch : row[c])
        if (ch < 128) cols[c].ascii.set(ch);
  TabularConfig tcfg = o.tabular;
  if (OneModelForFields(o.config, cols.size(), &tcfg))
    infos.push_back(fmt::format("typed fields: one model of all {} columns (give "
                                "--tabular-batch-size for column batches)",
                                cols.size()));
  std::vector<double> assoc(cols.size() * cols.size(), 0.0);
  if (o.config.dp) {
    if (tcfg.grouping == "auto" || tcfg.condition_columns > 0)
      infos.push_back(
          "dp: no association measurement (it would reveal data outside the privacy guarantee): "
          "batches in header order, no conditioning across batches");
    tcfg.grouping = "order";
    tcfg.condition_columns = 0;
  } else {
    auto ta = Clock::now();
    ProfileOptions popts;
    popts.max_rows = tcfg.association_rows;
    assoc = AssociationMatrix(ProfileColumns(rules, table.rows, popts));
    infos.push_back(fmt::format("measured {} column associations in {:.2f}s",
                                cols.size() * (cols.size() - 1) / 2, Since(ta)));
  }
  DS_ASSIGN_OR_RETURN(std::vector<TabularBatch> batches, PlanBatches(cols, assoc, tcfg));
  DS_ASSIGN_OR_RETURN(const char bdelim, ChooseBatchDelimiter(table));

  TabularSpec spec;
  spec.datasynth_version = DS_VERSION;
  spec.header = table.header;
  spec.delimiter = delim;
  spec.batch_delimiter = bdelim;
  spec.rows = int64_t(table.rows.size());
  spec.input_path = o.input_path;
  spec.input_file = InputFileIdentity(o.input_path);
  spec.grouping = tcfg.header_groups.empty() ? tcfg.grouping : "groups+" + tcfg.grouping;
  spec.batch_columns = tcfg.batch_columns;
  spec.condition_columns = tcfg.condition_columns;
  spec.seed_columns = tcfg.seed_columns;
  spec.seed = o.config.seed != 0
                  ? uint64_t(o.config.seed)
                  : (uint64_t(std::random_device{}()) << 32 | std::random_device{}()) | 1u;
  spec.batches = batches;
  DS_RETURN_IF_ERROR(spec.Check("tabular plan"));
  return spec;
}

// The batch CSVs in the model directory's temporary folder, and one job per batch.
Status WriteBatchInputs(const TabularTrainOptions& o, const RowTable& table,
                        const TabularSpec& spec, const std::string& tmp, TabularRun* run) {
  const char bdelim = spec.batch_delimiter;
  DS_RETURN_IF_ERROR(MakeDirs(tmp));
  std::map<std::string, size_t> index;
  for (size_t c = 0; c < table.header.size(); ++c) index[table.header[c]] = c;
  for (size_t b = 0; b < spec.batches.size(); ++b) {
    const auto& t = spec.batches[b];
    std::vector<size_t> ids;
    std::vector<std::string> header;
    for (const auto* list : {&t.condition, &t.columns})
      for (const auto& name : *list) {
        ids.push_back(index.at(name));
        header.push_back(name);
      }
    std::string text;
    AppendCsvRecord(&text, header, bdelim);
    std::vector<std::string_view> fields(ids.size());
    for (const auto& row : table.rows) {
      for (size_t i = 0; i < ids.size(); ++i) fields[i] = row[ids[i]];
      AppendCsvRecord(&text, fields, bdelim);
    }
    BatchJob job;
    job.batch = int(b);
    job.width = int64_t(ids.size());
    job.bytes = int64_t(text.size());
    job.options.input_path = fmt::format("{}/batch_{}.csv", tmp, b);
    job.options.model_dir = o.model_dir + "/" + t.dir;
    DS_RETURN_IF_ERROR(WriteFileAtomic(job.options.input_path, text));
    job.options.config = BatchConfig(o.config, spec, b);
    run->jobs.push_back(std::move(job));
  }
  return Status::Ok();
}

}  // namespace

Result<TabularTrainSummary> TrainTabular(const TabularTrainOptions& o, TabularObserver* observer) {
  TabularObserver null_observer;
  TabularObserver& obs = observer ? *observer : null_observer;
  if (dist::ServesBatches()) return ServeBatches(o.cancel, obs);  // mpirun: rank 0 plans
  dist::BatchService service;  // mpirun: the other ranks' service ends with this call
  auto t0 = Clock::now();
  DS_RETURN_IF_ERROR(o.config.Validate());
  DS_RETURN_IF_ERROR(o.tabular.Validate());
  const char delim = TableDelimiter(o.config);
  if (!o.config.field_delimiter.empty())
    DS_RETURN_IF_ERROR(ParseDelimiter(o.config.field_delimiter).status());
  if (o.model_dir.empty())
    return DS_ERR(kInvalidArgument, "no model directory given (--model-dir)");
  // One run per model directory at a time (model/model_dir.h LockModelDir).
  DS_ASSIGN_OR_RETURN(std::unique_ptr<DirLock> lock, LockModelDir(o.model_dir));
  if (o.resume) return ResumeTabular(o, obs, t0);
  DS_RETURN_IF_ERROR(RefuseExisting(o.model_dir, o.config.overwrite));
  if (!InputExists(o.input_path))
    return DS_ERR(kNotFound, "{}: input file does not exist", o.input_path);

  // 1. the table, its column types and associations (before touching the model
  // dir). Messages are held back until the plan stands, so that an error is
  // the only output of a run that fails here.
  std::vector<std::string> infos;
  DS_ASSIGN_OR_RETURN(RowTable table, ReadRowTable(o.input_path, delim, o.config.max_lines));
  infos.push_back(fmt::format("read {} rows of {} columns from {}", table.rows.size(),
                              table.header.size(), o.input_path));
  DS_ASSIGN_OR_RETURN(TabularSpec spec, PlanTable(o, table, delim, &infos));
  for (const auto& m : infos) obs.OnInfo(m);
  for (size_t b = 0; b < spec.batches.size(); ++b) {
    const auto& t = spec.batches[b];
    obs.OnInfo(fmt::format(
        "batch {}: {}{}", b, fmt::join(t.columns, ", "),
        t.condition.empty() ? std::string()
                            : fmt::format("  | conditioned on {}", fmt::join(t.condition, ", "))));
  }

  // 2. the model directory, the batch CSVs and the resume state.
  TabularRun run;
  run.o = &o;
  run.t0 = t0;
  run.spec = spec;
  run.base = o.config;
  run.parallel_batches = o.tabular.parallel_batches;
  DS_RETURN_IF_ERROR(PrepareModelDir(o.model_dir, o.config.overwrite, &run.created));
  run.created = run.created || lock->created();  // the lock made the directory
  const std::string tmp = o.model_dir + "/" + kTmpDir;
  Status st = [&]() -> Status {
    DS_RETURN_IF_ERROR(WriteBatchInputs(o, table, spec, tmp, &run));
    return WriteResumeState(run, 0);
  }();
  if (!st.ok()) {
    CleanUp(o.model_dir, run.created, spec.batches.size());
    return st;
  }
  return RunTabular(run, obs);
}

// ---------------------------------------------------------------------------
// Seeds

Result<TabularSeeds> ParseSeedFields(const std::vector<std::string>& assignments) {
  TabularSeeds s;
  s.source = "--seed-field";
  s.rows.emplace_back();
  for (const auto& a : assignments) {
    size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      return DS_ERR(kInvalidArgument, "seed field '{}': expected column=value", a);
    std::string col = a.substr(0, eq);
    if (std::find(s.columns.begin(), s.columns.end(), col) != s.columns.end())
      return DS_ERR(kInvalidArgument, "seed field '{}' is given twice", col);
    s.columns.push_back(col);
    s.rows[0].push_back(a.substr(eq + 1));
  }
  if (s.columns.empty()) return DS_ERR(kInvalidArgument, "no seed fields given");
  return s;
}

Result<TabularSeeds> ReadSeedFile(const std::string& path, char delimiter) {
  DS_ASSIGN_OR_RETURN(RowTable t, ReadRowTable(path, delimiter));
  TabularSeeds s;
  s.columns = t.header;
  s.rows = std::move(t.rows);
  s.per_row = true;
  s.source = path;
  return s;
}

namespace {

// Reorders `seeds` to batch 0's column order and checks that they form a
// leading run of the seedable columns.
Status ResolveSeeds(const TabularSpec& spec, TabularSeeds* seeds) {
  const auto& seedable = spec.seedable();
  std::vector<int> pos;
  for (const auto& c : seeds->columns) {
    auto it = std::find(seedable.begin(), seedable.end(), c);
    if (it == seedable.end()) {
      bool known = std::find(spec.header.begin(), spec.header.end(), c) != spec.header.end();
      return DS_ERR(kInvalidArgument,
                    "{}: cannot seed column '{}': {}; this model can seed {} (a leading run of "
                    "them, in this order). To seed other columns, train with --seed-columns {}",
                    seeds->source, c,
                    known ? "the model was not trained with it first" : "no such column",
                    Names(seedable, 6), c);
    }
    pos.push_back(int(it - seedable.begin()));
  }
  std::vector<int> order(pos.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return pos[size_t(a)] < pos[size_t(b)]; });
  for (size_t i = 0; i < order.size(); ++i)
    if (pos[size_t(order[i])] != int(i))
      return DS_ERR(kInvalidArgument,
                    "{}: seeding '{}' needs '{}' seeded too: seeds must give a leading run of the "
                    "seedable columns ({}); to seed '{}' alone, train with --seed-columns {}",
                    seeds->source, seedable[size_t(pos[size_t(order[i])])], seedable[i],
                    Names(seedable, 6), seedable[size_t(pos[size_t(order[i])])],
                    seedable[size_t(pos[size_t(order[i])])]);
  TabularSeeds out;
  out.per_row = seeds->per_row;
  out.source = seeds->source;
  for (int i : order) out.columns.push_back(seeds->columns[size_t(i)]);
  for (const auto& r : seeds->rows) {
    std::vector<std::string> v;
    for (int i : order) v.push_back(r[size_t(i)]);
    out.rows.push_back(std::move(v));
  }
  *seeds = std::move(out);
  return Status::Ok();
}

std::string PrefixOf(const std::vector<std::string>& values, char d) {
  std::string s;
  for (const auto& v : values) {
    s += v;
    s += d;
  }
  return s;
}

// One batch model loaded for generation.
struct LoadedBatch {
  std::unique_ptr<Model> model;
  GenerationModel gm;
};

Result<LoadedBatch> LoadBatch(const std::string& dir, const TabularSpec& spec, size_t b,
                              const RuleChecks& checks, const InferDevice& device) {
  LoadedBatch lb;
  const TabularBatch& t = spec.batches[b];
  const std::string path = dir + "/" + t.dir;
  DS_ASSIGN_OR_RETURN(lb.model, LoadModel(path));
  std::vector<std::string> want = t.condition;
  want.insert(want.end(), t.columns.begin(), t.columns.end());
  if (lb.model->meta.header != want || lb.model->meta.delimiter != spec.batch_delimiter)
    return DS_ERR(kCorrupt, "{}: the model's columns do not match {}/{}", path, dir, kSpecFile);
  DS_ASSIGN_OR_RETURN(lb.gm, MakeGenerationModel(*lb.model, checks, ConstraintLevel::kAuto, device));
  return lb;
}

}  // namespace

Result<TabularSpec> CheckTabularModel(const std::string& dir,
                                      std::vector<std::unique_ptr<Model>>* batches) {
  DS_ASSIGN_OR_RETURN(TabularSpec spec, ReadTabularSpec(dir));
  for (size_t b = 0; b < spec.batches.size(); ++b) {
    DS_ASSIGN_OR_RETURN(LoadedBatch lb, LoadBatch(dir, spec, b, RuleChecks{}, InferDevice{}));
    if (batches != nullptr) batches->push_back(std::move(lb.model));
  }
  return spec;
}

namespace {

// Seed values against batch 0's rules and tokenizer: errors name the seed.
Status CheckSeeds(const TabularSeeds& seeds, const LoadedBatch& b0, char bdelim) {
  ColumnRules sub;
  if (b0.gm.rules) {
    for (size_t i = 0; i < seeds.columns.size(); ++i)
      sub.mutable_columns().push_back(b0.gm.rules->columns()[i]);
    sub.set_checks(b0.gm.rules->checks());
  }
  std::vector<int32_t> ids;
  for (size_t r = 0; r < seeds.rows.size(); ++r) {
    const auto& row = seeds.rows[r];
    std::string where =
        seeds.per_row ? fmt::format("{}: seed row {}", seeds.source, r + 1) : seeds.source;
    for (size_t i = 0; i < row.size(); ++i) {
      if (row[i].find(bdelim) != std::string::npos)
        return DS_ERR(kInvalidInput,
                      "{}: seed field '{}': the value holds byte 0x{:02x}, which never occurs in "
                      "the training data",
                      where, seeds.columns[i], static_cast<unsigned char>(bdelim));
      ids.clear();
      Status s = b0.model->tokenizer->EncodeColumnField(int(i), row[i], &ids);
      if (!s.ok())
        return DS_ERR(kInvalidInput, "{}: seed field '{}': {}", where, seeds.columns[i],
                      s.message());
    }
    if (!sub.columns().empty()) {
      std::string why = sub.Validate(row);
      if (!why.empty())
        return DS_ERR(kInvalidInput,
                      "{}: {} (every generated row would be rejected by the column rules)", where,
                      why);
    }
  }
  return Status::Ok();
}

// Reads a batch's generated CSV back: exactly `n` rows with the given prefixes.
Status ReadBatchOutput(const std::string& path, const TabularSpec& spec, size_t b, int64_t n,
                       const std::vector<std::vector<std::string>>* prefixes,
                       const std::vector<size_t>& out_index,
                       std::vector<std::vector<std::string>>* rows) {
  CsvOptions co;
  co.delimiter = spec.batch_delimiter;
  DS_ASSIGN_OR_RETURN(auto reader, CsvReader::Open(path, co));
  const TabularBatch& t = spec.batches[b];
  const size_t nc = t.condition.size(), width = nc + t.columns.size();
  std::vector<std::string> f;
  int64_t i = 0;
  while (true) {
    DS_ASSIGN_OR_RETURN(bool more, reader->Next(&f));
    if (!more) break;
    if (i >= n || f.size() != width)
      return DS_ERR(kInternal, "{}: generated row {} does not fit (fields {}, expected {})",
                    BatchName(spec, b), i + 1, f.size(), width);
    const std::vector<std::string>* p = prefixes ? &(*prefixes)[size_t(i)] : nullptr;
    for (size_t k = 0; p && k < p->size(); ++k)
      if (f[k] != (*p)[k])
        return DS_ERR(kInternal, "{}: generated row {} does not start with its prefix",
                      BatchName(spec, b), i + 1);
    auto& row = (*rows)[size_t(i)];
    for (size_t k = 0; k < t.columns.size(); ++k) row[out_index[k]] = std::move(f[nc + k]);
    ++i;
  }
  if (i != n)
    return DS_ERR(kInternal, "{}: {} rows generated, {} wanted", BatchName(spec, b), i, n);
  return Status::Ok();
}

struct TempDir {
  std::string path;
  ~TempDir() {
    if (!path.empty()) (void)RemoveTree(path);
  }
};

Status MakeTempDir(const std::string& stem, TempDir* t) {
  std::error_code ec;
  std::string base = std::filesystem::temp_directory_path(ec).string();
  if (ec || base.empty()) base = "/tmp";
  std::string templ = base + "/" + stem + "-XXXXXX";
  if (!::mkdtemp(templ.data()))
    return DS_ERR(kIo, "{}: cannot create a temporary directory: {}", templ, strerror(errno));
  t->path = templ;
  return Status::Ok();
}

// The seeds given as fields, a file or in the options (at most one), checked
// against the model.
Result<std::optional<TabularSeeds>> GatherSeeds(const TabularGenerateOptions& o,
                                                const TabularSpec& spec) {
  int given = int(!o.seed_fields.empty()) + int(!o.seed_file.empty()) + int(o.seeds.has_value());
  if (given > 1)
    return DS_ERR(kInvalidArgument, "give either seed fields or a seed file, not both");
  std::optional<TabularSeeds> seeds = o.seeds;
  if (!o.seed_fields.empty()) {
    DS_ASSIGN_OR_RETURN(seeds, ParseSeedFields(o.seed_fields));
  } else if (!o.seed_file.empty()) {
    DS_ASSIGN_OR_RETURN(seeds, ReadSeedFile(o.seed_file, spec.delimiter));
  }
  if (seeds) {
    for (const auto& r : seeds->rows)
      if (r.size() != seeds->columns.size())
        return DS_ERR(kInvalidArgument, "{}: a seed row has {} values for {} columns",
                      seeds->source, r.size(), seeds->columns.size());
    if (seeds->rows.empty()) return DS_ERR(kInvalidArgument, "{}: no seed rows", seeds->source);
    if (!seeds->per_row && seeds->rows.size() != 1)
      return DS_ERR(kInvalidArgument, "{}: one seed row expected", seeds->source);
    DS_RETURN_IF_ERROR(ResolveSeeds(spec, &*seeds));
  }
  return seeds;
}

// The rows to generate: --num-lines, one per seed row, or the training rows.
Result<int64_t> RowsWanted(const TabularGenerateOptions& o, const TabularSpec& spec,
                           const std::optional<TabularSeeds>& seeds) {
  int64_t n = o.num_lines.value_or(spec.rows);
  if (seeds && seeds->per_row) {
    if (o.num_lines && *o.num_lines != int64_t(seeds->rows.size()))
      return DS_ERR(kInvalidArgument,
                    "{}: {} seed rows give {} generated rows; --num-lines {} disagrees (leave it "
                    "out)",
                    seeds->source, seeds->rows.size(), seeds->rows.size(), *o.num_lines);
    n = int64_t(seeds->rows.size());
  }
  if (n < 0) return DS_ERR(kInvalidArgument, "num_lines must be >= 0");
  return n;
}

// What every batch of one GenerateTabular run shares.
struct TabularGeneration {
  const TabularGenerateOptions& o;
  const TabularSpec& spec;
  const std::optional<TabularSeeds>& seeds;
  int64_t n = 0;
  uint64_t seed = 0;
  std::string tmp_dir;
  InferDevice device;
  std::string device_warning;
  std::map<std::string, size_t> index;         // column name -> output column
  std::vector<std::vector<std::string>> rows;  // [n][header] the output, filled batch by batch
  TabularObserver& obs;
  TabularGenerateSummary* summary;
};

// Batch 0 with every column seeded: the rows are the seeds.
void TakeSeeds(TabularGeneration& g, size_t b) {
  const TabularSeeds& seeds = *g.seeds;
  for (size_t i = 0; i < size_t(g.n); ++i) {
    const auto& v = seeds.rows[seeds.per_row ? i : 0];
    for (size_t k = 0; k < v.size(); ++k) g.rows[i][g.index.at(seeds.columns[k])] = v[k];
  }
  GenerateSummary gs;
  gs.valid = g.n;
  gs.complete = true;
  g.summary->batches.push_back(gs);
  g.obs.OnBatchGenerated(int(b), gs);
  g.obs.OnInfo(fmt::format("{}: every column seeded, {} rows taken from the seeds",
                           BatchName(g.spec, b), g.n));
}

// The prefix of every row of batch b (empty: no prefix): the seeds (batch
// 0) or the conditioning values generated by the earlier batches.
Status BatchPrefixes(const TabularGeneration& g, size_t b, GenerateOptions* go,
                     std::vector<std::vector<std::string>>* prefix_values) {
  const TabularBatch& t = g.spec.batches[b];
  const char bd = g.spec.batch_delimiter;
  if (b == 0 && g.seeds) {
    if (g.seeds->per_row) {
      *prefix_values = g.seeds->rows;
    } else {
      go->start_string = PrefixOf(g.seeds->rows[0], bd);
    }
    go->prefixes_source = g.seeds->source;
  } else if (!t.condition.empty()) {
    std::vector<size_t> cidx;
    for (const auto& c : t.condition) cidx.push_back(g.index.at(c));
    prefix_values->resize(size_t(g.n));
    for (size_t i = 0; i < size_t(g.n); ++i) {
      auto& p = (*prefix_values)[i];
      for (size_t c : cidx) {
        if (g.rows[i][c].find(bd) != std::string::npos)
          return DS_ERR(kInternal, "{}: conditioning value of row {} holds the batch delimiter",
                        BatchName(g.spec, b), i + 1);
        p.push_back(g.rows[i][c]);
      }
    }
    go->prefixes_source = fmt::format("conditioning values of batch {}", b);
  }
  for (const auto& p : *prefix_values) go->prefixes.push_back(PrefixOf(p, bd));
  return Status::Ok();
}

// Generates batch b's columns of every row.
Status GenerateBatch(TabularGeneration& g, size_t b) {
  const TabularGenerateOptions& o = g.o;
  const TabularBatch& t = g.spec.batches[b];
  const std::string name = BatchName(g.spec, b);
  auto tb = Clock::now();
  DS_ASSIGN_OR_RETURN(LoadedBatch lb, LoadBatch(o.model_dir, g.spec, b, o.checks, g.device));
  if (!o.copy_guard) lb.gm.copy_guard.reset();
  const Config& mc = lb.model->config;
  RunOptions run;
  GenerateOptions& go = run.gen;
  go.num_lines = g.n;
  go.seed = Mix(g.seed, 1000 + b);
  go.temperature = o.gen_temp.value_or(mc.gen_temp);
  go.gen_chars = o.gen_chars.value_or(mc.gen_chars);
  go.predict_batch_size = o.predict_batch_size.value_or(mc.predict_batch_size);
  go.max_invalid = o.max_invalid.value_or(mc.max_invalid);
  run.parallelism = o.parallelism;
  run.format = OutputFormat::kCsv;
  run.output = fmt::format("{}/batch_{}.csv", g.tmp_dir, b);
  run.cancel = o.cancel;
  if (b == 0 && g.seeds) {
    DS_RETURN_IF_ERROR(CheckSeeds(*g.seeds, lb, g.spec.batch_delimiter));
    // Every column of batch 0 is seeded: nothing to sample (a start string
    // must leave at least one field to the model).
    if (g.seeds->columns.size() == t.columns.size()) {
      TakeSeeds(g, b);
      return Status::Ok();
    }
  }
  std::vector<std::vector<std::string>> prefix_values;  // [n][prefix fields] when per row
  DS_RETURN_IF_ERROR(BatchPrefixes(g, b, &go, &prefix_values));
  GenerateEvents events;
  events.progress = [&](const GenerateProgress& p) {
    g.obs.OnGenerateProgress(int(b), int(g.spec.batches.size()), p);
  };
  events.warning = [&](const std::string& w) { g.obs.OnWarning(name + ": " + w); };
  GenerateSummary gs;
  if (b == 0 && !g.device_warning.empty())
    g.obs.OnWarning(g.device_warning);  // after the seed checks
  Status st = RunGeneration(lb.gm, run, events, &gs);
  g.summary->batches.push_back(gs);
  g.summary->invalid += gs.invalid;
  if (!st.ok()) {
    std::string hint;
    if (st.code() == Code::kResourceExhausted)
      hint =
          "; this batch's model makes too many invalid rows: train it longer, or raise "
          "--max-invalid (it applies to each batch)";
    return Status(st.code(), fmt::format("{}: {}{}", name, st.message(), hint), st.file(),
                  st.line());
  }
  std::vector<size_t> out_index;
  for (const auto& c : t.columns) out_index.push_back(g.index.at(c));
  DS_RETURN_IF_ERROR(ReadBatchOutput(run.output, g.spec, b, g.n,
                                     prefix_values.empty() ? nullptr : &prefix_values, out_index,
                                     &g.rows));
  // Seeds of a single set for all rows: check their prefix too.
  if (b == 0 && g.seeds && !g.seeds->per_row)
    for (size_t i = 0; i < size_t(g.n); ++i)
      for (size_t k = 0; k < g.seeds->columns.size(); ++k)
        if (g.rows[i][g.index.at(g.seeds->columns[k])] != g.seeds->rows[0][k])
          return DS_ERR(kInternal, "{}: row {} lost its seed value", name, i + 1);
  (void)RemoveTree(run.output);
  g.obs.OnBatchGenerated(int(b), gs);
  g.obs.OnInfo(fmt::format("{}: {} rows ({} invalid regenerated) in {:.1f}s", name, gs.valid,
                           gs.invalid, Since(tb)));
  return Status::Ok();
}

}  // namespace

Status GenerateTabular(const TabularGenerateOptions& o, TabularObserver* observer,
                       TabularGenerateSummary* summary) {
  TabularObserver null_observer;
  TabularObserver& obs = observer ? *observer : null_observer;
  *summary = TabularGenerateSummary{};
  if (dist::ServesBatches()) return Status::Ok();  // mpirun: rank 0 alone generates
  auto t0 = Clock::now();
  // Every batch checked up front (a corrupt last batch fails before the first generates).
  DS_ASSIGN_OR_RETURN(TabularSpec spec, CheckTabularModel(o.model_dir));
  OutputPolicy policy;
  policy.overwrite = o.overwrite;
  policy.model_dir = o.model_dir;
  policy.training_input = spec.input_file;
  DS_RETURN_IF_ERROR(CheckOutputTarget(o.output, policy));
  DS_ASSIGN_OR_RETURN(std::optional<TabularSeeds> seeds, GatherSeeds(o, spec));
  DS_ASSIGN_OR_RETURN(int64_t n, RowsWanted(o, spec, seeds));
  TabularGeneration g{o,  spec, seeds, n,      o.seed != 0 ? o.seed : spec.seed, "", {}, "",
                      {}, {},   obs,   summary};
  // Output rows in header order.
  for (size_t c = 0; c < spec.header.size(); ++c) g.index[spec.header[c]] = c;
  g.rows.assign(size_t(n), std::vector<std::string>(spec.header.size()));
  TempDir tmp;
  DS_RETURN_IF_ERROR(MakeTempDir("datasynth-tabular", &tmp));
  g.tmp_dir = tmp.path;

  // One device for every batch (batches generate one after the other).
  DS_ASSIGN_OR_RETURN(int workers, ResolveParallelism(o.parallelism, AvailableCpus()));
  DS_ASSIGN_OR_RETURN(g.device,
                      ResolveInferDevice(o.device, o.gpu_memory, o.gpu_memory_limit,
                                         int(std::max<int64_t>(1, std::min<int64_t>(workers, n))),
                                         &g.device_warning));
  for (size_t b = 0; b < spec.batches.size() && n > 0; ++b) DS_RETURN_IF_ERROR(GenerateBatch(g, b));
  DS_RETURN_IF_ERROR(WriteRowTable(o.output, spec.header, g.rows, spec.delimiter));
  summary->rows = n;
  summary->output = (o.output.empty() || o.output == "-") ? "" : o.output;
  summary->seconds = Since(t0);
  return Status::Ok();
}

Status Synthesize(const SynthesizeOptions& o, TabularObserver* observer,
                  SynthesizeSummary* summary) {
  *summary = SynthesizeSummary{};
  if (dist::ServesBatches()) return TrainTabular(o.train, observer).status();  // mpirun
  TabularGenerateOptions gen = o.generate;
  gen.overwrite = gen.overwrite || o.train.config.overwrite;  // one --overwrite for both
  OutputPolicy policy;  // before training: a refused output must not cost a training run
  policy.overwrite = gen.overwrite;
  policy.model_dir = o.train.model_dir;
  policy.training_input = InputFileIdentity(o.train.input_path);
  DS_RETURN_IF_ERROR(CheckOutputTarget(gen.output, policy));
  TabularTrainOptions train = o.train;
  TempDir tmp;
  if (train.model_dir.empty()) {
    DS_RETURN_IF_ERROR(MakeTempDir("datasynth-model", &tmp));
    train.model_dir = tmp.path;
    train.config.overwrite = true;  // our own fresh directory
  }
  Result<TabularTrainSummary> trained = TrainTabular(train, observer);
  if (!trained.ok() && trained.status().code() == Code::kCancelled && !tmp.path.empty())
    return DS_ERR(kCancelled,
                  "interrupted; the model was in a temporary directory and is removed (pass "
                  "--model-dir to keep an interrupted run that `train --tabular --resume` can "
                  "continue)");
  if (!trained.ok()) return trained.status();
  summary->train = std::move(trained).value();
  gen.model_dir = train.model_dir;
  if (gen.seed == 0) gen.seed = summary->train.spec.seed;
  if (!gen.cancel) gen.cancel = train.cancel;
  return GenerateTabular(gen, observer, &summary->generate);
}

}  // namespace ds
