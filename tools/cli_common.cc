#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "cli.h"
#include "dist/comm.h"
#include "io/csv.h"

#include "backend/device.h"

namespace ds::cli {

bool g_verbose = false;
FILE* g_error_out = nullptr;

int ExitCodeFor(const Status& s) {
  switch (s.code()) {
    case Code::kOk: return 0;
    case Code::kInvalidInput:
    case Code::kInvalidArgument:
    case Code::kNotFound:
    case Code::kAlreadyExists:
    case Code::kCorrupt: return 2;
    case Code::kCancelled: return 130;
    default: return 1;
  }
}

int Fail(const Status& s) {
  if (g_error_out)  // an mpirun rank other than 0 (datasynth_main.cc)
    std::fprintf(g_error_out, "datasynth: error: %s: %s\n", dist::Where().c_str(),
                 s.ToString(g_verbose).c_str());
  else
    std::fprintf(stderr, "datasynth: error: %s\n", s.ToString(g_verbose).c_str());
  return ExitCodeFor(s);
}

namespace {

const char* GroupName(Config::Group g) {
  switch (g) {
    case Config::Group::kTraining: return "Training";
    case Config::Group::kTokenizer: return "Tokenizer";
    case Config::Group::kPrivacy: return "Privacy";
    case Config::Group::kGeneration: return "Generation";
  }
  return "";
}

// "--batch-size,--batch_size" for batch_size.
std::string FlagNames(const std::string& key) {
  std::string dashed = key;
  for (auto& c : dashed)
    if (c == '_') c = '-';
  std::string names = "--" + dashed;
  if (dashed != key) names += ",--" + key;
  return names;
}

std::string Lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "true" / "false" for a boolean word, "" otherwise.
std::string BoolWord(const std::string& v) {
  const std::string l = Lower(v);
  if (l == "true" || l == "yes" || l == "on" || l == "1") return "true";
  if (l == "false" || l == "no" || l == "off" || l == "0") return "false";
  return "";
}

// The flag (an option taking no value) of `app` that `name` ("--x", "-v") names.
const CLI::Option* FindFlag(const CLI::App& app, const std::string& name) {
  for (const CLI::Option* o : app.get_options())
    if (o->get_items_expected_max() == 0 && o->check_name(name)) return o;
  return nullptr;
}

}  // namespace

CLI::Option* ConfigFlags::AddKey(CLI::App* app, const std::string& key, const std::string& extra_names,
                                 const std::string& default_text, const std::string& help) {
  const Config::Key* k = Config::Find(key);
  if (k == nullptr) throw std::logic_error("ConfigFlags: unknown key " + key);
  auto e = std::make_unique<Entry>();
  e->key = k;
  std::string names = FlagNames(k->name);
  if (!extra_names.empty()) names = extra_names + "," + names;
  std::string def = default_text;
  if (def.empty()) def = Config().ValueString(*k);
  if (def.empty()) def = "\"\"";
  std::string text = help.empty() ? k->help : help;
  const std::string range = k->RangeText();
  if (!range.empty()) text += (k->choices.empty() ? ", range " : ": ") + range;
  text += " [default: " + def + "]";
  if (k->type == Config::Type::kBool) {
    e->opt = app->add_flag(names, e->flag_value, text)->group(GroupName(k->group));
  } else {
    e->opt = app->add_option(names, e->text, text)
                 ->group(GroupName(k->group))
                 ->type_name(k->is_integer() ? "INT" : k->type == Config::Type::kDouble ? "FLOAT" : "TEXT");
  }
  CLI::Option* opt = e->opt;
  entries_.push_back(std::move(e));
  return opt;
}

void ConfigFlags::Add(CLI::App* app, std::initializer_list<Config::Group> groups) {
  for (const auto& k : Config::Keys()) {
    bool want = false;
    for (auto g : groups) want |= (k.group == g);
    if (want) AddKey(app, k.name);
  }
}

Status ConfigFlags::Apply(Config* config) const {
  for (const auto& e : entries_) {
    if (e->opt->count() == 0) continue;
    std::string v = e->key->type == Config::Type::kBool ? (e->flag_value ? "true" : "false") : e->text;
    // "--num-lines: config key 'gen_lines': value -5 out of range [0, ...]"
    if (Status s = config->Set(e->key->name, v); !s.ok())
      return s.WithContext(e->opt->get_name(/*positional=*/false, /*all_options=*/false));
  }
  return Status::Ok();
}

Result<std::vector<std::string>> NormalizeBoolFlags(const CLI::App& app,
                                                    std::vector<std::string> args) {
  std::vector<std::string> out;
  const CLI::App* scope = &app;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {  // everything after it is positional
      out.insert(out.end(), args.begin() + long(i), args.end());
      break;
    }
    if (scope == &app && !a.empty() && a[0] != '-') {
      for (const CLI::App* sub : app.get_subcommands({}))
        if (sub->check_name(a)) scope = sub;
      out.push_back(a);
      continue;
    }
    if (a.size() < 2 || a[0] != '-') {
      out.push_back(a);
      continue;
    }
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    const CLI::Option* flag = FindFlag(*scope, name);
    if (flag == nullptr) {
      out.push_back(a);
      continue;
    }
    if (eq != std::string::npos) {
      const std::string v = BoolWord(a.substr(eq + 1));
      if (v.empty())
        return DS_ERR(kInvalidArgument, "{}: '{}' is not a boolean (true/false, yes/no, on/off, 1/0)",
                      name, a.substr(eq + 1));
      out.push_back(name + "=" + v);
    } else if (i + 1 < args.size() && !BoolWord(args[i + 1]).empty()) {
      out.push_back(name + "=" + BoolWord(args[++i]));
    } else {
      out.push_back(a);
    }
  }
  return out;
}

