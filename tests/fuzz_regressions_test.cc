// Replays every fuzz input kept in the repository (the seed corpora in
// fuzz/corpus/<target>/ and the inputs of fixed crashes in fuzz/regressions/<target>/)
// through the fuzz targets' entry functions, compiled here without libFuzzer, so that
// the normal build re-checks every crash that was ever fixed and every invariant the
// targets assert (DS_FUZZ_FAIL becomes a test failure naming the input).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#define DS_FUZZ_NO_MAIN 1
#define DS_FUZZ_FAIL(msg) ADD_FAILURE() << "fuzz invariant violated: " << (msg)

#include "../fuzz/config_fuzz.cc"
#include "../fuzz/csv_fuzz.cc"
#include "../fuzz/model_dir_fuzz.cc"
#include "../fuzz/tensor_file_fuzz.cc"
#include "../fuzz/tokenizer_fuzz.cc"

namespace {

namespace fs = std::filesystem;
using Entry = int (*)(const uint8_t*, size_t);

std::vector<fs::path> Inputs(const std::string& target) {
  std::vector<fs::path> files;
  for (const char* kind : {"corpus", "regressions"}) {
    const fs::path dir = fs::path(DS_SOURCE_DIR) / "fuzz" / kind / target;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

void Replay(const std::string& target, Entry entry, size_t min_inputs) {
  const std::vector<fs::path> files = Inputs(target);
  EXPECT_GE(files.size(), min_inputs) << "seed corpus of " << target << " is missing";
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    std::ifstream in(f, std::ios::binary);
    ASSERT_TRUE(in) << "cannot read " << f;
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string bytes = ss.str();
    EXPECT_EQ(entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0);
  }
}

TEST(FuzzRegressions, Csv) { Replay("csv_fuzz", ds::fuzz::CsvOneInput, 5); }
TEST(FuzzRegressions, Config) { Replay("config_fuzz", ds::fuzz::ConfigOneInput, 3); }
TEST(FuzzRegressions, TensorFile) { Replay("tensor_file_fuzz", ds::fuzz::TensorFileOneInput, 3); }
TEST(FuzzRegressions, ModelDir) { Replay("model_dir_fuzz", ds::fuzz::ModelDirOneInput, 1); }
TEST(FuzzRegressions, Tokenizer) { Replay("tokenizer_fuzz", ds::fuzz::TokenizerOneInput, 3); }

}  // namespace
