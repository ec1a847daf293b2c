// Evaluation bench and reference figures.
//
//   evaluate_bench                      ceiling figures + diamonds timing (shared datasets)
//   evaluate_bench --ceiling            only the ceiling figures
//   evaluate_bench --speed              only the diamonds timing
//   evaluate_bench --real R --synthetic S [--holdout H] [--report out.html] [--json out.json]
//                                       one evaluation through RunEvaluate (what
//                                       `datasynth evaluate` does)
//
// Ceiling: each table split 80/20 with seed 42 (SplitTable); the 20% part is
// scored as if it were synthetic data against the 80% part: no generator can be
// expected to beat a fresh sample of the real data. Baselines on the same split:
// the 80% part with every column shuffled on its own (marginals kept,
// associations lost) and uniform random columns.
//
// Speed: diamonds.csv (53,940 rows) as real data against a synthetic table of
// the same size (the real rows with every column shuffled), with and without a
// holdout (80/20 split), privacy checks on, 2 threads.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

#include "evaluate/evaluate.h"

#ifndef DS_SHARED_DATA
#define DS_SHARED_DATA DS_SOURCE_DIR "/../shared/datasets"
#endif

namespace {

using Clock = std::chrono::steady_clock;

ds::Table Load(const std::string& name) {
  auto t = ds::ReadTable(std::string(DS_SHARED_DATA) + "/" + name, ',');
  if (!t.ok()) {
    std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(t).value();
}

void PrintRow(const char* label, const ds::EvalReport& r) {
  auto s = [](const ds::SectionScore& x) { return x.available ? x.score : -1.0; };
  std::printf(
      "  %-26s overall %5.1f  distribution %5.1f  correlation %5.1f  deep %5.1f  (%.2f s)\n", label,
      r.quality.overall, s(r.quality.distribution), s(r.quality.correlation),
      s(r.quality.deep_structure), r.seconds);
}

void Ceiling() {
  std::printf("Ceiling: 20%% held-out split scored against the 80%% part (seed 42)\n");
  for (const char* name : {"telco_churn.csv", "lending_club.csv", "ames.csv", "diamonds.csv"}) {
    ds::Table all = Load(name), train, test;
    ds::SplitTable(all, 0.8, 42, &train, &test);
    std::printf("%s (%zu rows, %zu columns; train %zu, held-out %zu)\n", name, all.num_rows(),
                all.num_cols(), train.num_rows(), test.num_rows());
    ds::EvalOptions opt;
    opt.privacy = false;
    auto held = ds::Evaluate(train, test, nullptr, opt);
    auto shuffled = ds::Evaluate(train, ds::ShuffleColumns(test, 7), nullptr, opt);
    auto uniform =
        ds::Evaluate(train, ds::UniformRandomColumns(train, test.num_rows(), 7), nullptr, opt);
    if (!held.ok() || !shuffled.ok() || !uniform.ok()) {
      std::fprintf(stderr, "evaluation failed\n");
      std::exit(1);
    }
    PrintRow("held-out split (ceiling)", *held);
    PrintRow("columns shuffled", *shuffled);
    PrintRow("uniform random columns", *uniform);
    // Privacy baseline of a fresh real sample: the held-out rows as "synthetic".
    opt.privacy = true;
    auto priv = ds::Evaluate(train, test, nullptr, opt);
    if (priv.ok())
      std::printf("  held-out privacy: exact copies %.2f%%, median DCR %.4f, p05 DCR %.4f\n",
                  100 * priv->privacy.exact_copy_share, priv->privacy.dcr_synthetic_median,
                  priv->privacy.dcr_synthetic_p05);
  }
}

// Process CPU seconds (all threads).
double Cpu() { return double(std::clock()) / CLOCKS_PER_SEC; }

void Speed() {
  auto t0 = Clock::now();
  ds::Table real = Load("diamonds.csv");
  double read_s = std::chrono::duration<double>(Clock::now() - t0).count();
  ds::Table synth = ds::ShuffleColumns(real, 3);
  synth.source = "diamonds (columns shuffled)";
  ds::EvalOptions opt;
  double c0 = Cpu();
  auto r = ds::Evaluate(real, synth, nullptr, opt);
  double cpu1 = Cpu() - c0;
  if (!r.ok()) {
    std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
    std::exit(1);
  }
  auto t1 = Clock::now();
  std::string html = ds::ReportToHtml(*r), json = ds::ReportToJson(*r);
  double render_s = std::chrono::duration<double>(Clock::now() - t1).count();
  std::printf("Speed: diamonds.csv %zu rows vs %zu synthetic rows, %d threads\n", real.num_rows(),
              synth.num_rows(), opt.threads);
  std::printf(
      "  read CSV %.2f s; evaluate %.2f s wall, %.2f s CPU (privacy: %zu synthetic rows vs all "
      "%zu); HTML %.0f KiB + JSON in %.3f s\n",
      read_s, r->seconds, cpu1, r->privacy.dcr_sample_synthetic, real.num_rows(),
      html.size() / 1024.0, render_s);
  ds::Table train, hold;
  ds::SplitTable(real, 0.8, 42, &train, &hold);
  c0 = Cpu();
  auto rh = ds::Evaluate(train, synth, &hold, opt);
  double cpu2 = Cpu() - c0;
  if (!rh.ok()) {
    std::fprintf(stderr, "%s\n", rh.status().ToString().c_str());
    std::exit(1);
  }
  std::printf(
      "  with holdout: train %zu, holdout %zu, synthetic %zu: evaluate %.2f s wall, %.2f s CPU "
      "(DCR + membership inference on %zu-row samples)\n",
      train.num_rows(), hold.num_rows(), synth.num_rows(), rh->seconds, cpu2,
      rh->privacy.mia_members);
}

}  // namespace

int main(int argc, char** argv) {
  ds::EvaluateArgs args;
  bool ceiling = false, speed = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--ceiling")
      ceiling = true;
    else if (a == "--speed")
      speed = true;
    else if (a == "--real")
      args.real_path = next();
    else if (a == "--synthetic")
      args.synthetic_path = next();
    else if (a == "--holdout")
      args.holdout_path = next();
    else if (a == "--report")
      args.report_path = next();
    else if (a == "--json")
      args.json_path = next();
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (!args.real_path.empty() || !args.synthetic_path.empty()) {
    std::string text;
    ds::Status s = ds::RunEvaluate(args, &text);
    if (!s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
      return 1;
    }
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  if (!ceiling && !speed) ceiling = speed = true;
  if (speed) Speed();
  if (ceiling) Ceiling();
  return 0;
}
