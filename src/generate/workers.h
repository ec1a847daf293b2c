// Parallel generation in worker processes.
//
// Process model: the parent holds the model (tokenizer, rules, memory-mapped
// weights) and forks `W` workers; each worker creates its own InferBackend
// (make_backend: state and workspaces only, the weights stay the shared,
// read-only mapping) with one compute thread, and runs a BatchSampler with
// predict_batch_size slots. The parent never runs the network.
//
// Parts: generate/worker_protocol.h (the frames on each worker's UNIX
// stream socket: TASKS to a worker; RESULT, ERROR, STATS back; the worker
// process's loop), generate/worker_pool.h (the parent's side: forks the
// workers through util/subprocess.h, keeps at most 2 x predict_batch_size
// attempts outstanding per worker, in chunks of at most predict_batch_size
// split evenly over the workers, so that every worker's slots stay busy) and
// generate/resume.h ResumableOutput (the output file and its checkpoints).
// The AttemptScheduler (generate/scheduler.h) decides which attempts run,
// releases results in seed order, and keeps the global invalid budget.
//
// A worker that dies (socket closed, e.g. killed by a signal) is reported
// through GenerateEvents::warning; the attempts it had not returned are run by
// the other workers (the same attempts give the same records: nothing is lost
// or duplicated). The run fails only when every worker died.
//
// Cancellation: when *RunOptions::cancel becomes true (the CLI sets it from
// SIGINT, see InstallInterruptFlag in generate/generate.h) the parent stops
// the workers and finishes the output: the file then holds the header and the
// records released so far (well-formed, truncated) and kCancelled is returned.
//
// Crash safety and resume (file outputs; generate/resume.h): records go to
// `output.partial`, and `output.progress.json` is checkpointed about every
// checkpoint_interval_s seconds (after an fdatasync of the records it
// covers), once the header is written and when the run stops. A run that
// stopped before completing (error, Ctrl-C, kill -9, power loss) keeps its
// progress file; with RunOptions::resume the next run checks that its
// settings match, truncates the output to the checkpoint's last whole record
// and continues from there: the result is byte-identical to an uninterrupted
// run. On success the progress file is removed. Without `resume`, an
// interrupted run's partial output is overwritten (with a warning): the
// output is a pure function of the settings, so only time is lost.
// Workers ignore SIGINT themselves (a Ctrl-C reaches the whole process group;
// the parent tears them down) and die with the parent (PR_SET_PDEATHSIG).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "generate/generator.h"
#include "generate/output.h"

namespace ds {

// CPUs this process may run on (sched_getaffinity).
int AvailableCpus();
// docs/reference.md §5: 0 = all CPUs, n >= 1 = n workers, -x = CPUs - x (at
// least 1), 0 < f < 1 = that share of the CPUs (at least 1). Non-integers
// outside (0, 1) are an error.
Result<int> ResolveParallelism(double parallelism, int cpus);

struct GenerateProgress {
  int64_t valid = 0, invalid = 0;  // released so far
  int64_t wanted = 0;              // valid records wanted
  int64_t tokens = 0;              // tokens sampled (all attempts returned)
  double seconds = 0;
  double records_per_s = 0;  // valid records per second
  double tokens_per_s = 0;
  double valid_share = 0;   // valid / (valid + invalid)
  double eta_seconds = -1;  // -1 = unknown
  int workers = 0;          // running (final report: workers of the run, less failed ones)
  bool final = false;       // the last report of the run
};

// Callbacks: the library writes nothing to the terminal itself.
struct GenerateEvents {
  std::function<void(const GenerateProgress&)> progress;
  std::function<void(const std::string&)> warning;
  double progress_interval_s = 0.5;
};

struct RunOptions {
  GenerateOptions gen;
  double parallelism = 0;
  OutputFormat format = OutputFormat::kCsv;
  std::string output;                         // "" or "-" = stdout
  const std::atomic<bool>* cancel = nullptr;  // set -> stop, keep the partial output
  // Test hook: worker 0 SIGKILLs itself after sending this many results
  // (-1 = off; the environment variable DS_TEST_KILL_WORKER_AFTER sets it too).
  int64_t test_kill_worker_after = -1;
  // Continue an interrupted run of the same output (see the file comment). No
  // progress file: a new run starts, with a warning.
  bool resume = false;
  // Settings the caller adds to those that must match on resume (the seed,
  // gen options, format, header... are added by RunGeneration): e.g. the
  // model's weights checksum and the rule checks (GenerateFromModelDir).
  nlohmann::json resume_settings = nlohmann::json::object();
  double checkpoint_interval_s = 1.0;  // between progress-file updates (file outputs)
  // What the output may replace (generate/output.h CheckOutputTarget; `resume` is
  // set by RunGeneration): an existing file only with overwrite, never the
  // training input or a file inside a model directory.
  OutputPolicy output_policy;
  // Test hook: once this many records were written, flush them (past the
  // last checkpoint) and SIGKILL the whole process, as kill -9 would
  // (-1 = off; DS_TEST_KILL_AFTER_RECORDS sets it too).
  int64_t test_kill_after_records = -1;
};

struct GenerateSummary {
  int64_t valid = 0, invalid = 0;  // records released (written to csv/text: the valid ones)
  int64_t copies_rejected = 0;     // of the invalid ones (this session): copies of rare rows
  int64_t tokens = 0;
  double seconds = 0;
  int workers = 0;
  int worker_failures = 0;
  bool complete = false;  // every wanted record was produced
  std::string output;     // path written ("" for stdout)
  DeviceKind device = DeviceKind::kCpu;
  // GPU workers: each worker's allocator statistics as last reported (index =
  // worker); empty on the CPU.
  std::vector<AllocatorStats> worker_memory;
  // Resume: the run continued an interrupted one, which had written
  // resumed_records records (resumed_valid valid ones).
  bool resumed = false;
  int64_t resumed_valid = 0, resumed_records = 0;
  // Incomplete file output with a progress file: RunOptions::resume (the
  // CLI's --resume) can complete it.
  bool resumable = false;
};

// One line for a terminal (the CLI prints it on stderr, e.g. with '\r'):
//   "1234/10000 valid (97.5% valid), 412 records/s, 41210 tokens/s, ETA 21s"
std::string FormatProgress(const GenerateProgress& p);
// "10000 valid and 257 invalid records in 24.3s (2 workers) -> synth.csv"
std::string FormatSummary(const GenerateSummary& s);
// GPU runs: "GPU memory per worker: peak in use 37.0 MiB (max), reserved 54.0
// MiB (max), limit 17.1 GiB"; "" on the CPU.
std::string FormatWorkerMemory(const GenerateSummary& s);

// Runs a whole generation into `options.output`. On an error after the output
// was opened (too many invalid, cancelled, every worker died, write error),
// the well-formed partial output is kept under the final name, with its
// progress file for a resumed run, and the error is returned; `summary` is
// filled in every case.
Status RunGeneration(const GenerationModel& model, const RunOptions& options,
                     const GenerateEvents& events, GenerateSummary* summary);

}  // namespace ds
