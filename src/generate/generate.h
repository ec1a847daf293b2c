// `datasynth generate`: generation from a trained model directory.
//
//   GenerateCommand cmd;
//   cmd.model_dir = "out/"; cmd.run.output = "synth.csv"; cmd.num_lines = 10000;
//   cmd.run.cancel = InstallInterruptFlag();           // CLI only
//   GenerateSummary sum;
//   Status st = GenerateFromModelDir(cmd, events, &sum);
//
// Settings not given on the command line come from the model's
// model_params.json (gen_temp, gen_chars, gen_lines, predict_batch_size,
// max_invalid), i.e. the values the model was trained with.
// reset_states = false is not supported: every record starts from a reset
// state (that is what makes the output reproducible); a warning says so.
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "backend/device.h"
#include "generate/constraints.h"
#include "generate/generator.h"
#include "generate/workers.h"
#include "model/model_dir.h"
#include "schema/column_rules.h"

namespace ds {

// Where generation runs the network. CUDA: every worker process creates its
// own CUDA context and caching allocator with `memory` (per process: the
// limit and grow/preallocate), after the fork (the parent never touches
// CUDA; see backend/device.h).
struct InferDevice {
  DeviceKind kind = DeviceKind::kCpu;
  AllocatorConfig memory;
  Precision precision = Precision::kFp32;  // resolved for `kind` (backend/registry.h)
};

// A GenerationModel over a loaded model: its tokenizer, header and delimiter,
// column_rules.json (validated; field-count-only rules for delimited models
// without one) with `checks` applied, and CPU inference backends over the
// memory-mapped weights (or CUDA backends over a device copy of them, per
// `device`). `model` must outlive the result.
// Delimited models also get constrained decoding (make_filter) at `constrain`
// (auto: values when the rules hold values, else structure; see
// generate/constraints.h); rules checks switched off switch the matching
// constraints off.
Result<GenerationModel> MakeGenerationModel(const Model& model, const RuleChecks& checks,
                                            ConstraintLevel constrain = ConstraintLevel::kAuto,
                                            const InferDevice& device = {});

// LoadModel (model_dir.h: every file, checksum and metadata key) and then
// every further check generation makes before it samples: the generation
// model built on the CPU with all rule checks (column_rules.json against the
// header, constraint tables against the tokenizer). The one validation
// `generate` and `info` share: a model `info` accepts, `generate` loads.
Result<std::unique_ptr<Model>> LoadModelForGeneration(const std::string& dir);

// The device of a generation with `workers` worker processes:
//   device           auto | cpu | cuda (auto: CUDA when a usable GPU is present,
//                    else the CPU and `warning` says why)
//   gpu_memory       grow | preallocate
//   gpu_memory_limit per worker process, "4GiB" or "25%" of the GPU's memory;
//                    "" = an equal share of the memory free now
//                    (DefaultWorkerLimit's rule, computed without initialising
//                    CUDA in this process: ProbeCudaInChild)
Result<InferDevice> ResolveInferDevice(const std::string& device, const std::string& gpu_memory,
                                       const std::string& gpu_memory_limit, int workers,
                                       std::string* warning);

// Start strings from a file: one per line ('\n' or "\r\n"); a final newline
// does not start an empty prefix. Errors name the file.
Result<std::vector<std::string>> ReadStartStrings(const std::string& path);

// run.gen's num_lines, temperature, gen_chars, predict_batch_size and
// max_invalid are replaced by the optional fields below (or the model's
// values): set those, not run.gen's.
// run.resume continues an interrupted run of run.output (generate/resume.h):
// the model's weights checksum, the rule checks and the constraint level must
// match too.
struct GenerateCommand {
  std::string model_dir;
  RunOptions run;  // output, parallelism, cancel, resume; run.gen.seed / start_string / prefixes
  std::optional<OutputFormat> format;  // default: csv for delimited models, text otherwise
  std::optional<int64_t> num_lines;    // default: gen_lines of the model
  std::optional<double> gen_temp;
  std::optional<int64_t> gen_chars;
  std::optional<int> predict_batch_size;
  std::optional<int64_t> max_invalid;
  std::string start_strings_file;                      // one valid record per line of this file
  RuleChecks checks;                                   // validation switches
  ConstraintLevel constrain = ConstraintLevel::kAuto;  // --constrain (constrained decoding)
  std::string device = "auto";        // auto | cpu | cuda (ResolveInferDevice)
  std::string gpu_memory = "grow";    // grow | preallocate
  std::string gpu_memory_limit;       // per worker process; "" = equal share of free memory
  // fp32 | bf16 | auto (auto: the precision the model was trained at, fp32 for
  // models without one, where bf16 pays on this CPU, else fp32: backend/registry.h
  // ResolveInferPrecision; bf16 falls back to fp32 on a CPU without it).
  std::string precision = "auto";
  // The model's copy guard (generate/copy_guard.h); false = --no-copy-guard.
  bool copy_guard = true;
};

Status GenerateFromModelDir(const GenerateCommand& command, const GenerateEvents& events,
                            GenerateSummary* summary);

// Installs SIGINT/SIGTERM handlers that set the returned flag (for CLIs; the
// library never installs handlers itself). A second signal restores the
// default action and re-raises it (a second Ctrl-C kills at once); one
// arriving within 0.2 s of the first counts as the same request (`timeout`
// sends its signal to the command and to its process group).
const std::atomic<bool>* InstallInterruptFlag();
// The same flag and rules, but SIGINT / SIGTERM are blocked in every thread
// and received by a watcher thread (sigwait): no handler ever runs on a
// compute thread (a signal delivered inside oneDNN's GEMM corrupted its heap;
// tests/cli_signal_test.sh). For training processes: call it before the
// compute threads start (the mask is inherited); threads that already exist
// get the handler (SA_RESTART).
const std::atomic<bool>* InstallInterruptThread();

}  // namespace ds
