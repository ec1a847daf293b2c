#include "train/trainer.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "backend/backend.h"
#include "generate/column_rules.h"
#include "train/dataset.h"
#include "util/fs.h"
#include "util/rng.h"

namespace ds {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

bool IsLossMetric(const std::string& m) { return m == "loss" || m == "val_loss"; }

double MetricOf(const EpochResult& r, const std::string& m) {
  if (m == "loss") return r.loss;
  if (m == "accuracy") return r.accuracy;
  if (m == "val_loss") return r.val_loss;
  return r.val_accuracy;
}

std::string HistoryCsv(const std::vector<EpochResult>& h, bool dp) {
  std::string s = dp ? "epoch,loss,accuracy,val_loss,val_accuracy,epsilon,delta,best\n"
                     : "epoch,loss,accuracy,val_loss,val_accuracy,best\n";
  auto num = [](double v) { return std::isnan(v) ? std::string() : fmt::format("{:.6g}", v); };
  for (const auto& r : h) {
    s += fmt::format("{},{},{},{},{}", r.epoch, num(r.loss), num(r.accuracy), num(r.val_loss),
                     num(r.val_accuracy));
    if (dp) s += fmt::format(",{:.6g},{:.6g}", r.epsilon, r.delta);
    s += fmt::format(",{}\n", r.best ? 1 : 0);
  }
  return s;
}

// Files a training run writes into the model directory (removed on failure).
const char* kModelFiles[] = {"model_params.json", "weights.bin",    "tokenizer.json",
                             "tokenizer.model",   "column_rules.json", "model_history.csv",
                             "checkpoint.bin",    "checkpoint.json"};

class Cleanup {
 public:
  Cleanup(std::string dir, bool created) : dir_(std::move(dir)), created_(created) {}
  ~Cleanup() {
    if (done_) return;
    if (created_) {
      (void)RemoveTree(dir_);
    } else {
      for (const char* f : kModelFiles) std::remove((dir_ + "/" + f).c_str());
      (void)RemoveTree(dir_ + "/checkpoints");
    }
  }
  void Release() { done_ = true; }

 private:
  std::string dir_;
  bool created_;
  bool done_ = false;
};

struct EvalStats {
  double loss = std::numeric_limits<double>::quiet_NaN();
  double accuracy = std::numeric_limits<double>::quiet_NaN();
};

EvalStats Validate(TrainBackend& backend, const SequenceData& data) {
  EvalStats e;
  if (data.val_batches() == 0) return e;
  StepStats sum;
  Batch batch;
  for (int64_t b = 0; b < data.val_batches(); ++b) {
    data.ValBatch(b, &batch);
    StepStats s = backend.Step(batch, /*train=*/false, 0);
    sum.loss_sum += s.loss_sum;
    sum.correct += s.correct;
    sum.count += s.count;
  }
  e.loss = sum.loss_sum / sum.count;
  e.accuracy = sum.correct / sum.count;
  return e;
}

}  // namespace

