// datasynth generate: model directory -> synthetic records.
#include <cmath>

#include "cli.h"
#include "cli_tabular.h"
#include "generate/generate.h"
#include "generate/overrides.h"

namespace ds::cli {
namespace {

struct GenArgs {
  std::string model_dir, output, format, start_string, start_strings, constrain = "auto";
  std::string device = "auto", gpu_memory = "grow", gpu_memory_limit, precision = "auto";
  double parallelism = 0;
  ConfigFlags gen;  // --num-lines, --gen-temp, ..., --seed: ranges from the config key table
  SeedFlags seeds;
  bool resume = false, overwrite = false;
  double checkpoint_interval = 1.0;
  bool no_field_count = false, no_types = false, no_ranges = false, no_categories = false,
       no_empty = false;
  bool no_copy_guard = false;
};

// The generation settings given on the command line (the rest come from the model).
using GenOverrides = GenerationOverrides;

Status ReadOverrides(const GenArgs& a, GenOverrides* o) {
  Config c;
  DS_RETURN_IF_ERROR(a.gen.Apply(&c));
  *o = GenerationOverrides::FromConfig(c);
  if (!std::isfinite(a.parallelism))
    return DS_ERR(kInvalidArgument, "--parallelism {}: expected a finite number", a.parallelism);
  // The key table's rule for the limit, also when --device cpu never reads it
  // (--gpu-memory and --device are checked by ResolveInferDevice).
  if (!a.gpu_memory_limit.empty())
    if (Status s = c.Set("gpu_memory_limit", a.gpu_memory_limit); !s.ok())
      return s.WithContext("--gpu-memory-limit");
  if (!(a.checkpoint_interval >= 0 && a.checkpoint_interval <= 86400))
    return DS_ERR(kInvalidArgument, "--checkpoint-interval {}: expected seconds in [0, 86400]",
                  a.checkpoint_interval);
  return Status::Ok();
}

int RunTabularGenerate(const GenArgs& a, const GenOverrides& v) {
  if (a.resume)
    return Fail(DS_ERR(kInvalidArgument,
                       "--resume is not supported for tabular models (their batches are "
                       "generated into temporary files); run the command again without it"));
  TabularGenerateOptions o;
  o.model_dir = a.model_dir;
  o.output = a.output;
  o.overwrite = a.overwrite;
  v.ApplyTo(&o);
  o.seed = v.seed;
  o.parallelism = a.parallelism;
  o.checks.field_count = !a.no_field_count;
  o.checks.type = !a.no_types;
  o.checks.range = !a.no_ranges;
  o.checks.category = !a.no_categories;
  o.checks.empty = !a.no_empty;
  o.seed_fields = a.seeds.seed_field;
  o.seed_file = a.seeds.seed_fields;
  o.device = a.device;
  o.gpu_memory = a.gpu_memory;
  o.gpu_memory_limit = a.gpu_memory_limit;
  o.copy_guard = !a.no_copy_guard;
  o.cancel = InstallInterruptFlag();
  TabularCliObserver obs;
  TabularGenerateSummary sum;
  Status s = GenerateTabular(o, &obs, &sum);
  if (s.ok() || sum.rows > 0)
    std::fprintf(stderr, "%s %lld rows (%lld invalid rows regenerated) in %s%s%s\n",
                 s.ok() ? "generated" : "stopped after", (long long)sum.rows,
                 (long long)sum.invalid, FormatDuration(sum.seconds).c_str(),
                 sum.output.empty() ? "" : ", written to ", sum.output.c_str());
  return s.ok() ? 0 : Fail(s);
}

int RunGenerate(const GenArgs& a, bool device_given) {
  ReportDeviceFallback(device_given);
  GenOverrides v;
  if (Status s = ReadOverrides(a, &v); !s.ok()) return Fail(s);
  if (IsTabularModel(a.model_dir)) return RunTabularGenerate(a, v);
  if (!a.seeds.seed_field.empty() || !a.seeds.seed_fields.empty())
    return Fail(DS_ERR(kInvalidArgument,
                       "--seed-field/--seed-fields need a tabular model (train --tabular); use "
                       "--start-string for a prefix of the leading fields"));
  GenerateCommand c;
  c.model_dir = a.model_dir;
  c.run.output = a.output;
  c.run.parallelism = a.parallelism;
  c.run.resume = a.resume;
  c.run.output_policy.overwrite = a.overwrite;
  c.run.checkpoint_interval_s = a.checkpoint_interval;
  c.run.gen.seed = v.seed;
  if (!a.start_string.empty()) c.run.gen.start_string = a.start_string;
  c.start_strings_file = a.start_strings;
  if (!a.format.empty()) {
    auto f = ParseOutputFormat(a.format);
    if (!f.ok()) return Fail(f.status());
    c.format = f.value();
  }
  v.ApplyTo(&c);
  c.checks.field_count = !a.no_field_count;
  c.checks.type = !a.no_types;
  c.checks.range = !a.no_ranges;
  c.checks.category = !a.no_categories;
  c.checks.empty = !a.no_empty;
  auto level = ParseConstraintLevel(a.constrain);
  if (!level.ok()) return Fail(level.status());
  c.constrain = level.value();
  c.device = a.device;
  c.gpu_memory = a.gpu_memory;
  c.gpu_memory_limit = a.gpu_memory_limit;
  c.precision = a.precision;
  c.copy_guard = !a.no_copy_guard;
  c.run.cancel = InstallInterruptFlag();

  ProgressLine line(5.0);
  GenerateEvents ev;
  ev.progress = [&line](const GenerateProgress& p) {
    std::string text = fmt::format(
        "{}/{} records  {:.0f} records/s  {:.0f} tokens/s  valid {:.1f}%  {} worker{}  ETA {}",
        p.valid, p.wanted, p.records_per_s, p.tokens_per_s, 100 * p.valid_share, p.workers,
        p.workers == 1 ? "" : "s",
        p.eta_seconds < 0 ? std::string("?") : FormatDuration(p.eta_seconds));
    line.Update(text, p.final);
  };
  ev.warning = [&line](const std::string& w) { line.Print("warning: " + w); };
  GenerateSummary sum;
  Status s = GenerateFromModelDir(c, ev, &sum);
  line.Finish();
  double total = double(sum.valid + sum.invalid);
  if (!s.ok() && sum.workers == 0 && total == 0) return Fail(s);  // failed before generating
  std::string resumed = sum.resumed
                            ? fmt::format(" (resumed after {} valid records)", sum.resumed_valid)
                            : std::string();
  std::fprintf(stderr,
               "%s %lld valid records (%lld invalid, %.1f%% valid) in %s with %d worker%s, "
               "%.0f records/s%s%s%s\n",
               s.ok() ? "generated" : "stopped after", (long long)sum.valid, (long long)sum.invalid,
               total > 0 ? 100.0 * double(sum.valid) / total : 100.0,
               FormatDuration(sum.seconds).c_str(), sum.workers, sum.workers == 1 ? "" : "s",
               sum.seconds > 0 ? double(sum.valid - sum.resumed_valid) / sum.seconds : 0.0,
               sum.output.empty() ? "" : ", written to ", sum.output.c_str(), resumed.c_str());
  if (std::string mem = FormatWorkerMemory(sum); !mem.empty()) {
    std::fprintf(stderr, "%s\n", mem.c_str());
    if (g_verbose)
      for (size_t i = 0; i < sum.worker_memory.size(); ++i)
        std::fprintf(stderr, "  worker %zu: %s\n", i, sum.worker_memory[i].ToString().c_str());
  }
  if (sum.copies_rejected > 0)
    std::fprintf(stderr,
                 "copy guard: %lld exact cop%s of rare training rows rejected and sampled again "
                 "(counted as invalid)\n",
                 (long long)sum.copies_rejected, sum.copies_rejected == 1 ? "y" : "ies");
  if (!s.ok() && sum.resumable)
    std::fprintf(stderr,
                 "the output so far is kept; run the same command with --resume to complete it\n");
  if (sum.worker_failures > 0)
    std::fprintf(stderr, "%d worker failure%s recovered (their chunks were redone)\n",
                 sum.worker_failures, sum.worker_failures == 1 ? "" : "s");
  if (!s.ok()) return Fail(s);
  return 0;
}

}  // namespace

void AddGenerateCommand(CLI::App& app) {
  static GenArgs a;
  CLI::App* cmd = app.add_subcommand("generate", "Generate synthetic records from a trained model");
  cmd->add_option("--model-dir,-m", a.model_dir, "trained model directory")->required();
  a.gen.AddKey(cmd, "gen_lines", "--num-lines,-n", "the model's gen_lines", "valid records to generate");
  cmd->add_option("--output,-o", a.output, "output file ('-' or none: stdout)");
  cmd->add_flag("--overwrite", a.overwrite,
                "replace an existing output file (never the training input or a file in a "
                "model directory)");
  cmd->add_option("--format", a.format, "csv | text | jsonl [default: csv for tables, else text]");
  cmd->add_option("--parallelism,-p", a.parallelism,
                  "worker processes: 0 = all CPUs, n, -x = CPUs - x, 0.5 = half [default: 0]");
  a.gen.AddKey(cmd, "seed", "", "0", "random seed: the same seed gives the same output")
      ->group("Generation");
  a.gen.AddKey(cmd, "gen_temp", "", "the model's");
  a.gen.AddKey(cmd, "gen_chars", "", "the model's");
  a.gen.AddKey(cmd, "predict_batch_size", "", "the model's", "records in flight per worker");
  a.gen.AddKey(cmd, "max_invalid", "", "the model's");
  cmd->add_option("--start-string", a.start_string,
                  "prefix of every record; with a delimiter it must end with it ('Adelie,')");
  cmd->add_option("--start-strings", a.start_strings,
                  "file of prefixes, one per line: one valid record per prefix, in order");
  cmd->add_flag("--resume", a.resume,
                "continue an interrupted run of the same command (OUTPUT.partial or OUTPUT, "
                "and OUTPUT.progress.json); without a progress file, start a new run");
  cmd->add_option("--checkpoint-interval", a.checkpoint_interval,
                  "seconds between updates of OUTPUT.progress.json (what --resume continues "
                  "from) [default: 1]")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--constrain", a.constrain,
                  "constrained decoding: structure | values | none | auto (values when the model "
                  "stores category sets or ranges, else structure) [default: auto]");
  CLI::Option* device = cmd->add_option("--device", a.device,
                  "auto | cpu | cuda: where the workers run the network (auto: CUDA when a usable "
                  "GPU is present) [default: auto]")
      ->group("Device");
  cmd->add_option("--precision", a.precision,
                  "fp32 | bf16 | auto: GEMM precision (auto: the model's training precision "
                  "where bf16 pays on this CPU, else fp32; fp32 on CUDA; bf16 runs fp32 on a "
                  "CPU without AVX512_BF16 or AMX) [default: auto]")
      ->check(CLI::IsMember({"fp32", "bf16", "auto"}))
      ->group("Device");
  cmd->add_option("--gpu-memory", a.gpu_memory,
                  "grow (take GPU memory on demand) | preallocate (reserve each worker's limit "
                  "at start) [default: grow]")
      ->group("Device");
  cmd->add_option("--gpu-memory-limit", a.gpu_memory_limit,
                  "GPU memory cap per worker process, e.g. 4GiB or 10% [default: an equal share "
                  "of the free memory]")
      ->group("Device");
  a.seeds.Add(cmd);
  cmd->add_flag("--no-field-count", a.no_field_count, "do not check the field count")
      ->group("Validation");
  cmd->add_flag("--no-types", a.no_types, "do not check learned column types")->group("Validation");
  cmd->add_flag("--no-ranges", a.no_ranges, "do not check numeric min/max")->group("Validation");
  cmd->add_flag("--no-categories", a.no_categories, "do not check category sets")
      ->group("Validation");
  cmd->add_flag("--no-empty-check", a.no_empty, "do not check empty fields")->group("Validation");
  cmd->add_flag("--no-copy-guard", a.no_copy_guard,
                "keep exact copies of rare training rows (the model's copy guard; "
                "docs/generate.md)")
      ->group("Validation");
  cmd->callback([device] { throw CLI::RuntimeError(RunGenerate(a, device->count() > 0)); });
}

}  // namespace ds::cli
