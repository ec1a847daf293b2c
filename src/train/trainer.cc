#include "train/trainer.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "backend/backend.h"
#include "generate/column_rules.h"
#include "privacy/dp_config.h"
#include "privacy/rdp_accountant.h"
#include "privacy/secure_noise.h"
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

// Inverse of the standard normal CDF by bisection (for Bernoulli sampling
// from secure Gaussian draws: P(z < Phi^-1(q)) = q).
double NormalQuantile(double q) {
  double lo = -40, hi = 40;
  for (int i = 0; i < 200; ++i) {
    double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < q ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// State of a DP-SGD run (see the algorithm and docs/privacy.md).
struct DpRun {
  double q = 0;          // sampling rate batch_size / n
  double sigma = 0;      // noise multiplier
  double clip = 0;       // L2 clip per record
  double delta = 0;
  int64_t steps_per_epoch = 0;
  int64_t max_steps = 0;  // budget cap (target epsilon)
  double threshold = 0;   // Phi^-1(q)
  std::unique_ptr<SecureGaussian> noise;
  RdpAccountant accountant;
};

// One DP-SGD step: Poisson-sample records, per-record clipped gradient sum
// (in backend chunks of at most batch_size records), + N(0, (sigma C)^2),
// divided by the expected batch size, left in the backend's grads.
StepStats DpStep(TrainBackend& backend, const RecordData& recs, DpRun& dp, const Config& cfg,
                 uint64_t dropout_seed, std::vector<float>* acc /*[P]*/,
                 std::vector<float>* chunk /*[P]*/, std::vector<double>* z /*[records]*/) {
  const size_t P = backend.layout().total;
  acc->assign(P, 0.0f);
  chunk->resize(P);
  // Poisson sampling from the secure generator: record r joins when z_r < Phi^-1(q).
  z->resize(size_t(recs.records()));
  dp.noise->FillDouble(z->data(), z->size(), 1.0);
  std::vector<int64_t> ids;
  for (int64_t r = 0; r < recs.records(); ++r)
    if ((*z)[size_t(r)] < dp.threshold) ids.push_back(r);
  StepStats total;
  PerExampleClip clip;
  clip.l2_norm_clip = float(dp.clip);
  Batch batch;
  for (size_t start = 0; start < ids.size(); start += size_t(cfg.batch_size)) {
    int n = int(std::min(ids.size() - start, size_t(cfg.batch_size)));
    recs.FillBatch(ids.data() + start, n, &batch);
    StepStats s = backend.Step(batch, /*train=*/true, dropout_seed + start, &clip);
    total.loss_sum += s.loss_sum;
    total.correct += s.correct;
    total.count += s.count;
    backend.GetGrads(chunk->data());
    for (size_t i = 0; i < P; ++i) (*acc)[i] += (*chunk)[i];
  }
  dp.noise->Add(acc->data(), P, dp.sigma * dp.clip);
  const float inv = float(1.0 / (dp.q * double(recs.records())));
  for (size_t i = 0; i < P; ++i) (*acc)[i] *= inv;
  backend.SetGrads(acc->data());
  return total;
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
    RuleOptions ropts;
    if (cfg.dp && !cfg.dp_store_value_rules) ropts.store_values = false;
    ColumnRules rules = LearnColumnRules(input.header, input.records, ropts);
    DS_RETURN_IF_ERROR(WriteFileAtomic(dir + "/column_rules.json", rules.ToJson().dump(1) + "\n"));
  }

  if (cfg.dp) {
    if (cfg.tokenizer == "sentencepiece" && cfg.IsExplicit("tokenizer"))
      return DS_ERR(kInvalidArgument,
                    "--dp with tokenizer 'sentencepiece': a SentencePiece vocabulary trained on the "
                    "private records would itself reveal rare substrings of them (names, IDs) "
                    "outside the privacy guarantee; use the char tokenizer (the default under --dp)");
    if (cfg.tokenizer != "char") obs.OnInfo("dp: using the char tokenizer (a learned vocabulary would leak)");
    cfg.tokenizer = "char";
    if (cfg.validation_split) obs.OnInfo("dp: no validation split; the last epoch's weights are kept");
    cfg.validation_split = false;
    cfg.early_stopping = false;
    cfg.save_best_model = false;
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

  // 3. Sequences (DP: one example per record).
  SequenceData data;
  RecordData recs;
  DpRun dp;
  int max_batch = cfg.batch_size, max_steps = cfg.seq_length;
  if (cfg.dp) {
    int cap = std::max(cfg.seq_length, 4 * cfg.seq_length);
    DS_ASSIGN_OR_RETURN(recs, RecordData::Build(input, *tok, cap));
    if (recs.records() < int64_t(cfg.batch_size))
      return DS_ERR(kInvalidInput, "{}: too few records for DP training: {} records, batch_size {} "
                    "needs more records than the batch (the sampling rate is batch_size / records)",
                    options.input_path, recs.records(), cfg.batch_size);
    if (recs.truncated() > 0)
      obs.OnInfo(fmt::format("dp: {} records longer than {} tokens were truncated", recs.truncated(), cap));
    DpSettings ds_settings;
    ds_settings.dp = true;
    ds_settings.dp_noise_multiplier = cfg.dp_noise_multiplier;
    ds_settings.dp_l2_norm_clip = cfg.dp_l2_norm_clip;
    ds_settings.dp_target_epsilon = cfg.dp_target_epsilon;
    ds_settings.dp_delta = cfg.dp_delta;
    DS_ASSIGN_OR_RETURN(DpPlan plan, PlanDp(ds_settings, recs.records(), cfg.batch_size, cfg.epochs));
    dp.q = plan.sampling_rate;
    dp.sigma = plan.noise_multiplier;
    dp.clip = plan.l2_norm_clip;
    dp.delta = plan.delta;
    dp.steps_per_epoch = (recs.records() + cfg.batch_size - 1) / cfg.batch_size;
    dp.max_steps = plan.steps;
    if (cfg.dp_target_epsilon > 0) {
      dp.max_steps = std::min(plan.steps, MaxStepsWithinBudget(cfg.dp_target_epsilon, dp.q,
                                                               dp.sigma, dp.delta));
      cfg.dp_noise_multiplier = dp.sigma;
    }
    obs.OnInfo(DescribeDpPlan(plan));
    dp.threshold = NormalQuantile(dp.q);
    dp.noise = std::make_unique<SecureGaussian>(cfg.dp_deterministic_noise
                                                    ? SecureGaussian::Deterministic(seed)
                                                    : SecureGaussian::FromOsEntropy());
    // Poisson batches exceed batch_size; the backend processes them in chunks.
    max_batch = cfg.batch_size;
    max_steps = recs.max_steps();
  } else {
    DS_ASSIGN_OR_RETURN(data, SequenceData::Build(input, *tok, cfg.seq_length, cfg.batch_size,
                                                  cfg.validation_split, seed));
  }

  NetworkSpec spec;
  spec.vocab_size = tok->vocab_size();
  spec.embedding_dim = cfg.embedding_dim;
  spec.rnn_units = cfg.rnn_units;
  spec.num_layers = cfg.num_layers;
  spec.dropout_rate = float(cfg.dropout_rate);
  ParamLayout layout = ParamLayout::For(spec);
  DS_ASSIGN_OR_RETURN(auto backend, MakeCpuTrainBackend(spec, max_batch, max_steps));
  std::vector<float> params(layout.total);  // [layout.total]
  InitParams(spec, cfg.rnn_initializer, seed, params.data());
  backend->SetParams(params.data());
  obs.OnInfo(fmt::format(
      "network: vocab {}, embedding {}, {} x LSTM {}, {:.2f}M parameters; {} tokens, {} training "
      "and {} validation batches of {} x {}; {} threads",
      spec.vocab_size, spec.embedding_dim, spec.num_layers, spec.rnn_units,
      double(layout.total) / 1e6, cfg.dp ? recs.tokens() : data.tokens(),
      cfg.dp ? dp.steps_per_epoch : data.train_batches(), data.val_batches(), cfg.batch_size,
      cfg.dp ? max_steps : cfg.seq_length, threads));

  OptimizerConfig opt;
  opt.name = cfg.optimizer;
  opt.learning_rate = float(cfg.learning_rate);

  std::string metric = cfg.best_model_metric;
  if (data.val_batches() == 0 && metric.rfind("val_", 0) == 0) metric = metric.substr(4);
  const bool lower_better = IsLossMetric(metric);

  TrainSummary summary;
  summary.untrained_val_loss = Validate(*backend, data).loss;
  if (cfg.dp) {
    std::vector<int64_t> first(size_t(std::min<int64_t>(cfg.batch_size, recs.records())));
    for (size_t i = 0; i < first.size(); ++i) first[i] = int64_t(i);
    Batch b;
    recs.FillBatch(first.data(), int(first.size()), &b);
    StepStats s = backend->Step(b, false, 0);
    summary.untrained_val_loss = s.loss_sum / s.count;
  } else if (std::isnan(summary.untrained_val_loss)) {
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
  std::vector<float> dp_grads, dp_chunk_grads;  // [layout.total] each
  std::vector<double> dp_z;                     // [records]
  int64_t trained_tokens = 0;

  for (int epoch = 1; epoch <= cfg.epochs; ++epoch) {
    auto e0 = Clock::now();
    std::vector<int64_t> order;
    if (!cfg.dp) order = data.EpochOrder(epoch, cfg.buffer_size);
    StepStats sum;
    bool time_up = false, budget_spent = false;
    const int64_t epoch_steps = cfg.dp ? dp.steps_per_epoch : steps;
    for (int64_t b = 0; b < epoch_steps; ++b) {
      uint64_t dropout_seed = seed ^ (0x9e3779b97f4a7c15ull * uint64_t(global_step + 1));
      StepStats s;
      if (cfg.dp) {
        if (global_step >= dp.max_steps) {
          budget_spent = true;
          break;
        }
        s = DpStep(*backend, recs, dp, cfg, dropout_seed, &dp_grads, &dp_chunk_grads, &dp_z);
        dp.accountant.AddSteps(dp.q, dp.sigma, 1);
      } else {
        data.TrainBatch(order, b, &batch);
        s = backend->Step(batch, /*train=*/true, dropout_seed);
      }
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
      p.steps = epoch_steps;
      p.loss = sum.loss_sum / sum.count;
      p.tokens_per_s = double(b + 1) * tokens_per_step / elapsed;
      double per_step = elapsed / double(b + 1);
      p.eta_seconds =
          per_step * double(epoch_steps - b - 1 + int64_t(cfg.epochs - epoch) * epoch_steps);
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
    if (cfg.dp) {
      r.delta = dp.delta;
      r.epsilon = dp.accountant.GetEpsilon(dp.delta).epsilon;
    }
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
    DS_RETURN_IF_ERROR(WriteFileAtomic(dir + "/model_history.csv", HistoryCsv(summary.history, cfg.dp)));
    obs.OnEpoch(r);
    if (time_up) {
      stop_reason = "time_limit";
      break;
    }
    if (budget_spent || (cfg.dp && global_step >= dp.max_steps && epoch < cfg.epochs)) {
      stop_reason = "privacy_budget";
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
  if (cfg.dp) {
    meta.dp = true;
    DpResult final_eps = dp.accountant.GetEpsilon(dp.delta);
    meta.epsilon = final_eps.epsilon;
    meta.delta = dp.delta;
    meta.dp_unit = fmt::format(
        "one record (one CSV row / text line): example-level DP-SGD, Poisson sampling q={:.4g}, "
        "noise multiplier {:.4g}, clip {:.4g}, {} steps; covers the weights, not the character set "
        "or the header",
        dp.q, dp.sigma, dp.clip, global_step);
  }
  meta.weights_crc = Crc32(best_params.data(), best_params.size() * sizeof(float));
  DS_RETURN_IF_ERROR(WriteModelParams(dir, cfg, meta));
  cleanup.Release();
  return summary;
}

}  // namespace ds
