#include "train/dataset.h"

#include <gtest/gtest.h>

#include <set>

namespace ds {
namespace {

InputData Records(int n, int min_len, int max_len) {
  InputData in;
  in.path = "mem.csv";
  in.delimiter = ',';
  in.header = {"a", "b"};
  Philox rng(1, 2);
  for (int i = 0; i < n; ++i) {
    int len = min_len + int(rng.Below(uint64_t(max_len - min_len + 1)));
    std::string a(size_t(len), char('a' + i % 26));
    in.records.push_back({a, std::to_string(i)});
    in.lines.push_back(i + 2);
  }
  return in;
}

std::unique_ptr<Tokenizer> CharTok(const InputData& in) {
  TokenizerConfig c;
  c.type = "char";
  c.column_markers = true;
  c.num_columns = 2;
  return TrainTokenizer(c, in.records).ValueOrThrow();
}

TEST(SequenceData, ChunksStartAtRecordBoundaries) {
  InputData in = Records(400, 5, 40);
  auto tok = CharTok(in);
  auto d = SequenceData::Build(in, *tok, 60, 8, true, 7).ValueOrThrow();
  ASSERT_GT(d.train_batches(), 3);
  Batch b;
  auto order = d.EpochOrder(1, 10000);
  for (int64_t i = 0; i < d.train_batches(); ++i) {
    d.TrainBatch(order, i, &b);
    for (int r = 0; r < b.batch; ++r) {
      EXPECT_EQ(b.inputs[size_t(r) * b.steps], tok->end_id()) << "chunk must start with <n>";
      EXPECT_EQ(b.targets[size_t(r) * b.steps], tok->column_id(0)) << "then a record's first token";
      for (int t = 0; t + 1 < b.steps; ++t)
        EXPECT_EQ(b.targets[size_t(r) * b.steps + t], b.inputs[size_t(r) * b.steps + t + 1]);
    }
  }
}

TEST(SequenceData, EveryTokenIsATargetAndOverlapIsSmall) {
  InputData in = Records(300, 5, 40);
  auto tok = CharTok(in);
  std::vector<int32_t> stream = {tok->end_id()};
  for (const auto& r : in.records) ASSERT_TRUE(tok->EncodeRecord(r, &stream).ok());
  // No validation split: all chunks are training chunks. Count covered tokens
  // by matching each chunk back onto the stream via its (unique) content.
  auto d = SequenceData::Build(in, *tok, 50, 1, false, 3).ValueOrThrow();
  const int64_t L = 50;
  // Chunks advance by at least one record and at most L tokens.
  EXPECT_GE(d.train_batches(), (int64_t(stream.size()) - 1) / L - 1);
  EXPECT_LE(d.train_batches(), int64_t(stream.size()) / 6);
}

TEST(SequenceData, LongRecordsStillCovered) {
  InputData in = Records(50, 150, 200);  // every record longer than seq_length
  auto tok = CharTok(in);
  auto d = SequenceData::Build(in, *tok, 40, 4, false, 3).ValueOrThrow();
  // ~ tokens / 40 chunks (no boundary inside most chunks: consecutive pieces).
  int64_t tokens = d.tokens();
  EXPECT_GE(d.train_batches() * 4, tokens / 40 - 8);
}

TEST(SequenceData, TooFewRecordsSaysHowMany) {
  InputData in = Records(3, 5, 10);
  auto tok = CharTok(in);
  auto r = SequenceData::Build(in, *tok, 100, 64, true, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("too few records"), std::string::npos);
  EXPECT_NE(r.status().message().find("about"), std::string::npos);
}

}  // namespace
}  // namespace ds

namespace ds {
namespace {

TEST(AdaptRecordShape, FollowsTheTable) {
  int seq = 100, batch = 64;
  AdaptRecordShape(50 * 31, 31, true, true, &seq, &batch);  // 50 records of 31 tokens
  EXPECT_EQ(seq, 31);   // one record per sequence
  EXPECT_EQ(batch, 3);  // 50 / 16: 16 batches
  seq = 100, batch = 64;
  AdaptRecordShape(int64_t(1) << 40, 1 << 20, true, true, &seq, &batch);
  EXPECT_EQ(seq, kMaxRecordSeq);
  EXPECT_EQ(batch, kMaxRecordBatch);  // large tables: many small steps
  seq = 100, batch = 8;
  AdaptRecordShape(int64_t(1) << 40, 31, true, true, &seq, &batch);
  EXPECT_EQ(batch, 8);  // never above the configured batch
  seq = 100, batch = 64;
  AdaptRecordShape(10 * 31, 31, false, false, &seq, &batch);  // explicit settings stay
  EXPECT_EQ(seq, 100);
  EXPECT_EQ(batch, 64);
  seq = 600;
  batch = 64;
  AdaptRecordShape(1000 * 150, 600, true, true, &seq, &batch);  // text: 4 records a sequence
  EXPECT_EQ(batch, 15);                                         // 250 sequences / 16
  AdaptRecordShape(5 * 31, 31, true, true, &seq, &batch);
  EXPECT_EQ(batch, 1);
}

}  // namespace
}  // namespace ds
