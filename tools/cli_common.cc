#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "cli.h"

namespace ds::cli {

bool g_verbose = false;

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
  std::fprintf(stderr, "datasynth: error: %s\n", s.ToString(g_verbose).c_str());
  return ExitCodeFor(s);
}

void ConfigFlags::Add(CLI::App* app, std::initializer_list<Config::Group> groups) {
  Config defaults;
  for (const auto& k : Config::Keys()) {
    bool want = false;
    for (auto g : groups) want |= (k.group == g);
    if (!want) continue;
    auto e = std::make_unique<Entry>();
    e->key = &k;
    std::string dashed = k.name;
    for (auto& c : dashed)
      if (c == '_') c = '-';
    std::string names = "--" + dashed;
    if (dashed != k.name) names += ",--" + k.name;
    const char* group = k.group == Config::Group::kTraining     ? "Training"
                        : k.group == Config::Group::kTokenizer  ? "Tokenizer"
                        : k.group == Config::Group::kPrivacy    ? "Privacy"
                                                                : "Generation";
    std::string def = defaults.ValueString(k);
    if (def.empty()) def = "\"\"";
    std::string help = k.help + " [default: " + def + "]";
    if (k.type == Config::Type::kBool) {
      e->opt = app->add_flag(names, e->flag_value, help)->group(group);
    } else {
      e->opt = app->add_option(names, e->text, help)->group(group);
    }
    entries_.push_back(std::move(e));
  }
}

Status ConfigFlags::Apply(Config* config) const {
  for (const auto& e : entries_) {
    if (e->opt->count() == 0) continue;
    std::string v = e->key->type == Config::Type::kBool ? (e->flag_value ? "true" : "false") : e->text;
    DS_RETURN_IF_ERROR(config->Set(e->key->name, v));
  }
  return Status::Ok();
}

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
