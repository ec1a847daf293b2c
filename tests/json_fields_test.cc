// JSON declared once per struct (util/json_fields.h): the model metadata,
// the generation progress file and the tabular spec each round-trip through
// their one table, every key they write is read back (a key dropped from a
// reader shows up here), and the model file's safety rules hold: strict
// types, required keys, unknown keys ignored, dp keys only with dp.
#include "util/json_fields.h"

#include <gtest/gtest.h>

#include "generate/resume.h"
#include "model/model_dir.h"
#include "tabular/plan.h"

namespace ds {
namespace {

using Json = nlohmann::json;

ModelMeta FullMeta() {
  ModelMeta m;
  m.datasynth_version = "9.9";
  m.spec.vocab_size = 77;
  m.spec.embedding_dim = 8;
  m.spec.rnn_units = 16;
  m.spec.num_layers = 2;
  m.spec.dropout_rate = 0.25f;
  m.spec.architecture = Architecture::kGru;
  m.header = {"a", "b"};
  m.delimiter = ';';
  m.input_path = "in.csv";
  m.input_file = FileIdentity{1, 2, 3, "/abs/in.csv"};
  m.records = 10;
  m.tokens = 200;
  m.epochs_run = 4;
  m.best_epoch = 3;
  m.best_metric = 0.5;
  m.train_seconds = 1.5;
  m.stop_reason = "epochs";
  m.device = "cuda";
  m.dp = true;
  m.epsilon = 2.5;
  m.delta = 1e-5;
  m.dp_unit = "record";
  m.weights_file = "weights-e0003.bin";
  m.weights_crc = 12345;
  return m;
}

TEST(JsonFields, ModelMetaRoundTripsAndReadsEveryKey) {
  const ModelMeta m = FullMeta();
  const Json j = m.ToJson();
  auto back = ModelMeta::FromJson(j, "mp.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToJson(), j);
  EXPECT_EQ(back->input_file->path, "/abs/in.csv");
  EXPECT_EQ(back->spec.architecture, Architecture::kGru);
  EXPECT_EQ(back->epsilon, 2.5);
  // Every key written is read: changing its value changes what is read back
  // (or is refused).
  for (auto it = j.begin(); it != j.end(); ++it) {
    Json k = j;
    k[it.key()] = Json{{"not", Json::array({1})}};
    auto r = ModelMeta::FromJson(k, "mp.json");
    ASSERT_FALSE(r.ok()) << it.key() << " is written but not read";
    EXPECT_EQ(r.status().code(), Code::kCorrupt);
    EXPECT_NE(r.status().message().find("mp.json"), std::string::npos);
  }
  // Required keys, by name.
  for (const char* key :
       {"format_version", "network", "header", "delimiter", "weights_crc32", "epsilon", "delta"}) {
    Json k = j;
    k.erase(key);
    auto r = ModelMeta::FromJson(k, "mp.json");
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().message();
  }
  // Optional keys take the defaults; unknown keys are ignored.
  Json k = j;
  for (const char* key : {"records", "device", "weights_file", "input_file", "dp_unit"})
    k.erase(key);
  k["some_future_key"] = 1;
  auto r = ModelMeta::FromJson(k, "mp.json");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->records, 0);
  EXPECT_EQ(r->device, "cpu");
  EXPECT_EQ(r->weights_file, "weights.bin");
  EXPECT_FALSE(r->input_file.has_value());
  // Strict types inside the network block too.
  k = j;
  k["network"]["rnn_units"] = "16";
  EXPECT_FALSE(ModelMeta::FromJson(k, "mp.json").ok());
}

TEST(JsonFields, DpKeysOnlyWithDp) {
  ModelMeta m = FullMeta();
  m.dp = false;
  Json j = m.ToJson();
  EXPECT_FALSE(j.contains("epsilon"));
  EXPECT_FALSE(j.contains("dp_unit"));
  EXPECT_FALSE(j.contains("input_file") && !m.input_file);
  j["epsilon"] = "ignored without dp";
  auto r = ModelMeta::FromJson(j, "mp.json");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->epsilon, 0);
  m.input_file.reset();
  EXPECT_FALSE(m.ToJson().contains("input_file"));
}

TEST(JsonFields, ProgressFileRoundTripsAndReadsEveryKey) {
  GenerationCheckpoint c;
  c.settings = {{"seed", 7}};
  c.position = {12, 3, 10, 5};
  c.bytes = 999;
  c.crc32 = 42;
  c.records = 11;
  c.tokens = 321;
  const Json j = c.ToJson();
  auto back = GenerationCheckpoint::FromJson(j, "p.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToJson(), j);
  EXPECT_EQ(back->position, c.position);
  for (auto it = j.begin(); it != j.end(); ++it) {
    Json k = j;
    k[it.key()] = Json::array({"x"});
    EXPECT_FALSE(GenerationCheckpoint::FromJson(k, "p.json").ok()) << it.key();
  }
  for (auto it = j["position"].begin(); it != j["position"].end(); ++it) {
    Json k = j;
    k["position"].erase(it.key());
    EXPECT_FALSE(GenerationCheckpoint::FromJson(k, "p.json").ok()) << it.key();
  }
}

TEST(JsonFields, TabularSpecRoundTripsAndReadsEveryKey) {
  TabularSpec s;
  s.datasynth_version = "1";
  s.header = {"a", "b", "c"};
  s.delimiter = ';';
  s.batch_delimiter = '|';
  s.rows = 5;
  s.input_path = "t.csv";
  s.input_file = FileIdentity{4, 5, 6, "/t.csv"};
  s.grouping = "association";
  s.batch_columns = 2;
  s.condition_columns = 1;
  s.seed_columns = {"a"};
  s.seed = 99;
  s.batches = {{"batch_0", {}, {"a", "b"}}, {"batch_1", {"b"}, {"c"}}};
  const Json j = s.ToJson();
  auto back = TabularSpec::FromJson(j, "tabular.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToJson(), j);
  EXPECT_EQ(back->batch_delimiter, '|');
  for (auto it = j.begin(); it != j.end(); ++it) {
    Json k = j;
    k[it.key()] = Json::array({Json::object()});
    EXPECT_FALSE(TabularSpec::FromJson(k, "tabular.json").ok()) << it.key();
  }
}

}  // namespace
}  // namespace ds
