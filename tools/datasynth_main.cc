// datasynth: synthetic records from an LSTM trained on your records.
#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"

namespace {

// CLI11's own parse errors ("--model-dir is required", "The following argument
// was not expected: x") as one "datasynth: error:" line with the usage exit code.
int UsageError(const CLI::App& app, const CLI::ParseError& e) {
  std::string cmd = "datasynth";
  for (const CLI::App* sub : app.get_subcommands()) cmd += " " + sub->get_name();
  std::fprintf(stderr, "datasynth: error: %s (see '%s --help')\n", e.what(), cmd.c_str());
  return 2;  // usage (cli.h: exit codes)
}

}  // namespace

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) makes write() fail with EFBIG, reported
  // like a full disk, instead of killing the process with SIGXFSZ half-way
  // through a file.
  ::signal(SIGXFSZ, SIG_IGN);
  CLI::App app("datasynth " DS_VERSION ": train an LSTM on records and generate synthetic ones");
  app.require_subcommand(1);
  app.add_flag("--verbose,-v", ds::cli::g_verbose, "more detail (error locations, statistics)");
  app.set_version_flag("--version", DS_VERSION);
  ds::cli::AddTrainCommand(app);
  ds::cli::AddInfoCommand(app);
  ds::cli::AddGenerateCommand(app);
  ds::cli::AddEvaluateCommand(app);
  ds::cli::AddSynthesizeCommand(app);
  std::vector<std::string> args(argv + 1, argv + argc);
  auto normalized = ds::cli::NormalizeBoolFlags(app, std::move(args));
  if (!normalized.ok()) return ds::cli::Fail(normalized.status());
  std::vector<char*> av = {argv[0]};
  for (auto& a : normalized.value()) av.push_back(a.data());
  try {
    app.parse(int(av.size()), av.data());
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return UsageError(app, e);
  } catch (const ds::Error& e) {
    return ds::cli::Fail(e.status());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "datasynth: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {  // a bug: report it instead of std::terminate
    std::fprintf(stderr, "datasynth: error: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}
