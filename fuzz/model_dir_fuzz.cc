// Fuzz target: the model loader (model/model_dir.h LoadModel) driven through
// model_params.json, the file that describes a model directory and names the others.
//
// Setup (once per process): a scratch directory with a complete, valid model: a char
// tokenizer with column markers for a 2-column CSV, a tiny network (embedding 8, one
// LSTM layer of 8) and its weights file. Each input replaces model_params.json, then
// LoadModel runs on the directory. The valid model_params.json is the seed
// (DS_FUZZ_DUMP_SEED=<file> writes it there).
// After a successful load: the tokenizer agrees with the network, the weights are the
// model's, the description serialises again (as `datasynth info --json` does).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "model/model_dir.h"
#include "model/network.h"
#include "util/fs.h"

namespace ds::fuzz {
namespace model_dir_fuzz {

struct ValidModel {
  std::string dir;
  std::string params_json;  // the valid model_params.json
};

inline const ValidModel& Setup() {
  static const ValidModel* model = [] {
    auto* m = new ValidModel;
    m->dir = MakeScratchDir("model");
    TokenizerConfig tc;
    tc.type = "char";
    tc.column_markers = true;
    tc.num_columns = 2;
    auto tok = TrainTokenizer(tc, {{"a1", "b2"}, {"c\"3", "d é"}}).ValueOrThrow();
    ThrowIfError(tok->Save(m->dir));
    ModelMeta meta;
    meta.datasynth_version = DS_VERSION;
    meta.spec = {tok->vocab_size(), 8, 8, 1, 0.2f};
    meta.header = {"x", "y"};
    meta.delimiter = ',';
    meta.input_path = "fuzz.csv";
    meta.records = 2;
    meta.epochs_run = meta.best_epoch = 1;
    meta.stop_reason = "epochs";
    meta.weights_file = "weights-e0001.bin";
    const ParamLayout layout = ParamLayout::For(meta.spec);
    std::vector<float> params(layout.total);  // [total]
    InitParams(meta.spec, "glorot_uniform", 1, params.data());
    meta.weights_crc = Crc32(params.data(), params.size() * sizeof(float));
    ThrowIfError(WriteTensorFile(m->dir + "/" + meta.weights_file,
                                 {{"params", params.data(), params.size()}}));
    Config config;
    config.tokenizer = "char";
    config.field_delimiter = ",";
    config.epochs = 1;
    ThrowIfError(WriteModelParams(m->dir, config, meta));
    m->params_json = ReadFile(m->dir + "/model_params.json").ValueOrThrow();
    if (const char* dump = std::getenv("DS_FUZZ_DUMP_SEED")) WriteBytes(dump, m->params_json);
    return m;
  }();
  return *model;
}

}  // namespace model_dir_fuzz

inline int ModelDirOneInput(const uint8_t* data, size_t size) {
  const model_dir_fuzz::ValidModel& valid = model_dir_fuzz::Setup();
  WriteBytes(valid.dir + "/model_params.json", AsText(data, size));
  auto r = LoadModel(valid.dir);
  if (!r.ok()) {
    DS_FUZZ_CHECK(!r.status().message().empty());
    return 0;
  }
  const Model& m = **r;
  DS_FUZZ_CHECK(m.tokenizer->vocab_size() == m.meta.spec.vocab_size);
  const ParamLayout layout = ParamLayout::For(m.meta.spec);
  DS_FUZZ_CHECK(m.params != nullptr);
  for (size_t i = 0; i < layout.total; ++i) DS_FUZZ_CHECK(std::isfinite(m.params[i]));
  nlohmann::json j = m.config.ToJson();
  j["datasynth"] = m.meta.ToJson();
  (void)j.dump(2);
  return 0;
}

}  // namespace ds::fuzz

#ifndef DS_FUZZ_NO_MAIN
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return ds::fuzz::ModelDirOneInput(data, size);
}
#endif
