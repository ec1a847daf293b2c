// datasynth evaluate: quality and privacy report of a synthetic table.
#include "cli.h"
#include "evaluate/evaluate.h"
#include "io/csv.h"

namespace ds::cli {

void AddEvaluateCommand(CLI::App& app) {
  struct Args {
    EvaluateArgs e;
    std::string delimiter;  // empty: sniffed from --real
  };
  static Args a;
  CLI::App* cmd = app.add_subcommand(
      "evaluate", "Score a synthetic table against the real one (quality and privacy report)");
  cmd->add_option("--real", a.e.real_path, "the training table (CSV)")->required();
  cmd->add_option("--synthetic", a.e.synthetic_path, "the synthetic table (CSV)")->required();
  cmd->add_option("--holdout", a.e.holdout_path,
                  "real rows NOT used for training: the ceiling and privacy baseline");
  cmd->add_option("--report", a.e.report_path, "write the self-contained HTML report here");
  cmd->add_option("--json", a.e.json_path, "write every score as JSON here");
  cmd->add_flag("--overwrite", a.e.overwrite, "replace an existing --report / --json file");
  cmd->add_option("--delimiter,--field-delimiter", a.delimiter,
                  "CSV delimiter [default: found in --real's first lines (',' ';' tab '|'), else ,]");
  cmd->callback([] {
    if (a.delimiter.empty()) {
      a.e.delimiter = SniffDelimiter(a.e.real_path, ',');
    } else {
      auto d = ParseDelimiter(a.delimiter);
      if (!d.ok()) throw CLI::RuntimeError(Fail(d.status()));
      a.e.delimiter = d.value();
    }
    std::string summary;
    Status s = RunEvaluate(a.e, &summary);
    if (!s.ok()) throw CLI::RuntimeError(Fail(s));
    std::printf("%s", summary.c_str());
    throw CLI::RuntimeError(0);
  });
}

}  // namespace ds::cli
