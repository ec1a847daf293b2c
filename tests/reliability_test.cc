// Unit tests for the bad-input fixes of issue #7 (the end-to-end matrix is
// tests/bad_input_test.sh; docs/reliability.md lists every case):
//   * model_params.json binds tokenizer.json by CRC-32: a tokenizer from another
//     model with the same vocabulary size is refused; models written before the
//     checksum existed still load;
//   * string config values from the command line must be valid UTF-8 (they end up in
//     model_params.json; invalid UTF-8 used to abort the process while writing it);
//   * a gzip stream damaged in the middle gives the same bytes, then the same error,
//     whatever the read size (found by fuzz/csv_fuzz.cc: the CSV reader reported
//     "invalid UTF-8" or "corrupt gzip stream" depending on its buffer size), and a
//     truncated one every byte zlib can decode before "truncated gzip stream".
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "config/config.h"
#include "io/input.h"
#include "model/model_dir.h"
#include "model/network.h"
#include "util/fs.h"

namespace ds {
namespace {

// A complete model directory with a char tokenizer trained on `records`.
void WriteModel(const std::string& dir, const std::vector<std::vector<std::string>>& records) {
  TokenizerConfig tc;
  tc.type = "char";
  auto tok = TrainTokenizer(tc, records).ValueOrThrow();
  ThrowIfError(tok->Save(dir));
  ModelMeta meta;
  meta.spec = {tok->vocab_size(), 4, 4, 1, 0.0f};
  meta.header = {"a"};
  meta.delimiter = ',';
  meta.weights_file = "weights-e0001.bin";
  std::vector<float> params(ParamLayout::For(meta.spec).total);  // [total]
  InitParams(meta.spec, "glorot_uniform", 3, params.data());
  meta.weights_crc = Crc32(params.data(), params.size() * sizeof(float));
  ThrowIfError(
      WriteTensorFile(dir + "/" + meta.weights_file, {{"params", params.data(), params.size()}}));
  Config config;
  config.field_delimiter = ",";
  ThrowIfError(WriteModelParams(dir, config, meta));
}

class TokenizerBinding : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = ::testing::TempDir() + "/ds_reliability_" + std::to_string(::getpid());
    ThrowIfError(RemoveTree(base_));
    ThrowIfError(MakeDirs(base_));
    // Same number of distinct characters (3), different characters.
    WriteModel(base_ + "/m1", {{"abc"}, {"cab"}});
    WriteModel(base_ + "/m2", {{"xyz"}, {"zyx"}});
  }
  void TearDown() override { (void)RemoveTree(base_); }
  std::string base_;
};

TEST_F(TokenizerBinding, ModelLoadsWithItsOwnTokenizer) {
  auto m = LoadModel(base_ + "/m1");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::vector<int32_t> ids;
  EXPECT_TRUE((*m)->tokenizer->EncodeField("abc", &ids).ok());
  const auto params =
      nlohmann::json::parse(ReadFile(base_ + "/m1/model_params.json").ValueOrThrow());
  const std::string tok = ReadFile(base_ + "/m1/tokenizer.json").ValueOrThrow();
  EXPECT_EQ(params["datasynth"]["tokenizer_crc32"].get<uint32_t>(), Crc32(tok.data(), tok.size()));
}

TEST_F(TokenizerBinding, SameSizeTokenizerFromAnotherModelIsRefused) {
  const std::string t2 = ReadFile(base_ + "/m2/tokenizer.json").ValueOrThrow();
  ThrowIfError(WriteFileAtomic(base_ + "/m1/tokenizer.json", t2));
  auto m = LoadModel(base_ + "/m1");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kCorrupt);
  EXPECT_NE(
      m.status().message().find("m1/tokenizer.json: does not belong to this model_params.json"),
      std::string::npos)
      << m.status().message();
}

TEST_F(TokenizerBinding, ModelsWithoutTheChecksumStillLoadAndBadChecksumTypesAreRefused) {
  const std::string path = base_ + "/m1/model_params.json";
  auto params = nlohmann::json::parse(ReadFile(path).ValueOrThrow());
  params["datasynth"].erase("tokenizer_crc32");
  ThrowIfError(WriteFileAtomic(path, params.dump()));
  EXPECT_TRUE(LoadModel(base_ + "/m1").ok());
  params["datasynth"]["tokenizer_crc32"] = "123";
  ThrowIfError(WriteFileAtomic(path, params.dump()));
  auto m = LoadModel(base_ + "/m1");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kCorrupt);
}