std::string DefaultDelimiterFromName(const std::string& input, Config* config, bool tables_only) {
  if (config->IsExplicit("field_delimiter") || input.empty()) return "";
  std::string name = Lower(input);
  if (name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0)
    name.resize(name.size() - 3);
  auto ends = [&](const char* ext) {
    const size_t n = std::strlen(ext);
    return name.size() > n && name.compare(name.size() - n, n, ext) == 0;
  };
  const char by_name = ends(".csv") ? ',' : ends(".tsv") ? '\t' : '\0';
  if (by_name == '\0') return "";
  const char d = SniffDelimiter(input, by_name);
  if (!config->Set("field_delimiter", d == '\t' ? "tab" : std::string(1, d)).ok()) return "";
  const std::string why =
      d == by_name ? "from the file name"
                   : fmt::format("found in its first lines; the file name suggests {}",
                                 DelimiterName(by_name));
  return fmt::format("note: {}: read as a table with delimiter {} ({}); give "
                     "--field-delimiter to choose another{}",
                     input, DelimiterName(d), why,
                     tables_only ? "" : ", or --field-delimiter '' to train on plain text lines");
}

void ReportDeviceFallback(bool device_given) { SetDeviceFallbackWarnings(device_given || g_verbose); }

namespace {
double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

ProgressLine::ProgressLine(double plain_interval)
    : tty_(isatty(STDERR_FILENO)), interval_(plain_interval) {}
ProgressLine::~ProgressLine() { Finish(); }

void ProgressLine::Update(const std::string& text, bool force) {
  double now = Now();
  if (tty_) {
    if (!force && now - last_ < 0.1) return;
    std::fprintf(stderr, "\r\033[K%s", text.c_str());
    open_ = true;
  } else {
    if (!force && now - last_ < interval_) return;
    std::fprintf(stderr, "%s\n", text.c_str());
  }
  std::fflush(stderr);
  last_ = now;
}

void ProgressLine::Finish() {
  if (open_) std::fprintf(stderr, "\r\033[K");
  open_ = false;
}

void ProgressLine::Print(const std::string& line) {
  Finish();
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

std::string FormatDuration(double s) {
  if (!(s >= 0) || s > 1e8) return "?";
  int64_t t = int64_t(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02d}m", t / 3600, (t / 60) % 60);
  if (t >= 60) return fmt::format("{}m{:02d}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

}  // namespace ds::cli
