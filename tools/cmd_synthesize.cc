// datasynth synthesize: train on a table and generate from it in one go.
#include <cmath>

#include "cli.h"
#include "cli_tabular.h"
#include "evaluate/evaluate.h"
#include "generate/generate.h"

namespace ds::cli {
namespace {

struct SynthArgs {
  std::string input, output, model_dir, config_file, report, json;
  double parallelism = 0;
  ConfigFlags flags;
  ConfigFlags gen;  // --num-lines, --max-invalid (ranges from the key table)
  TabularFlags tab;
  SeedFlags seeds;
};

int RunSynthesize(SynthArgs& a) {
  SynthesizeOptions o;
  if (!a.config_file.empty())
    if (Status s = o.train.config.LoadFile(a.config_file); !s.ok()) return Fail(s);
  if (Status s = a.flags.Apply(&o.train.config); !s.ok()) return Fail(s);
  if (std::string note = DefaultDelimiterFromName(a.input, &o.train.config, true); !note.empty())
    std::fprintf(stderr, "%s\n", note.c_str());
  if (o.train.config.field_delimiter.empty()) o.train.config.field_delimiter = ",";
  ReportDeviceFallback(o.train.config.IsExplicit("device"));
  Config gen;
  if (Status s = a.gen.Apply(&gen); !s.ok()) return Fail(s);
  if (!std::isfinite(a.parallelism))
    return Fail(DS_ERR(kInvalidArgument, "--parallelism {}: expected a finite number", a.parallelism));
  if (Status s = a.tab.Apply(&o.train.tabular); !s.ok()) return Fail(s);
  o.train.input_path = a.input;
  o.train.model_dir = a.model_dir;
  o.train.cancel = InstallInterruptFlag();
  o.generate.output = a.output;
  if (gen.IsExplicit("gen_lines")) o.generate.num_lines = gen.gen_lines;
  if (gen.IsExplicit("max_invalid")) o.generate.max_invalid = gen.max_invalid;
  o.generate.parallelism = a.parallelism;

  o.generate.seed_fields = a.seeds.seed_field;
  o.generate.seed_file = a.seeds.seed_fields;
  o.generate.cancel = o.train.cancel;
  TabularCliObserver obs;
  SynthesizeSummary sum;
  Status s = Synthesize(o, &obs, &sum);
  obs.Finish();
  if (s.code() == Code::kCancelled) return ReportInterrupted(s, a.model_dir, true);
  if (!s.ok()) return Fail(s);
  std::fprintf(stderr, "synthesized %lld rows in %s (training %s)%s%s\n",
               (long long)sum.generate.rows,
               FormatDuration(sum.train.seconds + sum.generate.seconds).c_str(),
               FormatDuration(sum.train.seconds).c_str(), a.output.empty() ? "" : ", written to ",
               a.output.c_str());
  if (!a.report.empty() || !a.json.empty()) {
    if (a.output.empty() || a.output == "-")
      return Fail(DS_ERR(kInvalidArgument, "--report needs --output (a file to evaluate)"));
    EvaluateArgs e;
    e.real_path = a.input;
    e.synthetic_path = a.output;
    e.report_path = a.report;
    e.json_path = a.json;
    e.delimiter = o.train.config.field_delimiter[0];
    std::string summary;
    if (Status es = RunEvaluate(e, &summary); !es.ok()) return Fail(es);
    std::printf("%s", summary.c_str());
  }
  return 0;
}

}  // namespace

void AddSynthesizeCommand(CLI::App& app) {
  auto* a = new SynthArgs();
  CLI::App* cmd = app.add_subcommand(
      "synthesize", "Train on a table and generate a synthetic one in one go (tabular mode)");
  cmd->add_option("--input,-i", a->input, "the table (CSV with header; .gz read directly)")->required();
  cmd->add_option("--output,-o", a->output, "synthetic table ('-' or none: stdout)");
  cmd->add_option("--model-dir,-m", a->model_dir, "keep the trained model here (default: temporary)");
  cmd->add_option("--config,-c", a->config_file, "JSON file of config keys (flags win)");
  a->gen.AddKey(cmd, "gen_lines", "--num-lines,-n", "as many as the input", "rows to generate");
  a->gen.AddKey(cmd, "max_invalid", "", "1000", "invalid rows allowed per batch");
  cmd->add_option("--parallelism,-p", a->parallelism, "generation workers per batch [default: 0 = all CPUs]");
  cmd->add_option("--report", a->report, "also evaluate: write the HTML quality/privacy report here");
  cmd->add_option("--json", a->json, "also evaluate: write the scores as JSON here");
  a->flags.Add(cmd, {Config::Group::kTraining, Config::Group::kTokenizer, Config::Group::kPrivacy});
  a->tab.Add(cmd);
  a->seeds.Add(cmd);
  cmd->callback([a] { throw CLI::RuntimeError(RunSynthesize(*a)); });
}

}  // namespace ds::cli
