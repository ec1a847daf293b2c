// Tests for Train()'s cancellation and time budget (train/trainer.h), in
// process and without signals: the flag the CLI sets from SIGINT / SIGTERM is
// set here from the observer. tests/cli_signal_test.sh and
// tests/cli_time_budget_test.sh test the same through the CLI with real
// signals and wall-clock measurements.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <string>

#include "model/model_dir.h"
#include "train/trainer.h"
#include "util/fs.h"

namespace ds {
namespace {

class TempDir {
 public:
  TempDir() {
    char t[] = "/tmp/train_cancel_test_XXXXXX";
    path_ = ::mkdtemp(t);
  }
  ~TempDir() { (void)RemoveTree(path_); }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// 600 records of two related fields.
std::string WriteTable(const TempDir& tmp) {
  std::string text = "color,size\n";
  const char* colors[] = {"red", "green", "blue"};
  for (int i = 0; i < 600; ++i)
    text += std::string(colors[i % 3]) + "," + std::to_string((i % 3) * 10 + i % 7) + "\n";
  const std::string path = tmp / "t.csv";
  EXPECT_TRUE(WriteFileAtomic(path, text).ok());
  return path;
}

TrainOptions Options(const std::string& input, const std::string& dir, int epochs) {
  TrainOptions o;
  for (auto [k, v] : {std::pair{"field_delimiter", ","}, {"tokenizer", "char"},
                      {"embedding_dim", "8"}, {"rnn_units", "16"}, {"batch_size", "8"},
                      {"seq_length", "16"}, {"seed", "7"}, {"threads", "1"},
                      {"early_stopping", "false"}})
    EXPECT_TRUE(o.config.Set(k, v).ok()) << k;
  o.config.epochs = epochs;
  o.input_path = input;
  o.model_dir = dir;
  return o;
}

// Sets the flag when an epoch (or a step of it) is reached.
class CancelAt : public TrainObserver {
 public:
  CancelAt(std::atomic<bool>* flag, int epoch, int64_t step) : flag_(flag), epoch_(epoch), step_(step) {}
  void OnProgress(const TrainProgress& p) override {
    if (p.epoch == epoch_ && p.step >= step_) *flag_ = true;
  }
  void OnInfo(const std::string& m) override { infos += m + "\n"; }
  std::string infos;

 private:
  std::atomic<bool>* flag_;
  int epoch_;
  int64_t step_;
};

int HistoryRows(const std::string& dir) {
  Result<std::string> h = ReadFile(dir + "/model_history.csv", 1 << 20);
  if (!h.ok()) return -1;
  int n = 0;
  for (char c : *h) n += c == '\n';
  return n - 1;
}

TEST(TrainCancel, AfterASaveKeepsALoadableModelThatResumes) {
  TempDir tmp;
  const std::string input = WriteTable(tmp), dir = tmp / "m";
  std::atomic<bool> cancel{false};
  TrainOptions o = Options(input, dir, 50);
  o.cancel = &cancel;
  CancelAt obs(&cancel, 2, 3);  // during epoch 2
  Result<TrainSummary> r = Train(o, &obs);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCancelled);
  EXPECT_EQ(r.status().message().rfind("interrupted; continue with --resume", 0), 0u)
      << r.status().message();
  EXPECT_EQ(HistoryRows(dir), 1);  // the unfinished epoch 2 was abandoned
  EXPECT_TRUE(LoadModel(dir).ok());
  TrainOptions again;
  again.model_dir = dir;
  again.resume = true;
  ASSERT_TRUE(again.config.Set("epochs", "3").ok());
  Result<TrainSummary> done = Train(again, nullptr);
  ASSERT_TRUE(done.ok()) << done.status().ToString(true);
  EXPECT_EQ(HistoryRows(dir), 3);
}

TEST(TrainCancel, BeforeTheFirstSaveRemovesWhatItCreated) {
  TempDir tmp;
  const std::string input = WriteTable(tmp), dir = tmp / "new/m";
  std::atomic<bool> cancel{false};
  TrainOptions o = Options(input, dir, 50);
  o.cancel = &cancel;
  CancelAt obs(&cancel, 1, 2);
  Result<TrainSummary> r = Train(o, &obs);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCancelled);
  EXPECT_NE(r.status().message().find("nothing to resume"), std::string::npos);
  EXPECT_FALSE(PathExists(dir));
  // A directory that existed stays, with the user's files.
  const std::string mine = tmp / "mine";
  ASSERT_TRUE(MakeDirs(mine).ok());
  ASSERT_TRUE(WriteFileAtomic(mine + "/notes.txt", "x").ok());
  cancel = false;
  o.model_dir = mine;
  r = Train(o, &obs);
  EXPECT_EQ(r.status().code(), Code::kCancelled);
  EXPECT_TRUE(PathExists(mine + "/notes.txt"));
  EXPECT_FALSE(PathExists(mine + "/tokenizer.json"));
  EXPECT_FALSE(PathExists(mine + "/column_rules.json"));
}

TEST(TrainBudget, CoversTheWholeCallAndValidation) {
  TempDir tmp;
  const std::string input = WriteTable(tmp), dir = tmp / "m";
  TrainOptions o = Options(input, dir, 100000);
  o.time_budget_seconds = 1.5;
  CancelAt obs(nullptr, -1, 0);
  auto t0 = std::chrono::steady_clock::now();
  Result<TrainSummary> r = Train(o, &obs);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.status().ToString(true);
  EXPECT_EQ(r->meta.stop_reason, "time_limit");
  EXPECT_LE(s, 1.5 * 1.1 + 0.2);
  EXPECT_GE(s, 1.5 * 0.5);
  EXPECT_NE(obs.infos.find("time budget: stopping"), std::string::npos) << obs.infos;
  EXPECT_FALSE(std::isnan(r->history.back().val_loss));  // the last epoch was validated
}


// One JSON form per struct: every field survives the round trip (NaN as null), so the
// tabular batch frames can no longer drop epsilon and delta.
TEST(EpochJson, RoundTripKeepsEveryField) {
  EpochResult r;
  r.epoch = 7;
  r.loss = 0.5;
  r.accuracy = 0.75;
  r.val_loss = std::nan("");
  r.val_accuracy = std::nan("");
  r.epsilon = 3.25;
  r.delta = 1e-5;
  r.best = true;
  r.seconds = 1.5;
  r.tokens_per_s = 1234;
  const nlohmann::json j = EpochToJson(r);
  EXPECT_TRUE(j.at("val_loss").is_null());
  const EpochResult b = EpochFromJson(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(b.epoch, 7);
  EXPECT_EQ(b.loss, 0.5);
  EXPECT_EQ(b.accuracy, 0.75);
  EXPECT_TRUE(std::isnan(b.val_loss) && std::isnan(b.val_accuracy));
  EXPECT_EQ(b.epsilon, 3.25);
  EXPECT_EQ(b.delta, 1e-5);
  EXPECT_TRUE(b.best);
  EXPECT_EQ(b.seconds, 1.5);
  EXPECT_EQ(b.tokens_per_s, 1234);
  nlohmann::json missing = j;
  missing.erase("delta");
  EXPECT_THROW(EpochFromJson(missing), nlohmann::json::exception);
}

}  // namespace
}  // namespace ds