TEST(ConfigUtf8, StringFlagsMustBeValidUtf8) {
  Config c;
  Status s = c.Set("field_delimiter_token", "<\xff>");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "config key 'field_delimiter_token': value is not valid UTF-8");
  EXPECT_EQ(c.field_delimiter_token, "<d>");                       // unchanged
  EXPECT_TRUE(c.Set("field_delimiter_token", "<\xc3\xa9>").ok());  // <é>
  EXPECT_EQ(c.field_delimiter_token, "<\xc3\xa9>");
  (void)c.ToJson().dump();                                                    // serialisable
  EXPECT_FALSE(c.Set("gpu_memory_limit", std::string("4\xe0\x80GiB")).ok());  // overlong
}

std::string Gzip(const std::string& in) {
  z_stream s{};
  EXPECT_EQ(deflateInit2(&s, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&s, uLong(in.size())), '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  s.avail_in = uInt(in.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = uInt(out.size());
  EXPECT_EQ(deflate(&s, Z_FINISH), Z_STREAM_END);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

// Reads everything with reads of `step` bytes: the bytes before the error, and the error.
std::pair<std::string, std::string> ReadInSteps(const std::string& path, size_t step) {
  auto in = InputStream::Open(path).ValueOrThrow();
  std::string got, buf(step, '\0');
  for (;;) {
    Result<size_t> r = in->Read(buf.data(), step);
    if (!r.ok()) return {got, r.status().message()};
    if (*r == 0) return {got, ""};
    got.append(buf.data(), *r);
  }
}

TEST(GzipInput, DamageMidStreamGivesTheSameBytesAndErrorForEveryReadSize) {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "row " + std::to_string(i * 7919 % 10007) + ",x\n";
  std::string gz = Gzip(text);
  const std::string path = ::testing::TempDir() + "/ds_reliability_mid.gz";
  int checked = 0;
  for (size_t at : {gz.size() / 3, gz.size() / 2, gz.size() * 3 / 4}) {
    std::string bad = gz;
    bad[at] = char(bad[at] ^ 0x5a);
    ThrowIfError(WriteFileAtomic(path, bad));
    const auto big = ReadInSteps(path, size_t(1) << 20);
    const auto small = ReadInSteps(path, 7);
    EXPECT_FALSE(big.second.empty()) << "damage at " << at << " went unnoticed";
    EXPECT_EQ(big.second, small.second) << "damage at " << at;
    EXPECT_EQ(big.first, small.first) << "damage at " << at;
    checked += big.first.size() > 0;
  }
  EXPECT_GT(checked, 0);  // some damage was found after decoding bytes
  std::remove(path.c_str());
}

// A truncated stream: the same bytes, then "truncated gzip stream", whatever the read
// size, wherever it is cut. Small reads used to lose the rest of a long match that zlib
// still held when the input had run out (found by fuzz/csv_fuzz.cc: small reads said
// "truncated" where large ones found the data's own error first).
TEST(GzipInput, TruncatedStreamGivesTheSameBytesForEveryReadSize) {
  std::string text = "header\n";
  for (int i = 0; i < 40; ++i) text += std::string(size_t(300 + 37 * i), char('a' + i % 26)) + "\n";
  const std::string gz = Gzip(text);
  const std::string path = ::testing::TempDir() + "/ds_reliability_trunc.gz";
  int mismatches = 0;
  for (size_t cut = 11; cut < gz.size(); ++cut) {
    ThrowIfError(WriteFileAtomic(path, gz.substr(0, cut)));
    const auto big = ReadInSteps(path, size_t(1) << 20);
    const auto small = ReadInSteps(path, 5);
    EXPECT_NE(big.second.find("truncated gzip stream"), std::string::npos) << big.second;
    EXPECT_EQ(text.compare(0, big.first.size(), big.first), 0);  // a prefix of the text
    if (big != small) ++mismatches;
  }
  EXPECT_EQ(mismatches, 0);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ds
