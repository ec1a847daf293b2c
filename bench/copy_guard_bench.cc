// Measurement helper for the copy guard (generate/copy_guard.h): adds a
// copy_guard.bin built from TRAIN.csv to an existing model directory (one
// trained before the guard, or with copy_guard = false) and binds it in
// model_params.json, so that the same weights can be generated with and
// without the guard (docs/generate.md, "Exact copies of rare training rows").
//   ./build/copy_guard_bench MODEL_DIR TRAIN.csv [min_count]
#include <cstdio>
#include <cstdlib>

#include "generate/copy_guard.h"
#include "model/model_dir.h"
#include "train/dataset.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR TRAIN.csv [min_count]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  auto model = ds::LoadModel(dir);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().message().c_str());
    return 1;
  }
  ds::Config cfg = (*model)->config;
  if (argc > 3) cfg.copy_guard_min_count = std::atoi(argv[3]);
  auto input = ds::ReadInput(argv[2], (*model)->meta.delimiter, 0);
  if (!input.ok()) {
    std::fprintf(stderr, "%s\n", input.status().message().c_str());
    return 1;
  }
  cfg.copy_guard = true;
  auto line = ds::WriteCopyGuard(cfg, (*model)->meta.delimiter != 0, *(*model)->tokenizer,
                                 input->records, uint64_t(cfg.seed), dir);
  ds::Status st = line.ok() ? ds::WriteModelParams(dir, cfg, (*model)->meta) : line.status();
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 1;
  }
  std::printf("%s\n", line->c_str());
  return 0;
}
