// datasynth: synthetic records from an LSTM trained on your records.
#include <signal.h>

#include <cstdio>

#include "cli.h"

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
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
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
