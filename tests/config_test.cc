#include "config/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace ds {
namespace {

TEST(Config, DefaultsMatchTheReference) {
  Config c;
  // ANCHOR.md section 2.
  EXPECT_EQ(c.epochs, 100);
  EXPECT_TRUE(c.early_stopping);
  EXPECT_EQ(c.early_stopping_patience, 5);
  EXPECT_DOUBLE_EQ(c.early_stopping_min_delta, 0.001);
  EXPECT_EQ(c.best_model_metric, "val_loss");
  EXPECT_EQ(c.batch_size, 64);
  EXPECT_EQ(c.buffer_size, 10000);
  EXPECT_EQ(c.seq_length, 100);
  EXPECT_EQ(c.embedding_dim, 256);
  EXPECT_EQ(c.rnn_units, 256);
  EXPECT_DOUBLE_EQ(c.dropout_rate, 0.2);
  EXPECT_DOUBLE_EQ(c.learning_rate, 0.01);
  EXPECT_EQ(c.rnn_initializer, "glorot_uniform");
  EXPECT_TRUE(c.validation_split);
  EXPECT_EQ(c.max_lines, 0);
  EXPECT_FALSE(c.overwrite);
  EXPECT_FALSE(c.save_all_checkpoints);
  EXPECT_TRUE(c.save_best_model);
  EXPECT_EQ(c.vocab_size, 20000);
  EXPECT_DOUBLE_EQ(c.character_coverage, 1.0);
  EXPECT_EQ(c.pretrain_sentence_count, 1000000);
  EXPECT_EQ(c.max_line_len, 2048);
  EXPECT_EQ(c.field_delimiter_token, "<d>");
  EXPECT_FALSE(c.dp);
  EXPECT_DOUBLE_EQ(c.dp_noise_multiplier, 0.1);
  EXPECT_DOUBLE_EQ(c.dp_l2_norm_clip, 3.0);
  EXPECT_EQ(c.dp_microbatches, 1);
  EXPECT_DOUBLE_EQ(c.gen_temp, 1.0);
  EXPECT_EQ(c.gen_chars, 0);
  EXPECT_EQ(c.gen_lines, 1000);
  EXPECT_EQ(c.predict_batch_size, 64);
  EXPECT_TRUE(c.reset_states);
  EXPECT_TRUE(c.Validate().ok());
}

TEST(Config, EveryKeyRoundTripsThroughJson) {
  Config c;
  c.epochs = 7;
  c.field_delimiter = ",";
  c.dp = true;
  c.gen_temp = 0.5;
  nlohmann::json j = c.ToJson();
  EXPECT_EQ(j.size(), Config::Keys().size());
  Config d;
  ASSERT_TRUE(d.MergeJson(j, "x.json").ok());
  EXPECT_EQ(d.ToJson(), j);
}

TEST(Config, RejectsUnknownKeysWrongTypesAndRanges) {
  Config c;
  Status s = c.MergeJson(nlohmann::json::parse(R"({"epoch": 3})"), "cfg.json");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("cfg.json"), std::string::npos);
  EXPECT_NE(s.message().find("unknown config key 'epoch'"), std::string::npos);

  s = c.MergeJson(nlohmann::json::parse(R"({"batch_size": "64"})"), "cfg.json");
  EXPECT_NE(s.message().find("expected an integer"), std::string::npos) << s.message();
  s = c.MergeJson(nlohmann::json::parse(R"({"batch_size": 6.5})"), "cfg.json");
  EXPECT_FALSE(s.ok());
  s = c.MergeJson(nlohmann::json::parse(R"({"batch_size": -1})"), "cfg.json");
  EXPECT_NE(s.message().find("out of range"), std::string::npos) << s.message();
  s = c.MergeJson(nlohmann::json::parse(R"({"seq_length": 1e12})"), "cfg.json");
  EXPECT_FALSE(s.ok());
  s = c.MergeJson(nlohmann::json::parse(R"({"dropout_rate": 1.5})"), "cfg.json");
  EXPECT_FALSE(s.ok());
  s = c.MergeJson(nlohmann::json::parse(R"({"tokenizer": "bytes"})"), "cfg.json");
  EXPECT_NE(s.message().find("not one of"), std::string::npos);
  s = c.MergeJson(nlohmann::json::parse(R"([1, 2])"), "cfg.json");
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(c.Set("early_stopping", "maybe").ok());
  EXPECT_FALSE(c.Set("epochs", "12x").ok());
  EXPECT_FALSE(c.Set("epochs", "99999999999999").ok());
  EXPECT_TRUE(c.Set("epochs", "12").ok());
  EXPECT_EQ(c.epochs, 12);
}

TEST(Config, ReferenceNullsAccepted) {
  Config c;
  ASSERT_TRUE(c.MergeJson(nlohmann::json::parse(
                              R"({"max_training_time_seconds": null, "field_delimiter": null})"),
                          "x")
                  .ok());
  EXPECT_EQ(c.max_training_time_seconds, 0);
  EXPECT_EQ(c.field_delimiter, "");
}

TEST(Config, LoadFileErrors) {
  Config c;
  EXPECT_EQ(c.LoadFile("/nonexistent/cfg.json").code(), Code::kNotFound);
  std::string path = testing::TempDir() + "/bad.json";
  std::ofstream(path) << "{ not json";
  Status s = c.LoadFile(path);
  EXPECT_NE(s.message().find("not valid JSON"), std::string::npos);
  std::ofstream(path) << R"({"epochs": 3, "explicit": 1})";
  EXPECT_FALSE(c.LoadFile(path).ok());
  std::ofstream(path) << R"({"epochs": 3, "tokenizer": "char"})";
  Config d;
  ASSERT_TRUE(d.LoadFile(path).ok());
  EXPECT_EQ(d.epochs, 3);
  EXPECT_TRUE(d.IsExplicit("tokenizer"));
  EXPECT_FALSE(d.IsExplicit("batch_size"));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ds
