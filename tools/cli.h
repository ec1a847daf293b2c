// The datasynth command line: thin wrappers over the library. Each command
// registers its options on a CLI11 subcommand and runs a library call; all
// terminal concerns (progress lines, colours, exit codes) live here.
#pragma once

#include <cstdio>

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
// mpirun ranks other than 0: their errors go here (their other output is dropped).
extern FILE* g_error_out;

// Adds one --flag per config key of the given groups (dashes for
// underscores; the key itself is accepted too: --batch_size), with the valid
// range and the default shown in --help (both from the key table). The value
// is parsed and range-checked by Config::Set when applied: a flag and the same
// key in a JSON config give the same errors.
class ConfigFlags {
 public:
  void Add(CLI::App* app, std::initializer_list<Config::Group> groups);
  // One key's flag with `extra_names` before the default ones ("--num-lines,-n")
  // and `default_text` replacing the table's default in --help ("the model's").
  CLI::Option* AddKey(CLI::App* app, const std::string& key, const std::string& extra_names = "",
                      const std::string& default_text = "", const std::string& help = "");
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

// Boolean flags take `--x`, `--x=VALUE` and `--x VALUE`, VALUE one of
// true/false/yes/no/on/off/1/0 (any case). CLI11 itself takes only the first
// two: this rewrites `--x VALUE` to `--x=VALUE` for the flags of `app` and of
// the subcommand named in `args` (a following token that is not such a word
// stays an argument of its own), and refuses `--x=maybe` naming the flag.
// `args` excludes the program name.
Result<std::vector<std::string>> NormalizeBoolFlags(const CLI::App& app,
                                                    std::vector<std::string> args);

// A .csv / .csv.gz input without an explicit field_delimiter is read as CSV
// with ',' (.tsv / .tsv.gz: tab); returns the note saying so ("" when the
// delimiter was given, or the name says nothing). An explicit empty
// delimiter (--field-delimiter '') trains on text lines; `tables_only`
// (tabular mode) leaves that hint out of the note.
std::string DefaultDelimiterFromName(const std::string& input, Config* config,
                                     bool tables_only = false);

// Whether a device fallback ("no usable GPU; running on the CPU") is worth
// a line: the device was asked for (--device given) or --verbose.
void ReportDeviceFallback(bool device_given);

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
void AddSchemaCommand(CLI::App& app);

}  // namespace ds::cli
