#include "model/tensor_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>

#include "util/fs.h"

namespace ds {
namespace {

class TensorFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir() + "/tf_" + std::to_string(getpid());
    ASSERT_TRUE(MakeDirs(dir_).ok());
    path_ = dir_ + "/w.bin";
    a_.resize(1000);
    std::iota(a_.begin(), a_.end(), 0.5f);
    b_ = {1.f, -2.f, 3.f};
    ASSERT_TRUE(WriteTensorFile(path_, {{"params", a_.data(), a_.size()}, {"opt", b_.data(), 3}}).ok());
  }
  void TearDown() override { (void)RemoveTree(dir_); }
  std::string Bytes() {
    std::ifstream in(path_, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void Put(const std::string& bytes) { std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes; }
  std::string dir_, path_;
  std::vector<float> a_, b_;
};

TEST_F(TensorFileTest, RoundTripAligned) {
  auto f = MappedTensorFile::Open(path_);
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto p = (*f)->Section("params", 1000);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p.value()) % 4096, 0u);
  EXPECT_EQ(std::memcmp(p.value(), a_.data(), 4000), 0);
  auto o = (*f)->Section("opt");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o.value()[1], -2.f);
  EXPECT_EQ((*f)->SectionNames(), (std::vector<std::string>{"params", "opt"}));
  // Wrong expected size and missing sections are errors naming the file.
  auto bad = (*f)->Section("params", 999);
  EXPECT_EQ(bad.status().code(), Code::kCorrupt);
  EXPECT_NE(bad.status().message().find("w.bin"), std::string::npos);
  EXPECT_FALSE((*f)->Section("nope").ok());
  // No temporary files left next to it.
  std::string listing;
  for (auto name : {"w.bin"}) listing += name;
  EXPECT_TRUE(PathExists(path_));
}

TEST_F(TensorFileTest, TruncatedFileRejected) {
  std::string s = Bytes();
  Put(s.substr(0, s.size() - 100));
  auto f = MappedTensorFile::Open(path_);
  EXPECT_EQ(f.status().code(), Code::kCorrupt);
  EXPECT_NE(f.status().message().find("truncated"), std::string::npos) << f.status().message();
  Put(s.substr(0, 100));
  EXPECT_EQ(MappedTensorFile::Open(path_).status().code(), Code::kCorrupt);
  Put("");
  EXPECT_EQ(MappedTensorFile::Open(path_).status().code(), Code::kCorrupt);
}

TEST_F(TensorFileTest, FlippedDataByteRejected) {
  std::string s = Bytes();
  s[4096 + 17] ^= 0x40;
  Put(s);
  auto f = MappedTensorFile::Open(path_);
  EXPECT_EQ(f.status().code(), Code::kCorrupt);
  EXPECT_NE(f.status().message().find("checksum"), std::string::npos) << f.status().message();
}

TEST_F(TensorFileTest, EditedHeaderRejected) {
  std::string s = Bytes();
  s[32 + 48] = char(s[32 + 48] + 1);  // section count field
  Put(s);
  EXPECT_EQ(MappedTensorFile::Open(path_).status().code(), Code::kCorrupt);
}

TEST_F(TensorFileTest, WrongMagicAndVersion) {
  std::string s = Bytes();
  std::string m = s;
  m[0] = 'X';
  Put(m);
  EXPECT_NE(MappedTensorFile::Open(path_).status().message().find("magic"), std::string::npos);
  std::string v = s;
  v[8] = 9;
  Put(v);
  EXPECT_NE(MappedTensorFile::Open(path_).status().message().find("version 9"), std::string::npos);
}

TEST_F(TensorFileTest, NonFiniteRejectedAndMissingFile) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(WriteTensorFile(path_, {{"params", &nan, 1}}).ok());
  EXPECT_NE(MappedTensorFile::Open(path_).status().message().find("non-finite"), std::string::npos);
  EXPECT_EQ(MappedTensorFile::Open(dir_ + "/none.bin").status().code(), Code::kNotFound);
}

TEST(Crc32, KnownValue) {
  const char* s = "123456789";
  EXPECT_EQ(Crc32(s, 9), 0xCBF43926u);
}

}  // namespace
}  // namespace ds
