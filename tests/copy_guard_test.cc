// The copy guard (generate/copy_guard.h): which rows it guards, canonical
// spellings, the file format and its checks against damaged files.
#include "generate/copy_guard.h"

#include <gtest/gtest.h>

#include "model/tensor_file.h"
#include "tokenize/field_tokenizer.h"

namespace ds {
namespace {

using Rows = std::vector<std::vector<std::string>>;

// A table with a normalized numeric column (`3e+05` is written back as 300000).
Rows Table() {
  Rows r;
  for (int i = 0; i < 60; ++i)
    r.push_back({i % 3 == 0 ? "a" : "b", std::to_string(1000 * (i % 20)), std::to_string(i)});
  r.push_back({"a", "3e+05", "7"});  // rare, re-spelled
  r.push_back({"b", "5000", "100"});
  r.push_back({"b", "5000", "100"});  // seen twice: not rare at min_count 2
  return r;
}

std::unique_ptr<FieldTokenizer> Tok(const Rows& rows) {
  auto t = FieldTokenizer::Train({"k", "n", "i"}, rows, FieldTokenizerOptions{});
  EXPECT_TRUE(t.ok()) << t.status().message();
  return std::move(t).value();
}

TEST(CopyGuard, GuardsRareRowsInTheirWrittenSpelling) {
  Rows rows = Table();
  auto tok = Tok(rows);
  auto g = CopyGuard::Build(*tok, rows, 2, 42);
  EXPECT_EQ(g->size(), 61u);  // 60 distinct rows + the re-spelled one; the twice-seen row is not
  EXPECT_TRUE(g->Copies({"a", "0", "0"}));
  EXPECT_TRUE(g->Copies({"a", "300000", "7"}));  // as generation writes 3e+05
  EXPECT_FALSE(g->Copies({"b", "5000", "100"}));  // seen twice
  EXPECT_FALSE(g->Copies({"a", "0", "1"}));       // not a training row
  EXPECT_FALSE(g->Copies({"a0", "", "0"}));       // field boundaries count
  // min_count 3 guards the twice-seen row too; 1 guards nothing.
  EXPECT_TRUE(CopyGuard::Build(*tok, rows, 3, 42)->Copies({"b", "5000", "100"}));
  EXPECT_EQ(CopyGuard::Build(*tok, rows, 1, 42)->size(), 0u);
  // Another salt, other hashes, the same rows.
  auto g2 = CopyGuard::Build(*tok, rows, 2, 43);
  EXPECT_NE(g2->Hash({"a", "0", "0"}), g->Hash({"a", "0", "0"}));
  EXPECT_TRUE(g2->Copies({"a", "0", "0"}));
}

TEST(CopyGuard, RoundTripAndDamagedFiles) {
  Rows rows = Table();
  auto tok = Tok(rows);
  auto g = CopyGuard::Build(*tok, rows, 2, 42);
  const std::string bytes = g->Serialize();
  EXPECT_EQ(bytes.size(), 32 + 8 * g->size() + 4);
  auto back = CopyGuard::Parse(bytes, "f");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ((*back)->size(), g->size());
  EXPECT_EQ((*back)->min_count(), 2);
  EXPECT_TRUE((*back)->Copies({"a", "300000", "7"}));
  EXPECT_EQ((*back)->Serialize(), bytes);

  auto refused = [](const std::string& b, const std::string& what) {
    auto r = CopyGuard::Parse(b, "m/copy_guard.bin");
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.status().code(), Code::kCorrupt) << what;
    EXPECT_NE(r.status().message().find("m/copy_guard.bin"), std::string::npos) << what;
  };
  auto with_crc = [](std::string b) {  // recompute the trailing CRC after an edit
    b.resize(b.size() - 4);
    const uint32_t crc = Crc32(b.data(), b.size());
    for (int i = 0; i < 4; ++i) b.push_back(char((crc >> (8 * i)) & 0xff));
    return b;
  };
  refused("", "empty");
  refused(bytes.substr(0, 20), "short");
  refused(bytes.substr(0, bytes.size() - 9), "truncated");
  refused(bytes + "x", "trailing byte");
  std::string b = bytes;
  b[0] = 'X';
  refused(b, "magic");
  b = bytes;
  b[40] ^= 1;
  refused(b, "flipped bit (checksum)");
  b = bytes;
  b[8] = 2;
  refused(with_crc(b), "version");
  b = bytes;
  b[12] = b[13] = b[14] = b[15] = 0;
  refused(with_crc(b), "min_count 0");
  b = bytes;
  b[31] = 0x7f;  // count far beyond the bytes
  refused(with_crc(b), "count");
  b = bytes;
  std::swap_ranges(b.begin() + 32, b.begin() + 40, b.begin() + 40);  // hashes 1 and 2 swapped
  refused(with_crc(b), "order");
}

}  // namespace
}  // namespace ds
