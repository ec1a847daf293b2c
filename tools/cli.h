// The datasynth command line: thin wrappers over the library. Each command
// registers its options on a CLI11 subcommand and runs a library call; all
// terminal concerns (progress lines, colours, exit codes) live here.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <string>

#include "config/config.h"
#include "util/status.h"

namespace ds::cli {

// Exit codes: 0 ok, 1 runtime failure, 2 usage / bad input, 130 interrupted.
int ExitCodeFor(const Status& s);
// Prints "datasynth: error: <message>" (with the source location if verbose).
int Fail(const Status& s);
extern bool g_verbose;

// Adds one --flag per config key of the given groups (dashes for
// underscores; the key itself is accepted too: --batch_size), with the
// default shown in --help. Values are collected into `values`.
class ConfigFlags {
 public:
  void Add(CLI::App* app, std::initializer_list<Config::Group> groups);
  // Applies flags given on the command line on top of `config` (flags win).
  Status Apply(Config* config) const;

 private:
  struct Entry {
    const Config::Key* key;
    CLI::Option* opt;
    std::string text;
    bool flag_value = false;
  };
  std::vector<std::unique_ptr<Entry>> entries_;
};

// Progress line on stderr: redrawn in place on a terminal (at most 10 times a
// second), a plain line every `plain_interval` seconds otherwise.
class ProgressLine {
 public:
  explicit ProgressLine(double plain_interval = 10.0);
  ~ProgressLine();
  void Update(const std::string& text, bool force = false);
  void Finish();  // ends the in-place line
  void Print(const std::string& line);  // a permanent line
  bool tty() const { return tty_; }

 private:
  bool tty_;
  double interval_;
  double last_ = -1e9;
  bool open_ = false;
};

std::string FormatDuration(double seconds);

void AddTrainCommand(CLI::App& app);
void AddInfoCommand(CLI::App& app);
void AddEvaluateCommand(CLI::App& app);
void AddGenerateCommand(CLI::App& app);
void AddSynthesizeCommand(CLI::App& app);

}  // namespace ds::cli
