// datasynth: synthetic records from an LSTM trained on your records.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"
#include "dist/comm.h"

namespace {

// CLI11's own parse errors ("--model-dir is required", "The following argument
// was not expected: x") as one "datasynth: error:" line with the usage exit code.
int UsageError(const CLI::App& app, const CLI::ParseError& e) {
  std::string cmd = "datasynth";
  for (const CLI::App* sub : app.get_subcommands()) cmd += " " + sub->get_name();
  std::fprintf(stderr, "datasynth: error: %s (see '%s --help')\n", e.what(), cmd.c_str());
  return 2;  // usage (cli.h: exit codes)
}

// The first word that is not an option must name a command (CLI11 would say
// only "A subcommand is required").
int CheckCommand(const CLI::App& app, const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a.empty() || a[0] == '-') continue;
    std::string names;
    for (const CLI::App* sub : app.get_subcommands({})) {
      if (sub->check_name(a)) return -1;
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    std::fprintf(stderr, "datasynth: error: unknown command '%s' (commands: %s; see 'datasynth --help')\n",
                 a.c_str(), names.c_str());
    return 2;
  }
  return -1;
}

}  // namespace

// mpirun (src/dist): MPI starts first; ranks other than 0 keep only their errors.
int Main(int argc, char** argv);
int main(int argc, char** argv) {
  ds::dist::Init();
  if (ds::dist::Rank() > 0) {
    ds::cli::g_error_out = ::fdopen(::dup(2), "w");
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::close(null);
  }
  return ds::dist::Finish(Main(argc, argv));
}

int Main(int argc, char** argv) {
  // A file-size limit (ulimit -f) makes write() fail with EFBIG, reported
  // like a full disk, instead of killing the process with SIGXFSZ half-way
  // through a file.
  ::signal(SIGXFSZ, SIG_IGN);
  CLI::App app("datasynth " DS_VERSION ": train an LSTM on records and generate synthetic ones");
  app.require_subcommand(1);
  app.add_flag("--verbose,-v", ds::cli::g_verbose, "more detail (error locations, statistics)");
  app.set_version_flag("--version", DS_VERSION);
  app.footer(
      "Boolean flags take --x, --x true|false and --x=false. Exit codes: 0 done, 1 runtime "
      "failure, 2 usage or bad input, 130 interrupted. 'datasynth <command> --help' lists a "
      "command's options with their ranges and defaults.");
  ds::cli::AddTrainCommand(app);
  ds::cli::AddInfoCommand(app);
  ds::cli::AddGenerateCommand(app);
  ds::cli::AddEvaluateCommand(app);
  ds::cli::AddSynthesizeCommand(app);
  ds::cli::AddSchemaCommand(app);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (int rc = CheckCommand(app, args); rc >= 0) return rc;
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