Result<TrainSummary> Train(const TrainOptions& options, TrainObserver* observer) {
  TrainObserver null_observer;
  TrainObserver& obs = observer ? *observer : null_observer;
  Config cfg = options.config;
  DS_RETURN_IF_ERROR(cfg.Validate());
  const std::string& dir = options.model_dir;
  if (dir.empty()) return DS_ERR(kInvalidArgument, "no model directory given (--model-dir)");
  if (!PathExists(options.input_path))
    return DS_ERR(kNotFound, "{}: input file does not exist", options.input_path);

  // 1. Overwrite protection.
  bool created = false;
  if (LooksLikeModel(dir)) {
    if (!cfg.overwrite)
      return DS_ERR(kAlreadyExists,
                    "{}: already holds a trained model; pass --overwrite to replace it", dir);
    // Remove model_params.json first so that a crash from here on never leaves
    // an old model description next to new weights.
    std::remove((dir + "/model_params.json").c_str());
  }
  if (!PathExists(dir)) {
    DS_RETURN_IF_ERROR(MakeDirs(dir));
    created = true;
  }
  Cleanup cleanup(dir, created);

  if (cfg.seed == 0) cfg.seed = int64_t(std::random_device{}() | 1u);
  const uint64_t seed = uint64_t(cfg.seed);
  int threads = cfg.threads > 0 ? cfg.threads : omp_get_num_procs();
  omp_set_num_threads(threads);

  // 2. Input, rules, tokenizer.
  char delim = 0;
  if (!cfg.field_delimiter.empty()) {
    DS_ASSIGN_OR_RETURN(delim, ParseDelimiter(cfg.field_delimiter));
  }
  auto t0 = Clock::now();
  DS_ASSIGN_OR_RETURN(InputData input, ReadInput(options.input_path, delim, cfg.max_lines));
  obs.OnInfo(fmt::format("read {} records{} from {}", input.records.size(),
                         delim ? fmt::format(" of {} fields", input.header.size()) : "",
                         options.input_path));

  if (delim) {
    ColumnRules rules = LearnColumnRules(input.header, input.records, RuleOptions{});
    DS_RETURN_IF_ERROR(WriteFileAtomic(dir + "/column_rules.json", rules.ToJson().dump(1) + "\n"));
  }

  TokenizerConfig tcfg;
  tcfg.type = cfg.tokenizer;
  tcfg.vocab_size = cfg.vocab_size;
  tcfg.character_coverage = cfg.character_coverage;
  tcfg.pretrain_sentence_count = cfg.pretrain_sentence_count;
  tcfg.max_line_len = cfg.max_line_len;
  tcfg.sp_model_type = cfg.sp_model_type;
  tcfg.column_markers = delim != 0 && cfg.column_markers != "off" &&
                        (cfg.column_markers == "on" || cfg.column_markers == "auto");
  tcfg.num_columns = tcfg.column_markers ? int(input.header.size()) : 0;
  tcfg.seed = seed;
  DS_ASSIGN_OR_RETURN(auto tok, TrainTokenizer(tcfg, input.records));
  DS_RETURN_IF_ERROR(tok->Save(dir));
  obs.OnInfo(fmt::format("tokenizer: {} with {} tokens{} ({:.1f}s)", tok->type(),
                         tok->vocab_size(), tcfg.column_markers ? ", column markers" : "",
                         Since(t0)));

  // 3. Sequences.
  DS_ASSIGN_OR_RETURN(SequenceData data,
                      SequenceData::Build(input, *tok, cfg.seq_length, cfg.batch_size,
                                          cfg.validation_split, seed));

  NetworkSpec spec;
  spec.vocab_size = tok->vocab_size();
  spec.embedding_dim = cfg.embedding_dim;
  spec.rnn_units = cfg.rnn_units;
  spec.num_layers = cfg.num_layers;
  spec.dropout_rate = float(cfg.dropout_rate);
  ParamLayout layout = ParamLayout::For(spec);
  DS_ASSIGN_OR_RETURN(auto backend, MakeCpuTrainBackend(spec, cfg.batch_size, cfg.seq_length));
  std::vector<float> params(layout.total);  // [layout.total]
  InitParams(spec, cfg.rnn_initializer, seed, params.data());
  backend->SetParams(params.data());
  obs.OnInfo(fmt::format(
      "network: vocab {}, embedding {}, {} x LSTM {}, {:.2f}M parameters; {} tokens, {} training "
      "and {} validation batches of {} x {}; {} threads",
      spec.vocab_size, spec.embedding_dim, spec.num_layers, spec.rnn_units,
      double(layout.total) / 1e6, data.tokens(), data.train_batches(), data.val_batches(),
      cfg.batch_size, cfg.seq_length, threads));

  OptimizerConfig opt;
  opt.name = cfg.optimizer;
  opt.learning_rate = float(cfg.learning_rate);

  std::string metric = cfg.best_model_metric;
  if (data.val_batches() == 0 && metric.rfind("val_", 0) == 0) metric = metric.substr(4);
  const bool lower_better = IsLossMetric(metric);

  TrainSummary summary;
  summary.untrained_val_loss = Validate(*backend, data).loss;
  if (std::isnan(summary.untrained_val_loss)) {
    // No validation: untrained loss on the first training batch.
    Batch b;
    data.TrainBatch(data.EpochOrder(0, cfg.buffer_size), 0, &b);
    StepStats s = backend->Step(b, false, 0);
    summary.untrained_val_loss = s.loss_sum / s.count;
  }

  double best = lower_better ? std::numeric_limits<double>::infinity()
                             : -std::numeric_limits<double>::infinity();
  double best_for_patience = best;
  int wait = 0;
  int64_t global_step = 0;
  const int64_t steps = data.train_batches();
  const double tokens_per_step = double(cfg.batch_size) * cfg.seq_length;
  auto train_start = Clock::now();
  std::string stop_reason = "epochs";
  std::vector<float> best_params;
  Batch batch;
  double train_compute_seconds = 0;
  int64_t trained_tokens = 0;

  for (int epoch = 1; epoch <= cfg.epochs; ++epoch) {
    auto e0 = Clock::now();
    std::vector<int64_t> order = data.EpochOrder(epoch, cfg.buffer_size);
    StepStats sum;
    bool time_up = false;
    for (int64_t b = 0; b < steps; ++b) {
      data.TrainBatch(order, b, &batch);
      uint64_t dropout_seed = seed ^ (0x9e3779b97f4a7c15ull * uint64_t(global_step + 1));
      StepStats s = backend->Step(batch, /*train=*/true, dropout_seed);
      backend->ApplyOptimizer(opt, ++global_step);
      sum.loss_sum += s.loss_sum;
      sum.correct += s.correct;
      sum.count += s.count;
      trained_tokens += int64_t(tokens_per_step);
      if (!std::isfinite(s.loss_sum))
        return DS_ERR(kInternal, "training diverged at epoch {} step {} (loss is not finite); "
                                 "lower learning_rate", epoch, b + 1);
      double elapsed = Since(e0);
      TrainProgress p;
      p.epoch = epoch;
      p.epochs = cfg.epochs;
      p.step = b + 1;
      p.steps = steps;
      p.loss = sum.loss_sum / sum.count;
      p.tokens_per_s = double(b + 1) * tokens_per_step / elapsed;
      double per_step = elapsed / double(b + 1);
      p.eta_seconds = per_step * double(steps - b - 1 + int64_t(cfg.epochs - epoch) * steps);
      obs.OnProgress(p);
      if (cfg.max_training_time_seconds > 0 && Since(train_start) > cfg.max_training_time_seconds) {
        time_up = true;
        break;
      }
    }
    train_compute_seconds += Since(e0);
    EpochResult r;
    r.epoch = epoch;
    r.loss = sum.loss_sum / sum.count;
    r.accuracy = sum.correct / sum.count;
    EvalStats v = Validate(*backend, data);
    r.val_loss = v.loss;
    r.val_accuracy = v.accuracy;
    r.seconds = Since(e0);
    r.tokens_per_s = sum.count / r.seconds;
    double m = MetricOf(r, metric);
    bool improved = lower_better ? m < best : m > best;
    if (improved || !cfg.save_best_model) {
      best = improved ? m : best;
      r.best = true;
      for (auto& h : summary.history) h.best = false;
      backend->GetParams(params.data());
      best_params = params;
      summary.meta.best_epoch = epoch;
      summary.meta.best_metric = m;
      ParamLayout l = layout;
      DS_RETURN_IF_ERROR(WriteTensorFile(dir + "/weights.bin", {{"params", best_params.data(), l.total}}));
    }
    if (cfg.save_all_checkpoints) {
      backend->GetParams(params.data());
      DS_RETURN_IF_ERROR(MakeDirs(dir + "/checkpoints"));
      DS_RETURN_IF_ERROR(WriteTensorFile(fmt::format("{}/checkpoints/epoch_{:04d}.bin", dir, epoch),
                                         {{"params", params.data(), layout.total}}));
    }
    summary.history.push_back(r);
    DS_RETURN_IF_ERROR(WriteFileAtomic(dir + "/model_history.csv", HistoryCsv(summary.history, false)));
    obs.OnEpoch(r);
    if (time_up) {
      stop_reason = "time_limit";
      break;
    }
    bool patience_improved = lower_better ? m < best_for_patience - cfg.early_stopping_min_delta
                                          : m > best_for_patience + cfg.early_stopping_min_delta;
    if (patience_improved) {
      best_for_patience = m;
      wait = 0;
    } else if (cfg.early_stopping && ++wait >= cfg.early_stopping_patience) {
      stop_reason = "early_stopping";
      break;
    }
  }

  // 5. Final files; model_params.json last.
  summary.seconds = Since(t0);
  summary.tokens_per_s = double(trained_tokens) / train_compute_seconds;
  ModelMeta& meta = summary.meta;
  meta.datasynth_version = DS_VERSION;
  meta.spec = spec;
  meta.header = input.header;
  meta.delimiter = delim;
  meta.input_path = options.input_path;
  meta.records = int64_t(input.records.size());
  meta.tokens = data.tokens();
  meta.epochs_run = int(summary.history.size());
  meta.train_seconds = summary.seconds;
  meta.stop_reason = stop_reason;
  meta.device = backend->name();
  meta.weights_crc = Crc32(best_params.data(), best_params.size() * sizeof(float));
  DS_RETURN_IF_ERROR(WriteModelParams(dir, cfg, meta));
  cleanup.Release();
  return summary;
}

}  // namespace ds
