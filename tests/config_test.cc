#include "config/config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <fstream>

namespace ds {
namespace {

TEST(Config, DefaultsMatchTheReference) {
  Config c;
  // docs/reference.md §2.
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


// Every numeric key declares its range in the key table, and flags (Set) and
// JSON (SetJson) enforce it exactly at the bounds: nothing is clamped,
// replaced by a default or wrapped.
TEST(Config, EveryNumericKeyIsRangeCheckedAtTheBounds) {
  for (const auto& k : Config::Keys()) {
    if (k.type == Config::Type::kBool) continue;
    if (k.type == Config::Type::kString) {
      EXPECT_TRUE(!k.choices.empty() || k.extra) << k.name << ": a string key with no rule";
      continue;
    }
    ASSERT_TRUE(k.has_range) << k.name << " has no declared range";
    EXPECT_FALSE(k.RangeText().empty()) << k.name;
    Config c;
    if (k.is_integer()) {
      EXPECT_TRUE(c.Set(k.name, std::to_string(k.imin)).ok()) << k.name;
      EXPECT_TRUE(c.Set(k.name, std::to_string(k.imax)).ok()) << k.name;
      EXPECT_TRUE(c.SetJson(k.name, nlohmann::json(k.imax)).ok()) << k.name;
      const std::string before = c.ValueString(k);
      Status s = c.Set(k.name, std::to_string(k.imin - 1));
      EXPECT_FALSE(s.ok()) << k.name;
      EXPECT_NE(s.message().find("config key '" + k.name + "'"), std::string::npos) << s.message();
      EXPECT_NE(s.message().find(k.RangeText()), std::string::npos) << s.message();
      if (k.imax < std::numeric_limits<int64_t>::max()) {
        EXPECT_FALSE(c.Set(k.name, std::to_string(k.imax + 1)).ok()) << k.name;
        EXPECT_FALSE(c.SetJson(k.name, nlohmann::json(k.imax + 1)).ok()) << k.name;
      }
      EXPECT_FALSE(c.SetJson(k.name, nlohmann::json(k.imin - 1)).ok()) << k.name;
      // Past int64: an error naming the range, not a clamp.
      s = c.Set(k.name, "99999999999999999999");
      EXPECT_NE(s.message().find("out of range " + k.RangeText()), std::string::npos) << s.message();
      EXPECT_FALSE(c.SetJson(k.name, nlohmann::json::parse("18446744073709551615")).ok()) << k.name;
      EXPECT_FALSE(c.SetJson(k.name, nlohmann::json(1e300)).ok()) << k.name;
      EXPECT_EQ(c.ValueString(k), before) << k.name << ": changed by a rejected value";
    } else {
      EXPECT_TRUE(c.Set(k.name, fmt::format("{}", k.dmin)).ok()) << k.name;
      EXPECT_TRUE(c.Set(k.name, fmt::format("{}", k.dmax)).ok()) << k.name;
      const double below = k.dmin == 0 ? -1e-9 : k.dmin - std::fabs(k.dmin) * 0.5;
      Status s = c.Set(k.name, fmt::format("{}", below));
      EXPECT_FALSE(s.ok()) << k.name << " accepted " << below;
      EXPECT_NE(s.message().find(k.RangeText()), std::string::npos) << s.message();
      EXPECT_FALSE(c.Set(k.name, fmt::format("{}", k.dmax * 1.5 + 1)).ok()) << k.name;
      EXPECT_FALSE(c.SetJson(k.name, nlohmann::json(k.dmax * 1.5 + 1)).ok()) << k.name;
      for (const char* bad : {"nan", "-nan", "inf", "-inf", "1e999", "", " 1", "1x"})
        EXPECT_FALSE(c.Set(k.name, bad).ok()) << k.name << " accepted '" << bad << "'";
    }
  }
}

TEST(Config, ExamplesOfTheIssue) {
  Config c;
  EXPECT_NE(c.Set("gen_lines", "-5").message().find("value -5 out of range [0, "),
            std::string::npos);
  Status s = c.Set("gen_lines", "99999999999999999999");
  EXPECT_NE(s.message().find("config key 'gen_lines': value 99999999999999999999 out of range [0, "
                             "1000000000000]"),
            std::string::npos)
      << s.message();
  EXPECT_FALSE(c.Set("gen_temp", "-1").ok());
  EXPECT_NE(c.Set("gen_temp", "nan").message().find("not a finite number"), std::string::npos);
  EXPECT_FALSE(c.Set("gen_temp", "inf").ok());
  EXPECT_FALSE(c.Set("predict_batch_size", "0").ok());
  EXPECT_FALSE(c.Set("max_invalid", "-1").ok());
  EXPECT_FALSE(c.Set("gen_chars", "-1").ok());
  EXPECT_NE(c.Set("seed", "-1").message().find("out of range [0, 9223372036854775807]"),
            std::string::npos);
  EXPECT_TRUE(c.Set("seed", "9223372036854775807").ok());
  EXPECT_EQ(c.seed, std::numeric_limits<int64_t>::max());
  // An int key never wraps: 2^32 + 5 is not 5.
  EXPECT_FALSE(c.Set("epochs", "4294967301").ok());
  EXPECT_FALSE(c.SetJson("epochs", nlohmann::json(int64_t(4294967301))).ok());
  EXPECT_EQ(c.epochs, 100);
  EXPECT_FALSE(c.SetJson("epochs", nlohmann::json(5.5)).ok());
  EXPECT_TRUE(c.SetJson("epochs", nlohmann::json(5.0)).ok());
  EXPECT_EQ(c.epochs, 5);
}

TEST(Config, FieldDelimiterAndStringsCheckedWhenParsed) {
  for (const char* bad : {"\n", "\r", "\"", "\xc3\xa9", ";;", "\x01\x02"}) {
    Config c;
    Status s = c.Set("field_delimiter", bad);
    EXPECT_FALSE(s.ok()) << "flag accepted " << bad;
    EXPECT_NE(s.message().find("config key 'field_delimiter'"), std::string::npos) << s.message();
    Config d;
    EXPECT_FALSE(d.MergeJson(nlohmann::json{{"field_delimiter", bad}}, "p.json").ok()) << bad;
  }
  for (const char* good : {",", ";", "|", "tab", "\\t", "\t", ""}) {
    Config c;
    EXPECT_TRUE(c.Set("field_delimiter", good).ok()) << good;
  }
  Config c;
  EXPECT_FALSE(c.Set("gpu_memory_limit", "lots").ok());
  EXPECT_FALSE(c.Set("gpu_memory_limit", "200%").ok());
  EXPECT_TRUE(c.Set("gpu_memory_limit", "4GiB").ok());
  EXPECT_FALSE(c.Set("field_delimiter_token", "").ok());
  EXPECT_FALSE(c.Set("device", "tpu").ok());
  // Validate() sees values assigned directly too (e.g. by code, not by Set).
  Config v;
  v.field_delimiter = "\n";
  EXPECT_FALSE(v.Validate().ok());
  v.field_delimiter = ",";
  v.gen_temp = std::nan("");
  EXPECT_FALSE(v.Validate().ok());
  v.gen_temp = 1;
  v.predict_batch_size = 0;
  EXPECT_NE(v.Validate().message().find("predict_batch_size"), std::string::npos);
}

TEST(Config, FieldTypesCheckedWhenParsed) {
  Config c;
  EXPECT_TRUE(c.Set("field_types", "a=integer;b=datetime:%Y-%m-%d;c=text").ok());
  for (const char* bad : {"a=bogus", "a=integer:%Y", "a=datetime:%Q", "a", "=integer"}) {
    Status s = c.Set("field_types", bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("field_types"), std::string::npos) << s.message();
  }
  EXPECT_FALSE(c.SetJson("field_types", nlohmann::json{{"a", "bogus"}}).ok());
  EXPECT_TRUE(c.SetJson("field_types", nlohmann::json{{"a", "categorical"}}).ok());
}

}  // namespace
}  // namespace ds
