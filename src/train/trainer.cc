#include "train/trainer.h"

#include <fmt/ranges.h>
#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <random>

#include "backend/backend.h"
#include "backend/device.h"
#include "backend/device_allocator.h"
#include "backend/memory_estimate.h"
#include "backend/registry.h"
#include "dist/data_parallel.h"
#include "dist/profile.h"
#include "generate/copy_guard.h"
#include "io/csv.h"
#include "io/input.h"
#include "privacy/dp_config.h"
#include "privacy/rdp_accountant.h"
#include "privacy/secure_noise.h"
#include "schema/column_rules.h"
#include "schema/column_type.h"
#include "schema/public_schema.h"
#include "tokenize/field_tokenizer.h"
#include "train/calibrate.h"
#include "train/dataset.h"
#include "train/dp_bins.h"
#include "train/lr_schedule.h"
#include "util/fs.h"
#include "util/rng.h"

namespace ds {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kCheckpointVersion = 1;
// The field tokenizer's network defaults (ApplyFieldDefaults).
constexpr int kFieldLayers = 1, kFieldUnits = 128, kFieldEmbedding = 64;
// ... and its optimizer: Adam 0.003 reduced on plateau (docs/typed_fields.md
// "Training shape": RMSprop 0.01 at a constant rate left the marginals
// several sigma off on telco_churn).
constexpr double kFieldLearningRate = 0.003;
// Parents per column of the pair calibration: under dp (docs/privacy.md), and
// the field tokenizer's default without dp (docs/typed_fields.md "Pair
// calibration": small tables' 2-way structure, which the network misses).
constexpr int kCalibrateParents = 3;
// Under dp with a schema: the share of the marginals' release spent on the
// numeric bins (train/dp_bins.h; docs/privacy.md "Bins from a DP release").
constexpr double kDpBinsShare = 0.1;
// Under dp: the calibration's rounds (train/calibrate.h). The noisy 2-way
// targets disagree with each other, and the fit of three parent tables per
// column still fell after 4 rounds: 4 -> 14 rounds, level to +6 SQS on 8
// tables at epsilon 1 and 10 (mean +1.7) but diamonds at 10 (-0.8, inside its
// seed spread), at less than twice the calibration's time (its early rounds
// measure 1000 records; docs/privacy.md "Calibration rounds under dp").
constexpr int kDpCalibrateIterations = 14;

bool IsLossMetric(const std::string& m) { return m == "loss" || m == "val_loss"; }

double MetricOf(const EpochResult& r, const std::string& m) {
  if (m == "loss") return r.loss;
  if (m == "accuracy") return r.accuracy;
  if (m == "val_loss") return r.val_loss;
  return r.val_accuracy;
}

std::string HistoryCsv(const std::vector<EpochResult>& h, bool dp) {
  std::string s = dp ? "epoch,loss,accuracy,val_loss,val_accuracy,epsilon,delta,best,steps\n"
                     : "epoch,loss,accuracy,val_loss,val_accuracy,best,steps\n";
  auto num = [](double v) { return std::isnan(v) ? std::string() : fmt::format("{:.6g}", v); };
  for (const auto& r : h) {
    s += fmt::format("{},{},{},{},{}", r.epoch, num(r.loss), num(r.accuracy), num(r.val_loss),
                     num(r.val_accuracy));
    if (dp) s += fmt::format(",{:.6g},{:.6g}", r.epsilon, r.delta);
    s += fmt::format(",{},{}\n", r.best ? 1 : 0, r.steps);
  }
  return s;
}


// Size and CRC-32 of the input file's bytes, so that --resume refuses a
// different input.
Result<std::string> Fingerprint(const std::string& path) {
  DS_ASSIGN_OR_RETURN(auto in, InputStream::Open(path));
  uint32_t crc = 0;
  int64_t size = 0;
  std::vector<char> buf(1 << 20);
  while (true) {
    DS_ASSIGN_OR_RETURN(size_t n, in->Read(buf.data(), buf.size()));
    if (n == 0) break;
    crc = Crc32(buf.data(), n, crc);
    size += int64_t(n);
  }
  return fmt::format("{}:{:08x}", size, crc);
}

// Inverse of the standard normal CDF by bisection (Bernoulli sampling from
// secure Gaussian draws: P(z < Phi^-1(q)) = q).
double NormalQuantile(double q) {
  double lo = -40, hi = 40;
  for (int i = 0; i < 200; ++i) {
    double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < q ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// State of a DP-SGD run (docs/privacy.md).
struct DpRun {
  DpPlan plan;
  int64_t steps_per_epoch = 0;
  int64_t max_steps = 0;  // budget cap
  // Records per backend chunk: the expected Poisson batch plus 4 of its
  // standard deviations, so that a sample just above batch_size (half of them)
  // is one chunk, not two half-size ones (telco: 111 backend steps, not 150;
  // the CPU time it saves is within the noise, docs/privacy.md).
  int chunk_capacity = 0;
  double threshold = 0;   // Phi^-1(q)
  std::unique_ptr<SecureGaussian> noise;
  RdpAccountant accountant;
  std::vector<float> acc, chunk;  // [P] each
  std::vector<double> z;          // [records]
};

// Files of a model directory that a training run owns.
bool IsRunFile(const std::string& name) {
  static const char* fixed[] = {"model_params.json", "tokenizer.json", "tokenizer.model",
                                "column_rules.json", "model_history.csv", "checkpoint.json",
                                "weights.bin", kCopyGuardFile, kPairTablesFile};
  for (const char* f : fixed)
    if (name == f) return true;
  auto versioned = [&](const char* prefix) {
    return name.rfind(prefix, 0) == 0 && name.size() > 4 && name.substr(name.size() - 4) == ".bin";
  };
  return versioned("weights-e") || versioned("checkpoint-e");
}

void RemoveRunFiles(const std::string& dir, const std::vector<std::string>& keep = {}) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (!IsRunFile(name)) continue;
    bool kept = false;
    for (const auto& k : keep) kept |= (k == name);
    if (!kept) std::filesystem::remove(e.path(), ec);
  }
}

class TrainRun {
 public:
  TrainRun(const TrainOptions& o, TrainObserver& obs) : opts_(o), obs_(obs), cfg_(o.config) {}
  // The model directory did not exist before this run (LockModelDir created it).
  void SetCreatedDir() { created_dir_ = true; }

  Result<TrainSummary> Run() {
    t0_ = Clock::now();
    DS_RETURN_IF_ERROR(PrepareDirectory());
    Status s = Capture([&] { return Train(); });
    if (!s.ok()) {
      // Nothing of this run may look like a model unless a whole epoch finished.
      if (!epoch_written_) {
        if (created_dir_)
          (void)RemoveTree(opts_.model_dir);
        else if (!opts_.resume)
          RemoveRunFiles(opts_.model_dir);
      }
      if (s.code() == Code::kCancelled) return InterruptedStatus();
      return s;
    }
    return std::move(summary_);
  }

 private:
  const std::string& dir() const { return opts_.model_dir; }

  bool Cancelled() const { return opts_.cancel && opts_.cancel->load(std::memory_order_relaxed); }
  // mpirun (src/dist): rank 0's decision on every rank, so that all take the same steps.
  bool Rank0(bool v) const { return dist_ ? dist_->Decide(v) : v; }
  static Status Interrupted() { return DS_ERR(kCancelled, "interrupted"); }

  // What an interrupted run tells the user (tools/cmd_train.cc adds the command).
  Status InterruptedStatus() const {
    if (opts_.resume && !epoch_written_)
      return DS_ERR(kCancelled, "interrupted; continue with --resume (nothing changed in {})",
                    dir());
    if (epoch_written_)
      return DS_ERR(kCancelled,
                    "interrupted; continue with --resume ({} epoch{} saved in {}; the unfinished "
                    "epoch was abandoned)",
                    summary_.history.size(), summary_.history.size() == 1 ? "" : "s", dir());
    if (created_dir_)
      return DS_ERR(kCancelled,
                    "interrupted before the first epoch was saved; removed {} (nothing to resume)",
                    dir());
    return DS_ERR(kCancelled,
                  "interrupted before the first epoch was saved; removed this run's files from {} "
                  "(nothing to resume)",
                  dir());
  }

  // --- time budget (see trainer.h) ---
  // This session's budget: given, or the configured one less earlier sessions'.
  void SetBudget(const Json& resume_state) {
    if (opts_.resume)
      prior_wall_ = resume_state.value("wall_seconds", resume_state.value("seconds", 0.0));
    if (opts_.time_budget_seconds > 0)
      budget_ = opts_.time_budget_seconds;
    else if (cfg_.max_training_time_seconds > 0)
      budget_ = std::max(cfg_.max_training_time_seconds - prior_wall_, 1e-3);
  }
  double Elapsed() const { return Since(t0_); }
  // Central estimates (no margins: they would stop early on a busy machine);
  // the time-boxed validation keeps an underestimate from running over.
  // The mean step time of this session (the first, warm-up step left out when
  // there are others).
  double StepEstimate() const {
    return steps_timed_ ? step_seconds_ / double(steps_timed_) : last_step_seconds_;
  }
  double ValEstimate() const {
    return cfg_.dp ? 0 : val_batch_seconds_ * double(data_.val_batches());
  }
  // Writing an epoch's files: measured after the first one; before, a guess
  // from the bytes written (weights, checkpoint with optimizer state).
  double SaveEstimate() const {
    if (save_seconds_ > 0) return save_seconds_;
    return 0.1 + 4.0 * double(layout_.total) * sizeof(float) / 2e8;
  }
  // Whether `seconds` more work, then the epoch's validation and save (and
  // the final files, kFinishReserve), fit.
  static constexpr double kFinishReserve = 0.1;
  bool Fits(double seconds) const {
    if (budget_ <= 0) return true;  // the same on every rank: no collective
    return Rank0(Elapsed() + seconds + ValEstimate() + SaveEstimate() + kFinishReserve <= budget_);
  }
  // --- step budget: max_training_steps optimizer steps over the whole run
  // (resumed sessions continue global_step_) ---
  bool StepsLeft() const { return cfg_.max_training_steps <= 0 || global_step_ < cfg_.max_training_steps; }
  int64_t StepsRemaining(int64_t planned) const {
    return cfg_.max_training_steps > 0
               ? std::min(planned, std::max<int64_t>(cfg_.max_training_steps - global_step_, 0))
               : planned;
  }
  void ReportBudgetStop(const std::string& where) {
    obs_.OnInfo(fmt::format(
        "time budget: stopping {} at {:.1f}s of {:.4g}s{}, so that {}saving fit", where,
        Elapsed() + prior_wall_, budget_ + prior_wall_,
        prior_wall_ > 0 ? fmt::format(" (earlier sessions {:.1f}s)", prior_wall_) : "",
        cfg_.dp || data_.val_batches() == 0 ? "" : "validation and "));
  }

  Status PrepareDirectory() {
    DS_RETURN_IF_ERROR(cfg_.Validate());
    if (dir().empty()) return DS_ERR(kInvalidArgument, "no model directory given (--model-dir)");
    // A read-only or otherwise unwritable directory: fail before any work.
    if (PathExists(dir())) DS_RETURN_IF_ERROR(CheckWritable());
    bool has_model = LooksLikeModel(dir());
    bool has_checkpoint = PathExists(dir() + "/checkpoint.json");
    if (opts_.resume) {
      if (!has_checkpoint)
        return DS_ERR(kNotFound, "{}: nothing to resume (no checkpoint.json)", dir());
      return Status::Ok();
    }
    if (!InputExists(opts_.input_path))
      return DS_ERR(kNotFound, "{}: input file does not exist", opts_.input_path);
    if ((has_model || has_checkpoint) && !cfg_.overwrite)
      return has_model ? DS_ERR(kAlreadyExists,
                                "{}: already holds a trained model; pass --overwrite to replace it",
                                dir())
                       : DS_ERR(kAlreadyExists,
                                "{}: holds an interrupted training run; pass --resume to continue "
                                "it or --overwrite to start again",
                                dir());
    if (has_model || has_checkpoint) {
      // model_params.json first: from here on the directory never pairs an
      // old model description with new files.
      std::remove((dir() + "/model_params.json").c_str());
      RemoveRunFiles(dir());
    }
    if (!PathExists(dir())) {
      DS_RETURN_IF_ERROR(MakeDirs(dir()));
      created_dir_ = true;
    }
    return Status::Ok();
  }

  // Creates and removes a probe file: access(W_OK) says yes to root on a
  // directory it may not write (and says nothing about some mounts).
  Status CheckWritable() {
    std::string probe = fmt::format("{}/.datasynth-write-test.{}", dir(), ::getpid());
    int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      int e = errno;
      if (e == ENOTDIR) return DS_ERR(kIo, "{}: not a directory", dir());
      return DS_ERR(kIo, "{}: the model directory is not writable: {}", dir(), strerror(e));
    }
    ::close(fd);
    ::unlink(probe.c_str());
    return Status::Ok();
  }

  Status LoadResumeState(Json* state) {
    DS_ASSIGN_OR_RETURN(std::string text, ReadFile(dir() + "/checkpoint.json", 256 << 20));
    *state = Json::parse(text, nullptr, false);
    if (state->is_discarded() || !state->is_object())
      return DS_ERR(kCorrupt, "{}/checkpoint.json: not valid JSON", dir());
    try {
      if (state->at("version").get<int>() != kCheckpointVersion)
        return DS_ERR(kCorrupt, "{}/checkpoint.json: unsupported version", dir());
      Config stored;
      DS_RETURN_IF_ERROR(stored.MergeJson(state->at("config"), dir() + "/checkpoint.json"));
      // The stored run's settings, except what may change between sessions.
      for (const char* k : {"epochs", "max_training_time_seconds", "max_training_steps", "threads"})
        if (cfg_.IsExplicit(k)) DS_RETURN_IF_ERROR(stored.SetJson(k, cfg_.ToJson()[k]));
      cfg_ = stored;
      if (opts_.input_path.empty()) opts_.input_path = state->at("input_path").get<std::string>();
    } catch (const Json::exception& e) {
      return DS_ERR(kCorrupt, "{}/checkpoint.json: {}", dir(), e.what());
    }
    return Status::Ok();
  }

  Status Train() {
    auto t0 = Clock::now();
    dist::Timed setup_time(dist::Phase::kSetup);  // mpirun's profile (src/dist/profile.h)
    Json resume_state;
    DS_RETURN_IF_ERROR(StartRun(&resume_state));
    char delim = 0;
    DS_ASSIGN_OR_RETURN(InputData input, ReadTrainingInput(&delim));
    DS_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, MakeTokenizer(input, delim));
    obs_.OnInfo(fmt::format("tokenizer: {} with {} tokens{} ({:.1f}s)", tok->type(),
                            tok->vocab_size(), tok->column_markers() ? ", column markers" : "",
                            Since(t0)));
    if (Cancelled()) return Interrupted();

    DS_RETURN_IF_ERROR(BuildNetwork(input, *tok));
    setup_time.Stop();
    // The field default's rate from the steps an epoch (lr_schedule.h
    // FieldLearningRate); recorded in model_params.json, kept on --resume.
    if (field_lr_by_steps_) {
      cfg_.learning_rate = FieldLearningRate(kFieldLearningRate, StepsPerEpoch());
      if (cfg_.learning_rate != kFieldLearningRate)
        obs_.OnInfo(fmt::format("field tokenizer: learning_rate {:.4g} for {} steps an epoch",
                                cfg_.learning_rate, StepsPerEpoch()));
    }
    ChooseMetric();
    lr_ = LrSchedule(cfg_.lr_schedule == "plateau", cfg_.learning_rate, cfg_.lr_plateau_factor,
                     cfg_.lr_plateau_patience, cfg_.lr_min_ratio);
    summary_.untrained_val_loss = UntrainedLoss();
    if (Cancelled()) return Interrupted();

    int first_epoch = 1;
    if (opts_.resume) {
      DS_RETURN_IF_ERROR(RestoreCheckpoint(resume_state));
      first_epoch = int(summary_.history.size()) + 1;
      if (done_) {
        obs_.OnInfo(fmt::format("{}: training already finished ({}); nothing to resume", dir(),
                                stop_reason_));
        return Finish(input, delim, *tok, t0);
      }
      obs_.OnInfo(fmt::format("resuming after epoch {} (step {})", first_epoch - 1, global_step_));
    }

    return TrainEpochs(first_epoch, input, delim, *tok, t0);
  }

  // Budget, seed (rank 0's under mpirun), threads, the input's fingerprint
  // (checked against the interrupted run's on --resume).
  Status StartRun(Json* resume_state) {
    if (opts_.resume) DS_RETURN_IF_ERROR(LoadResumeState(resume_state));
    SetBudget(*resume_state);
    if (cfg_.seed == 0) cfg_.seed = int64_t(std::random_device{}() | 1u);
    DS_RETURN_IF_ERROR(dist::BroadcastValue(&cfg_.seed));  // mpirun: rank 0's seed
    seed_ = uint64_t(cfg_.seed);
    threads_ = cfg_.threads > 0 ? cfg_.threads : omp_get_num_procs();
    omp_set_num_threads(threads_);
    DS_ASSIGN_OR_RETURN(fingerprint_, Fingerprint(opts_.input_path));
    if (Cancelled()) return Interrupted();
    if (opts_.resume && resume_state->at("input_fingerprint").get<std::string>() != fingerprint_)
      return DS_ERR(kInvalidInput, "{}: differs from the input of the interrupted run in {}",
                    opts_.input_path, dir());
    return Status::Ok();
  }

  // The records (a schema conforms them), the DP and field defaults, the
  // column rules (column_rules.json).
  Result<InputData> ReadTrainingInput(char* delim) {
    if (!cfg_.field_delimiter.empty()) {
      DS_ASSIGN_OR_RETURN(*delim, ParseDelimiter(cfg_.field_delimiter));
    }
    DS_ASSIGN_OR_RETURN(InputData input, ReadInput(opts_.input_path, *delim, cfg_.max_lines));
    if (Cancelled()) return Interrupted();
    obs_.OnInfo(fmt::format("read {} records{} from {}", input.records.size(),
                            *delim ? fmt::format(" of {} fields", input.header.size()) : "",
                            opts_.input_path));
    DS_RETURN_IF_ERROR(ApplyDpPolicy());
    DS_RETURN_IF_ERROR(ApplySchema(*delim, &input));
    if (cfg_.dp && !opts_.resume) ApplyDpDefaults(int64_t(input.records.size()));
    // Delimited data defaults to typed value tokens (docs/typed_fields.md);
    // text lines keep SentencePiece, --dp keeps char (ApplyDpPolicy).
    if (*delim && !cfg_.dp && !opts_.resume && !cfg_.IsExplicit("tokenizer"))
      cfg_.tokenizer = "field";
    if (cfg_.tokenizer == "field" && !opts_.resume) ApplyFieldDefaults();
    if (*delim && !opts_.resume) {
      RuleOptions ropts;
      if (cfg_.dp && !cfg_.dp_store_value_rules) ropts.store_values = false;
      // A schema-built field tokenizer under dp: no rule is read off the data.
      ColumnRules rules = cfg_.dp && !schema_.columns.empty()
                              ? ColumnRules::FieldCountOnly(input.header)
                              : LearnColumnRules(input.header, input.records, ropts);
      DS_RETURN_IF_ERROR(
          WriteFileAtomic(dir() + "/column_rules.json", rules.ToJson().dump(1) + "\n"));
    }
    return input;
  }

  // Loaded on --resume; else trained (or built from the schema) and saved,
  // with the copy guard.
  Result<std::unique_ptr<Tokenizer>> MakeTokenizer(const InputData& input, char delim) {
    std::unique_ptr<Tokenizer> tok;
    if (opts_.resume) {
      DS_ASSIGN_OR_RETURN(tok, LoadTokenizer(dir()));
    } else {
      TokenizerConfig t;
      t.type = cfg_.tokenizer;
      t.vocab_size = cfg_.vocab_size;
      t.character_coverage = cfg_.character_coverage;
      t.pretrain_sentence_count = cfg_.pretrain_sentence_count;
      t.max_line_len = cfg_.max_line_len;
      t.sp_model_type = cfg_.sp_model_type;
      t.column_markers = delim != 0 && cfg_.column_markers != "off";
      t.num_columns = t.column_markers ? int(input.header.size()) : 0;
      t.seed = seed_;
      if (cfg_.tokenizer == "field") {
        t.header = input.header;
        t.rare_count = cfg_.field_rare_count;
        t.text_pieces = cfg_.field_text_pieces;
        DS_ASSIGN_OR_RETURN(t.field_types, ParseFieldTypes(cfg_.field_types));
        t.field_header_order = cfg_.field_order == "header";
        t.field_relations = cfg_.field_relations;
      }
      if (cfg_.tokenizer == "field" && !schema_.columns.empty()) {
        std::vector<std::vector<int64_t>> edges;
        if (cfg_.dp && cfg_.dp_bins_share > 0) {
          DS_ASSIGN_OR_RETURN(edges, DpBinEdges(input));
        }
        DS_ASSIGN_OR_RETURN(tok, FieldTokenizer::FromSchema(schema_, edges.empty() ? nullptr : &edges));
      } else {
        DS_ASSIGN_OR_RETURN(tok, TrainTokenizer(t, input.records));
      }
      DS_RETURN_IF_ERROR(tok->Save(dir()));
      DS_ASSIGN_OR_RETURN(std::string guard, WriteCopyGuard(cfg_, delim != 0, *tok, input.records,
                                                            seed_, dir()));
      if (!guard.empty()) obs_.OnInfo(guard);
    }
    return tok;
  }

  // The record shape, the sequences, the network, its backend and weights,
  // the data-parallel group.
  Status BuildNetwork(const InputData& input, const Tokenizer& tok) {
    if (tok.decodes_records())
      AdaptRecordShape(RecordTokens(input, tok), MaxRecordTokens(tok),
                       !cfg_.IsExplicit("seq_length"), !cfg_.IsExplicit("batch_size") && !cfg_.dp,
                       &cfg_.seq_length, &cfg_.batch_size);
    // Sequences (DP: one example per record).
    int max_batch = cfg_.batch_size, max_steps = cfg_.seq_length;
    if (cfg_.dp) {
      DS_RETURN_IF_ERROR(PrepareDp(input, tok));
      max_steps = recs_.max_steps();
      max_batch = dp_.chunk_capacity;
    } else {
      DS_ASSIGN_OR_RETURN(data_, SequenceData::Build(input, tok, cfg_.seq_length,
                                                     cfg_.batch_size, cfg_.validation_split, seed_));
    }

    spec_.vocab_size = tok.vocab_size();
    spec_.embedding_dim = cfg_.embedding_dim;
    spec_.rnn_units = cfg_.rnn_units;
    spec_.num_layers = cfg_.num_layers;
    spec_.dropout_rate = float(cfg_.dropout_rate);
    DS_ASSIGN_OR_RETURN(spec_.architecture, ParseArchitecture(cfg_.architecture));
    layout_ = ParamLayout::For(spec_);
    DS_ASSIGN_OR_RETURN(backend_, MakeBackend(max_batch, max_steps));
    params_.resize(layout_.total);
    InitParams(spec_, cfg_.rnn_initializer, seed_, params_.data());
    backend_->SetParams(params_.data());
    DS_RETURN_IF_ERROR(StartDataParallel());
    obs_.OnInfo(fmt::format(
        "network: vocab {}, embedding {}, {} x {} {}, {:.2f}M parameters; {} tokens, {} "
        "steps per epoch{}; {} threads, precision {}",
        spec_.vocab_size, spec_.embedding_dim, spec_.num_layers,
        ArchitectureLabel(spec_.architecture), spec_.rnn_units,
        double(layout_.total) / 1e6, cfg_.dp ? recs_.tokens() : data_.tokens(), StepsPerEpoch(),
        cfg_.dp ? "" : fmt::format(" and {} validation batches", data_.val_batches()), threads_,
        PrecisionName(backend_->precision())));

    return Status::Ok();
  }

  // The metric of the best epoch and early stopping: best_model_metric (the
  // held-out val_loss by default), the training one without validation.
  void ChooseMetric() {
    metric_ = cfg_.best_model_metric;
    if (!cfg_.dp && data_.val_batches() == 0 && metric_.rfind("val_", 0) == 0) {
      metric_ = metric_.substr(4);
      obs_.OnInfo(fmt::format("no validation batches: the best epoch and early stopping use the "
                              "training {} instead of {}", metric_, cfg_.best_model_metric));
    }
    if (cfg_.dp) metric_ = "loss";
    lower_better_ = IsLossMetric(metric_);
    best_ = best_for_patience_ = lower_better_ ? kInf : -kInf;
  }

  // The epochs from first_epoch on, then the final files.
  Status TrainEpochs(int first_epoch, const InputData& input, char delim, const Tokenizer& tok,
                     Clock::time_point t0) {
    if (cfg_.dp) ResetNoise();
    OptimizerConfig opt;
    opt.name = cfg_.optimizer;
    opt.learning_rate = float(cfg_.learning_rate);
    stop_reason_ = "epochs";
    for (int epoch = first_epoch; epoch <= cfg_.epochs; ++epoch) {
      // A fresh run trains at least one step; later epochs (and resumed runs)
      // start only when a step and the epoch's validation and save fit.
      if ((epoch > first_epoch || opts_.resume) && !Fits(StepEstimate())) {
        ReportBudgetStop(fmt::format("before epoch {}", epoch));
        stop_reason_ = "time_limit";
        break;
      }
      if (!StepsLeft()) {
        stop_reason_ = "step_limit";
        break;
      }
      EpochResult r;
      opt.learning_rate = float(lr_.lr());
      r.learning_rate = lr_.lr();
      bool time_up = false, budget_spent = false, steps_up = false;
      DS_RETURN_IF_ERROR(RunEpoch(epoch, opt, &r, &time_up, &budget_spent, &steps_up));
      r.device_memory = backend_->memory_stats();
      if (cfg_.dp && global_step_ >= dp_.max_steps) budget_spent = true;
      bool stop = false;
      if (time_up) {
        stop_reason_ = "time_limit";
        stop = true;
      } else if (steps_up) {
        stop_reason_ = "step_limit";
        stop = true;
      } else if (cfg_.dp && dp_.max_steps < dp_.plan.steps &&
                 (budget_spent || global_step_ >= dp_.max_steps)) {
        // Stopped by --dp-target-epsilon before the planned steps.
        stop_reason_ = "privacy_budget";
        stop = true;
      } else if (budget_spent) {
        stop = true;  // the planned ceil(epochs * n / batch_size) steps are done
      } else if (EarlyStop(r)) {
        stop_reason_ = "early_stopping";
        stop = true;
      }
      done_ = stop || epoch == cfg_.epochs;
      restore_best_ = false;
      if (!stop && lr_.EndEpoch(last_improved_)) {  // EarlyStop ran: the metric's verdict
        restore_best_ = cfg_.lr_plateau_restore && cfg_.save_best_model && WorseThanBest(r);
        obs_.OnInfo(fmt::format("epoch {}: {} did not improve for {} epochs; learning rate {:.4g} "
                                "-> {:.4g}",
                                epoch, metric_, cfg_.lr_plateau_patience + 1, r.learning_rate,
                                lr_.lr()));
      }
      DS_RETURN_IF_ERROR(EndEpoch(r, input, delim));
      if (const char* crash = std::getenv("DATASYNTH_TEST_EXIT_AFTER_EPOCH");
          crash && std::atoi(crash) == epoch)
        _exit(137);  // test hook: simulate kill -9 right after an epoch's files
      if (stop) break;
    }
    done_ = true;
    return Finish(input, delim, tok, t0);
  }

  // The compute device: --device auto picks CUDA when a usable GPU is there
  // (one warning line otherwise); DP training needs per-example clipping,
  // which only the CPU backend has.
  Result<std::unique_ptr<TrainBackend>> MakeBackend(int max_batch, int max_steps) {
    DS_ASSIGN_OR_RETURN(DeviceRequest req, ParseDevice(cfg_.device));
    if (cfg_.dp && req != DeviceRequest::kCpu) {
      if (req == DeviceRequest::kCuda)
        obs_.OnInfo("dp: per-record clipping runs on the CPU backend; training on the CPU");
      req = DeviceRequest::kCpu;
    }
    std::string warning;
    DS_ASSIGN_OR_RETURN(DeviceKind kind, ResolveDevice(req, &warning));
    if (!warning.empty()) obs_.OnInfo("warning: " + warning);
    BackendOptions o;
    DS_ASSIGN_OR_RETURN(o.precision, ResolvePrecision(cfg_.precision, kind, &warning));
    if (!warning.empty()) obs_.OnInfo(warning);
    if (kind == DeviceKind::kCpu) {
      // Shapes that cannot fit: a clear error now, not bad_alloc or the OOM
      // killer later (backend/memory_estimate.h).
      const int64_t rows = int64_t(max_batch) * max_steps;
      if (rows > std::numeric_limits<int>::max())
        return DS_ERR(kResourceExhausted,
                      "batch_size {} x {} steps = {} rows per batch, more than the CPU backend's "
                      "limit of {}; reduce batch_size or seq_length",
                      max_batch, max_steps, rows, std::numeric_limits<int>::max());
      const uint64_t need = EstimateCpuTrainBytes(spec_, max_batch, max_steps, threads_);
      DS_RETURN_IF_ERROR(CheckMemory(
          need, need, AvailableHostMemory(),
          fmt::format("training this network (vocabulary {}, embedding {}, {} x {} {}, batch "
                      "{} x {} steps)",
                      spec_.vocab_size, spec_.embedding_dim, spec_.num_layers,
                      ArchitectureLabel(spec_.architecture), spec_.rnn_units,
                      max_batch, max_steps),
          "reduce batch_size, seq_length, rnn_units, embedding_dim or vocab_size"));
      return MakeTrainBackend(kind, spec_, max_batch, max_steps, o);
    }
    o.memory.preallocate = cfg_.gpu_memory == "preallocate";
    if (!cfg_.gpu_memory_limit.empty()) {
      DS_ASSIGN_OR_RETURN(DeviceMemory mem, CudaMemory(o.device));
      DS_ASSIGN_OR_RETURN(o.memory.limit_bytes, ParseMemoryLimit(cfg_.gpu_memory_limit, mem.total_bytes));
    }
    return MakeTrainBackend(kind, spec_, max_batch, max_steps, o);
  }

  // mpirun with several ranks: every rank must have built the same run.
  Status StartDataParallel() {
    dist_ = dist::DataParallel::Make(cfg_.mpi_shards, layout_.total);
    if (!dist_) return Status::Ok();
    DS_RETURN_IF_ERROR(dist::CheckSame(
        {int64_t(layout_.total), StepsPerEpoch(), spec_.vocab_size, cfg_.batch_size,
         int64_t(Crc32(params_.data(), params_.size() * sizeof(float)))},
        "the network, the batches or the initial weights"));
    obs_.OnInfo(fmt::format("mpi: {} ranks; each global batch of {} in {} shards (mpi_shards)",
                            dist::Size(), cfg_.batch_size, cfg_.mpi_shards));
    return Status::Ok();
  }

  int64_t StepsPerEpoch() const { return cfg_.dp ? dp_.steps_per_epoch : data_.train_batches(); }

  Status ApplyDpPolicy() {
    if (!cfg_.dp) return Status::Ok();
    // With a public schema the field tokenizer is built from it alone.
    const bool schema_field = !cfg_.schema.empty() && (cfg_.tokenizer == "field" ||
                                                        !cfg_.IsExplicit("tokenizer"));
    if (cfg_.tokenizer == "field" && cfg_.IsExplicit("tokenizer") && !schema_field)
      return DS_ERR(kInvalidArgument,
                    "--dp with tokenizer 'field': its per-column vocabularies (categories, "
                    "ranges, dates) are learned from the private records and would leak outside "
                    "the privacy guarantee; give a public schema (--schema, `datasynth "
                    "schema` writes a template) or use the char tokenizer");
    if (cfg_.tokenizer == "sentencepiece" && cfg_.IsExplicit("tokenizer"))
      return DS_ERR(kInvalidArgument,
                    "--dp with tokenizer 'sentencepiece': a SentencePiece vocabulary trained on "
                    "the private records would itself reveal rare substrings of them (names, IDs) "
                    "outside the privacy guarantee; use the char tokenizer (the default under "
                    "--dp)");
    if (cfg_.tokenizer != "char" && !schema_field)
      obs_.OnInfo("dp: using the char tokenizer (a vocabulary learned from the data would leak)");
    if (cfg_.validation_split)
      obs_.OnInfo("dp: no validation split, early stopping or best-epoch choice; the last "
                  "epoch's weights are kept");
    cfg_.tokenizer = schema_field ? "field" : "char";
    cfg_.validation_split = false;
    cfg_.early_stopping = false;
    cfg_.save_best_model = false;
    return Status::Ok();
  }

  // `schema`: loads the public schema, checks it against the header and maps
  // the records into it (schema/public_schema.h; counts only are reported).
  Status ApplySchema(char delim, InputData* input) {
    if (cfg_.schema.empty()) return Status::Ok();  // resumed runs too: the same records
    if (!delim)
      return DS_ERR(kInvalidArgument, "config key 'schema': only for delimited data (CSV)");
    DS_ASSIGN_OR_RETURN(schema_, LoadPublicSchema(cfg_.schema));
    DS_RETURN_IF_ERROR(CheckSchemaHeader(schema_, input->header));
    ConformReport rep = ConformRecords(schema_, &input->records, &input->lines);
    if (const std::string d = rep.Describe(schema_); !d.empty()) obs_.OnInfo(d);
    if (schema_.derived_epsilon > 0)  // schema/private_schema.h: basic composition
      obs_.OnInfo(fmt::format(
          "schema: derived from the data under DP (epsilon {:.4g}, delta {:.3g}); the data's "
          "total privacy loss is that plus this run's{}",
          schema_.derived_epsilon, schema_.derived_delta,
          cfg_.dp && cfg_.dp_target_epsilon > 0
              ? fmt::format(": epsilon {:.4g}", schema_.derived_epsilon + cfg_.dp_target_epsilon)
              : std::string()));
    if (input->records.empty())
      return DS_ERR(kInvalidInput, "{}: no record fits the schema {}", opts_.input_path,
                    cfg_.schema);
    return Status::Ok();
  }

  // DP-SGD's own defaults for the settings the user did not set. Each step
  // adds noise of norm ~ sigma C sqrt(P) / B to a mean clipped gradient of
  // norm <= 1, and a privacy budget allows few steps, so: larger batches (less
  // noise per step), a smaller network (fewer noisy coordinates: P 0.29M
  // instead of 1.09M) and a larger Adam step (the few steps must count). On
  // telco_churn at epsilon 10, batch 256 records with Adam 0.005 (2 x 128)
  // reached loss 2.20 and quality 23/100; these
  // reached loss 0.39 and 61/100 (docs/privacy.md).
  void ApplyDpDefaults(int64_t n) {
    std::vector<std::string> set;
    auto choose = [&](const char* key, auto* field, auto value) {
      if (cfg_.IsExplicit(key)) return;
      *field = value;
      set.push_back(fmt::format("{} {}", key, value));
    };
    choose("batch_size", &cfg_.batch_size, int(std::clamp<int64_t>(n / 10, 64, 512)));
    choose("epochs", &cfg_.epochs, 15);
    choose("rnn_units", &cfg_.rnn_units, 128);
    choose("embedding_dim", &cfg_.embedding_dim, 64);
    if (!cfg_.IsExplicit("optimizer")) {
      choose("optimizer", &cfg_.optimizer, std::string("adam"));
      choose("learning_rate", &cfg_.learning_rate, 0.02);
    }
    // A small clip: per-record gradients are mostly clipped, so the mean keeps
    // its direction while the noise (sigma x clip) shrinks; Adam does not care
    // about the scale. telco_churn at epsilon 10: clip 3 -> SQS 77.6, 1 -> 81.7,
    // 0.3 -> 86.3, 0.1 at epsilon 1 below 0.3 (docs/privacy.md).
    choose("dp_l2_norm_clip", &cfg_.dp_l2_norm_clip, 0.3);
    // Measured marginals (with a schema's field tokenizer; train/calibrate.h):
    // 2-way tables fix the relations DP-SGD learns worst (docs/privacy.md).
    choose("calibrate", &cfg_.calibrate, true);
    choose("calibrate_pairs", &cfg_.calibrate_pairs, kCalibrateParents);
    if (cfg_.dp_target_epsilon > 0)
      choose("dp_marginal_share", &cfg_.dp_marginal_share, DefaultMarginalShare(cfg_.dp_target_epsilon, n));
    // Bins at noisy quantiles instead of uniform over generous bounds
    // (train/dp_bins.h; docs/privacy.md "Bins from a DP release").
    if (cfg_.dp_target_epsilon > 0) choose("dp_bins_share", &cfg_.dp_bins_share, kDpBinsShare);
    // More calibration rounds: the noisy targets are fitted slowly (kDpCalibrateIterations).
    choose("calibrate_iterations", &cfg_.calibrate_iterations, kDpCalibrateIterations);
    if (!set.empty())
      obs_.OnInfo(fmt::format("dp: DP-SGD defaults for settings not given: {}", fmt::join(set, ", ")));
  }

  // The field tokenizer's network for the settings the user did not set
  // (docs/typed_fields.md "Training shape"). A record is a few value tokens
  // (telco: 30 instead of ~200 characters), so a much smaller network learns
  // it as well: on telco_churn 1 x LSTM 128 with embedding 64 scored SQS 92.4
  // in 27 s against 93.0 in 143 s for the reference's 2 x 256 / 256, and
  // generates ~3x faster. char and SentencePiece keep the reference defaults.
  void ApplyFieldDefaults() {
    std::vector<std::string> set;
    auto choose = [&](const char* key, auto* field, auto value) {
      if (cfg_.IsExplicit(key)) return;
      *field = value;
      set.push_back(fmt::format("{} {}", key, value));
    };
    choose("num_layers", &cfg_.num_layers, kFieldLayers);
    choose("rnn_units", &cfg_.rnn_units, kFieldUnits);
    choose("embedding_dim", &cfg_.embedding_dim, kFieldEmbedding);
    // Under dp, DP-SGD's optimizer defaults stand (ApplyDpDefaults), and no
    // plateau schedule: it would steer training by the private loss.
    if (!cfg_.IsExplicit("optimizer") && !cfg_.dp) {
      choose("optimizer", &cfg_.optimizer, std::string("adam"));
      choose("learning_rate", &cfg_.learning_rate, kFieldLearningRate);
      field_lr_by_steps_ = !cfg_.IsExplicit("learning_rate");
    }
    if (!cfg_.dp) choose("lr_schedule", &cfg_.lr_schedule, std::string("plateau"));
    // A reduction after overfitting goes back to the best weights (docs/quality.md
    // "Plateau restore": telco_churn 95.4-95.9 -> 96.5-97.1, the rest level).
    if (!cfg_.dp) choose("lr_plateau_restore", &cfg_.lr_plateau_restore, true);
    // The kept weights calibrated to the training records' 1-way and 2-way
    // first-token marginals (train/calibrate.h): on small tables the network
    // stops (early, on its held-out loss) before it learns how the columns go
    // together: sklearn's wine (142 rows) kept Pearson 0.86 as -0.10, SQS 44.6
    // -> 79.5 with it (docs/quality.md "Unseen tables"). Under dp, ApplyDpDefaults.
    if (!cfg_.dp) {
      choose("calibrate", &cfg_.calibrate, true);
      choose("calibrate_pairs", &cfg_.calibrate_pairs, kCalibrateParents);
    }
    if (!set.empty())
      obs_.OnInfo(fmt::format("field tokenizer: network defaults for settings not given: {}",
                              fmt::join(set, ", ")));
  }

  // The share of the marginals' release the bins take (train/dp_bins.h) for
  // n records and the release's sigma_m: a function of the stored config,
  // the schema and the plan, so a resumed run splits the same way.
  double BinsShare(int64_t n, double sigma_m) const {
    if (!cfg_.dp || !cfg_.calibrate || cfg_.tokenizer != "field" || schema_.columns.empty() ||
        !(cfg_.dp_target_epsilon > 0) || !(cfg_.dp_bins_share > 0) || !(sigma_m > 0))
      return 0;
    const int k = int(AdaptiveBinColumns(schema_).size());
    return DpBinsPay(n, sigma_m / std::sqrt(cfg_.dp_bins_share), k) ? cfg_.dp_bins_share : 0;
  }

  DpSettings DpSettingsFor(bool field) const {
    DpSettings s;
    s.dp = true;
    s.dp_noise_multiplier = cfg_.dp_noise_multiplier;
    s.dp_l2_norm_clip = cfg_.dp_l2_norm_clip;
    s.dp_target_epsilon = cfg_.dp_target_epsilon;
    s.dp_delta = cfg_.dp_delta;
    if (cfg_.calibrate && field) s.marginal_share = cfg_.dp_marginal_share;
    return s;
  }

  // The numeric bins from their share of the marginals' release, before the
  // tokenizer exists: the plan (a function of the record count and settings)
  // gives sigma_m; PrepareDp checks that its own plan agrees.
  Result<std::vector<std::vector<int64_t>>> DpBinEdges(const InputData& input) {
    Result<DpPlan> plan = PlanDp(DpSettingsFor(true), int64_t(input.records.size()),
                                 cfg_.batch_size, cfg_.epochs);
    if (!plan.ok()) return plan.status().WithContext(opts_.input_path);
    const int64_t n = int64_t(input.records.size());
    const double share = BinsShare(n, plan->marginal_noise_multiplier);
    if (!(share > 0)) return std::vector<std::vector<int64_t>>();
    bins_sigma_m_ = plan->marginal_noise_multiplier;
    SecureGaussian noise = cfg_.dp_deterministic_noise
                               ? SecureGaussian::Deterministic(seed_ ^ 0xb1a5b1a5b1a5b1a5ull)
                               : SecureGaussian::FromOsEntropy();
    const double sigma = SplitRelease(bins_sigma_m_, share).bins;
    DS_ASSIGN_OR_RETURN(auto edges, MeasureDpBinEdges(schema_, input.records, sigma, &noise));
    obs_.OnInfo(fmt::format(
        "dp bins: {} numeric columns binned at the quantiles of a Gaussian histogram release "
        "(noise multiplier {:.4g}: share {} of the marginals' release)",
        AdaptiveBinColumns(schema_).size(), sigma, share));
    return edges;
  }

  Status PrepareDp(const InputData& input, const Tokenizer& tok) {
    const int cap = 4 * cfg_.seq_length;
    DS_ASSIGN_OR_RETURN(recs_, RecordData::Build(input, tok, cap));
    if (recs_.truncated() > 0)
      obs_.OnInfo(fmt::format("dp: {} records longer than {} tokens were truncated",
                              recs_.truncated(), cap));
    const DpSettings s = DpSettingsFor(dynamic_cast<const FieldTokenizer*>(&tok) != nullptr);
    Result<DpPlan> plan = PlanDp(s, recs_.records(), cfg_.batch_size, cfg_.epochs);
    if (!plan.ok()) return plan.status().WithContext(opts_.input_path);
    dp_.plan = plan.value();
    if (bins_sigma_m_ > 0 && dp_.plan.marginal_noise_multiplier != bins_sigma_m_)
      return DS_ERR(kInternal, "dp bins: measured at sigma_m {}, the plan has {}", bins_sigma_m_,
                    dp_.plan.marginal_noise_multiplier);
    dp_.steps_per_epoch = (recs_.records() + cfg_.batch_size - 1) / cfg_.batch_size;
    {
      const double m = dp_.plan.expected_batch_size, q = dp_.plan.sampling_rate;
      const int cap = int(std::min<double>(
          double(recs_.records()),
          std::max<double>(cfg_.batch_size, std::ceil(m + 4.0 * std::sqrt(m * (1.0 - q))))));
      // Padded itself, so that padded chunks (at most this many records) fit.
      dp_.chunk_capacity = RecordData::PaddedRows(cap, RecordData::kDpRowQuantum);
    }
    dp_.max_steps = dp_.plan.steps;
    if (cfg_.dp_target_epsilon > 0) {
      const std::vector<double> extra = dp_.plan.ExtraRdp();
      dp_.max_steps = std::min(
          dp_.plan.steps,
          MaxStepsWithinBudget(cfg_.dp_target_epsilon, dp_.plan.sampling_rate,
                               dp_.plan.noise_multiplier, dp_.plan.delta, RdpConversion::kImproved,
                               extra.empty() ? nullptr : &extra));
      cfg_.dp_noise_multiplier = dp_.plan.noise_multiplier;
    }
    obs_.OnInfo(DescribeDpPlan(dp_.plan));
    // The marginals are measured (once) with the training records: composed
    // from the start, so every epoch's epsilon includes them.
    if (dp_.plan.marginal_noise_multiplier > 0) dp_.accountant.AddGaussian(dp_.plan.marginal_noise_multiplier);
    dp_.threshold = NormalQuantile(dp_.plan.sampling_rate);
    return Status::Ok();
  }

  void ResetNoise() {
    dp_.noise = std::make_unique<SecureGaussian>(
        cfg_.dp_deterministic_noise ? SecureGaussian::Deterministic(seed_ ^ uint64_t(global_step_))
                                    : SecureGaussian::FromOsEntropy());
  }

  double UntrainedLoss() {
    Batch b;
    if (cfg_.dp) {
      std::vector<int64_t> first(size_t(std::min<int64_t>(cfg_.batch_size, recs_.records())));
      for (size_t i = 0; i < first.size(); ++i) first[i] = int64_t(i);
      recs_.FillBatch(first.data(), int(first.size()), &b);
    } else if (data_.val_batches() > 0) {
      // Also measures the validation cost; under a budget at most 5% of it.
      return Validate(budget_ > 0 ? 0.05 * budget_ : kInf, 3).loss;
    } else {
      data_.TrainBatch(data_.EpochOrder(0, cfg_.buffer_size), 0, &b);
    }
    StepStats s = backend_->Step(b, false, 0);
    return s.loss_sum / s.count;
  }

  struct ValResult {
    double loss = kNaN, accuracy = kNaN;  // NaN without validation
    int64_t batches = 0;                  // evaluated
    bool cancelled = false;
  };
  // Loss and accuracy over the validation batches, or over the first of them
  // that fit in max_seconds (at least one; they are a fixed random sample of
  // the stream). Measures the time per batch.
  ValResult Validate(double max_seconds = kInf, int64_t min_batches = 1) {
    ValResult v;
    if (cfg_.dp || data_.val_batches() == 0) return v;
    dist::Timed val_time(dist::Phase::kValidate);
    StepStats sum;
    Batch batch;
    auto v0 = Clock::now();
    double first = 0;  // the first batch's time (warm-up), left out of the estimate
    // mpirun without a time box: batch b on rank b % N (src/dist); the sums
    // stay in batch order, rank 0's Ctrl-C is agreed on with them (FillIn).
    const bool spread = dist_ && !(max_seconds < kInf);
    bool rank0_cancelled = false;
    std::vector<StepStats> per;  // [batch]
    for (int64_t b = 0; b < data_.val_batches(); ++b) {
      if (Cancelled() && !spread) {
        v.cancelled = true;
        return v;
      }
      if (spread && dist::Rank() == 0 && Cancelled()) {
        rank0_cancelled = true;
        break;
      }
      if (b >= min_batches && Since(v0) * double(b + 1) / double(b) > max_seconds) break;
      per.emplace_back();
      v.batches = b + 1;
      if (spread && !dist_->Owns(b)) continue;
      data_.ValBatch(b, &batch);
      per.back() = backend_->Step(batch, /*train=*/false, 0);
      if (b == 0) first = Since(v0);
    }
    if (spread) {
      per.resize(size_t(data_.val_batches()));
      v.batches = data_.val_batches();
      if (dist_->FillIn(&per, rank0_cancelled)) {
        v.cancelled = true;
        return v;
      }
    }
    for (const StepStats& s : per) {
      sum.loss_sum += s.loss_sum;
      sum.correct += s.correct;
      sum.count += s.count;
    }
    val_batch_seconds_ = v.batches > 1 ? (Since(v0) - first) / double(v.batches - 1) : first;
    v.loss = sum.loss_sum / sum.count;
    v.accuracy = sum.correct / sum.count;
    return v;
  }

  // One DP-SGD step: Poisson-sample records, per-record clipped gradient sum
  // (backend chunks of at most chunk_capacity records), + N(0, (sigma C)^2),
  // divided by the expected batch size, left in the backend's grads.
  Result<StepStats> DpStep(uint64_t dropout_seed) {
    const size_t P = layout_.total;
    dp_.acc.assign(P, 0.0f);
    dp_.chunk.resize(P);
    dp_.z.resize(size_t(recs_.records()));
    dp_.noise->FillDouble(dp_.z.data(), dp_.z.size(), 1.0);
    std::vector<int64_t> ids;
    for (int64_t r = 0; r < recs_.records(); ++r)
      if (dp_.z[size_t(r)] < dp_.threshold) ids.push_back(r);
    if (dist_)
      return dist_->DpStep(*backend_, std::move(ids),
                           {&recs_, float(dp_.plan.l2_norm_clip), dp_.noise.get(),
                            dp_.plan.noise_stddev, dp_.plan.expected_batch_size, dp_.chunk_capacity},
                           dropout_seed);
    // Backend chunks: the sample sorted by length and cut into the fewest
    // chunks of at most chunk_capacity records, of nearly equal sizes, so that each
    // chunk pads to a length close to its records' (the clipped sum does not
    // depend on the grouping).
    std::stable_sort(ids.begin(), ids.end(), [this](int64_t a, int64_t b) {
      return recs_.length(a) > recs_.length(b);
    });
    StepStats total;
    PerExampleClip clip;
    clip.l2_norm_clip = float(dp_.plan.l2_norm_clip);
    Batch batch;
    const size_t cap = size_t(dp_.chunk_capacity);
    const size_t chunks = (ids.size() + cap - 1) / cap;
    for (size_t k = 0, start = 0; k < chunks; ++k) {
      const size_t end = ids.size() * (k + 1) / chunks;
      int n = int(end - start);
      recs_.FillBatch(ids.data() + start, n, &batch, RecordData::kDpRowQuantum);
      StepStats s = backend_->Step(batch, /*train=*/true, dropout_seed + start, &clip);
      total.loss_sum += s.loss_sum;
      total.correct += s.correct;
      total.count += s.count;
      backend_->GetGrads(dp_.chunk.data());
      for (size_t i = 0; i < P; ++i) dp_.acc[i] += dp_.chunk[i];
      start = end;
    }
    dp_.noise->Add(dp_.acc.data(), P, dp_.plan.noise_stddev);
    const float inv = float(1.0 / dp_.plan.expected_batch_size);
    for (size_t i = 0; i < P; ++i) dp_.acc[i] *= inv;
    backend_->SetGrads(dp_.acc.data());
    return total;
  }

  Status RunEpoch(int epoch, const OptimizerConfig& opt, EpochResult* r, bool* time_up,
                  bool* budget_spent, bool* steps_up) {
    auto e0 = Clock::now();
    std::vector<int64_t> order;
    if (!cfg_.dp) order = data_.EpochOrder(epoch, cfg_.buffer_size);
    const int64_t steps = StepsPerEpoch();
    StepStats sum;
    Batch batch;
    for (int64_t b = 0; b < steps; ++b) {
      // The unfinished epoch is abandoned (mpirun: rank 0's Ctrl-C, carried by the last step).
      if (dist_ ? dist_->Cancel(Cancelled()) : Cancelled()) return Interrupted();
      if (!StepsLeft()) break;  // max_training_steps reached (the same step on every rank)
      if (b > 0 && !Fits(StepEstimate())) {
        ReportBudgetStop(fmt::format("epoch {} at step {}/{}", epoch, b, steps));
        *time_up = true;
        break;
      }
      auto s0 = Clock::now();
      uint64_t dropout_seed = seed_ ^ (0x9e3779b97f4a7c15ull * uint64_t(global_step_ + 1));
      StepStats s;
      bool applied = false;  // mpirun: the step applied the optimizer (sharded on one host)
      if (cfg_.dp) {
        if (global_step_ >= dp_.max_steps) {
          *budget_spent = true;
          break;
        }
        DS_ASSIGN_OR_RETURN(s, DpStep(dropout_seed));
        dp_.accountant.AddSteps(dp_.plan.sampling_rate, dp_.plan.noise_multiplier, 1);
      } else {
        data_.TrainBatch(order, b, &batch);
        if (dist_) {
          DS_ASSIGN_OR_RETURN(s, dist_->Step(*backend_, batch, dropout_seed, opt, global_step_ + 1,
                                             Cancelled()));
          applied = true;
        } else {
          s = backend_->Step(batch, /*train=*/true, dropout_seed);
        }
      }
      if (applied) {
        ++global_step_;
      } else {
        dist::Timed opt_time(dist::Phase::kOptimizer);
        backend_->ApplyOptimizer(opt, ++global_step_);
      }
      last_step_seconds_ = Since(s0);
      if (steps_seen_++ > 0) {
        step_seconds_ += last_step_seconds_;
        ++steps_timed_;
      }
      if (!std::isfinite(s.loss_sum))
        return DS_ERR(kInternal,
                      "training diverged at epoch {} step {} (loss is not finite); lower "
                      "learning_rate",
                      epoch, b + 1);
      sum.loss_sum += s.loss_sum;
      sum.correct += s.correct;
      sum.count += s.count;
      trained_tokens_ += int64_t(cfg_.dp ? s.count : double(batch.batch) * batch.steps);
      double elapsed = Since(e0);
      TrainProgress p;
      p.epoch = epoch;
      p.epochs = cfg_.epochs;
      p.step = b + 1;
      p.steps = steps;
      p.loss = sum.loss_sum / std::max(sum.count, 1.0);
      p.tokens_per_s = double(trained_tokens_ - epoch_start_tokens_) / elapsed;
      p.eta_seconds = elapsed / double(b + 1) *
                      double(StepsRemaining(steps - b - 1 + int64_t(cfg_.epochs - epoch) * steps));
      obs_.OnProgress(p);
    }
    double train_seconds = Since(e0);
    compute_seconds_ += train_seconds;
    r->epoch = epoch;
    r->steps = global_step_;
    *steps_up = !StepsLeft();  // the budget's last step: stop after this epoch
    r->loss = sum.loss_sum / std::max(sum.count, 1.0);
    r->accuracy = sum.correct / std::max(sum.count, 1.0);
    // Time-boxed under a budget: what is left after the save.
    ValResult v =
        Validate(budget_ > 0 ? budget_ - Elapsed() - SaveEstimate() - kFinishReserve : kInf);
    DS_RETURN_IF_ERROR(dist::BroadcastValue(&v));  // mpirun: rank 0's (time-boxed) result
    if (v.cancelled) return Interrupted();
    if (v.batches > 0 && v.batches < data_.val_batches())
      obs_.OnInfo(fmt::format("time budget: epoch {} validated on {} of {} batches", epoch,
                              v.batches, data_.val_batches()));
    r->val_loss = v.loss;
    r->val_accuracy = v.accuracy;
    if (cfg_.dp) {
      r->delta = dp_.plan.delta;
      r->epsilon = dp_.accountant.GetEpsilon(dp_.plan.delta).epsilon;
    }
    r->seconds = Since(e0);
    r->tokens_per_s = double(trained_tokens_ - epoch_start_tokens_) / train_seconds;
    epoch_start_tokens_ = trained_tokens_;
    return Status::Ok();
  }

  bool EarlyStop(const EpochResult& r) {
    double m = MetricOf(r, metric_);
    bool improved = lower_better_ ? m < best_for_patience_ - cfg_.early_stopping_min_delta
                                  : m > best_for_patience_ + cfg_.early_stopping_min_delta;
    last_improved_ = improved;
    if (improved) {
      best_for_patience_ = m;
      wait_ = 0;
      return false;
    }
    return cfg_.early_stopping && ++wait_ >= cfg_.early_stopping_patience;
  }

  // lr_plateau_restore goes back only from an epoch worse than the best by
  // more than early_stopping_min_delta (overfitting), not from a mere stall.
  bool WorseThanBest(const EpochResult& r) const {
    double m = MetricOf(r, metric_);
    return lower_better_ ? m > best_ + cfg_.early_stopping_min_delta
                         : m < best_ - cfg_.early_stopping_min_delta;
  }

  // Writes the epoch's files in an order that keeps every name valid if the
  // process dies between any two writes.
  Status EndEpoch(EpochResult& r, const InputData& input, char delim) {
    auto s0 = Clock::now();
    dist::Timed save_time(dist::Phase::kSave);
    DS_RETURN_IF_ERROR(WriteEpoch(r, input, delim));
    save_seconds_ = std::max(save_seconds_, Since(s0));
    return Status::Ok();
  }

  Status WriteEpoch(EpochResult& r, const InputData& input, char delim) {
    const int epoch = r.epoch;
    double m = MetricOf(r, metric_);
    bool improved = lower_better_ ? m < best_ : m > best_;
    backend_->GetParams(params_.data());
    if (improved || !cfg_.save_best_model) {
      if (improved) best_ = m;
      r.best = true;
      for (auto& h : summary_.history) h.best = false;
      best_epoch_ = epoch;
      best_metric_ = m;
      weights_file_ = fmt::format("weights-e{:04d}.bin", epoch);
      weights_crc_ = Crc32(params_.data(), params_.size() * sizeof(float));
      DS_RETURN_IF_ERROR(
          WriteTensorFile(dir() + "/" + weights_file_, {{"params", params_.data(), layout_.total}}));
    }
    if (cfg_.save_all_checkpoints) {
      DS_RETURN_IF_ERROR(MakeDirs(dir() + "/checkpoints"));
      DS_RETURN_IF_ERROR(WriteTensorFile(fmt::format("{}/checkpoints/epoch_{:04d}.bin", dir(), epoch),
                                         {{"params", params_.data(), layout_.total}}));
    }
    summary_.history.push_back(r);
    // lr_plateau_restore: the next epoch starts from the best weights (before
    // the checkpoint, so that a resumed run continues the same way).
    if (restore_best_ && !r.best) {
      DS_RETURN_IF_ERROR(LoadBestWeights());
      obs_.OnInfo(fmt::format("epoch {}: the next epoch starts from the weights of epoch {}", epoch,
                              best_epoch_));
    }
    checkpoint_file_ = fmt::format("checkpoint-e{:04d}.bin", epoch);
    std::vector<float> opt_state = backend_->GetOptimizerState();
    if (dist_) DS_RETURN_IF_ERROR(dist_->GatherOptimizerState(&opt_state));  // sharded: every slice
    DS_RETURN_IF_ERROR(WriteTensorFile(dir() + "/" + checkpoint_file_,
                                       {{"params", params_.data(), layout_.total},
                                        {"optimizer", opt_state.data(), opt_state.size()}}));
    DS_RETURN_IF_ERROR(
        WriteFileAtomic(dir() + "/model_history.csv", HistoryCsv(summary_.history, cfg_.dp)));
    DS_RETURN_IF_ERROR(WriteCheckpointJson());
    DS_RETURN_IF_ERROR(WriteModelParams(dir(), cfg_, Meta(input, delim)));
    epoch_written_ = true;
    RemoveStale();
    obs_.OnEpoch(r);
    return Status::Ok();
  }

  Status LoadBestWeights() {
    DS_ASSIGN_OR_RETURN(auto f, MappedTensorFile::Open(dir() + "/" + weights_file_));
    DS_ASSIGN_OR_RETURN(const float* p, f->Section("params", layout_.total));
    std::copy(p, p + layout_.total, params_.begin());
    backend_->SetParams(params_.data());
    return Status::Ok();
  }

  void RemoveStale() {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir(), ec)) {
      std::string name = e.path().filename().string();
      bool versioned = name.rfind("weights-e", 0) == 0 || name.rfind("checkpoint-e", 0) == 0;
      if (versioned && name != weights_file_ && name != checkpoint_file_)
        std::filesystem::remove(e.path(), ec);
    }
  }

  Status WriteCheckpointJson() {
    Json j;
    j["version"] = kCheckpointVersion;
    j["config"] = cfg_.ToJson();
    j["input_path"] = opts_.input_path;
    j["input_fingerprint"] = fingerprint_;
    j["checkpoint_file"] = checkpoint_file_;
    j["weights_file"] = weights_file_;
    j["weights_crc32"] = weights_crc_;
    j["global_step"] = global_step_;
    j["best"] = best_;
    j["best_for_patience"] = best_for_patience_;
    j["wait"] = wait_;
    j["learning_rate_now"] = lr_.lr();  // the schedule's state (lr_schedule.h)
    j["lr_wait"] = lr_.wait();
    j["best_epoch"] = best_epoch_;
    j["best_metric"] = best_metric_;
    j["trained_tokens"] = trained_tokens_;
    j["seconds"] = compute_seconds_ + prior_seconds_;
    j["wall_seconds"] = prior_wall_ + Elapsed();  // the time budget's clock
    j["untrained_loss"] = summary_.untrained_val_loss;
    j["done"] = done_;
    j["stop_reason"] = stop_reason_;
    Json h = Json::array();
    for (const auto& r : summary_.history) h.push_back(EpochToJson(r));
    j["history"] = h;
    return WriteFileAtomic(dir() + "/checkpoint.json", j.dump(1) + "\n");
  }

  Status RestoreCheckpoint(const Json& j) {
    try {
      checkpoint_file_ = j.at("checkpoint_file").get<std::string>();
      weights_file_ = j.at("weights_file").get<std::string>();
      for (const auto& name : {checkpoint_file_, weights_file_})
        if (name.find('/') != std::string::npos || name.empty() || name[0] == '.')
          return DS_ERR(kCorrupt, "{}/checkpoint.json: bad file name '{}'", dir(), name);
      weights_crc_ = j.at("weights_crc32").get<uint32_t>();
      global_step_ = j.at("global_step").get<int64_t>();
      best_ = j.at("best").get<double>();
      best_for_patience_ = j.at("best_for_patience").get<double>();
      wait_ = j.at("wait").get<int>();
      // Absent in checkpoints written before the schedule: the constant rate.
      lr_.Restore(j.value("learning_rate_now", cfg_.learning_rate), j.value("lr_wait", 0));
      best_epoch_ = j.at("best_epoch").get<int>();
      best_metric_ = j.at("best_metric").get<double>();
      trained_tokens_ = epoch_start_tokens_ = j.at("trained_tokens").get<int64_t>();
      prior_seconds_ = j.at("seconds").get<double>();
      summary_.untrained_val_loss = j.at("untrained_loss").get<double>();
      done_ = j.at("done").get<bool>();
      stop_reason_ = j.at("stop_reason").get<std::string>();
      for (const auto& e : j.at("history")) summary_.history.push_back(EpochFromJson(e));
    } catch (const Json::exception& e) {
      return DS_ERR(kCorrupt, "{}/checkpoint.json: {}", dir(), e.what());
    }
    DS_ASSIGN_OR_RETURN(auto f, MappedTensorFile::Open(dir() + "/" + checkpoint_file_));
    DS_ASSIGN_OR_RETURN(const float* p, f->Section("params", layout_.total));
    backend_->SetParams(p);
    std::copy(p, p + layout_.total, params_.begin());
    // The optimizer state has the size the backend uses for this network.
    const size_t opt_count = backend_->GetOptimizerState().size();
    DS_ASSIGN_OR_RETURN(const float* o, f->Section("optimizer", opt_count));
    DS_RETURN_IF_ERROR(backend_->SetOptimizerState(std::vector<float>(o, o + opt_count)));
    if (cfg_.dp) dp_.accountant.AddSteps(dp_.plan.sampling_rate, dp_.plan.noise_multiplier, global_step_);
    if (cfg_.dp && dp_.plan.marginal_noise_multiplier > 0)
      dp_.accountant.AddGaussian(dp_.plan.marginal_noise_multiplier);
    epoch_written_ = true;
    return Status::Ok();
  }

  // `calibrate` (train/calibrate.h): the kept weights' output biases moved so
  // the generated 1-way marginals match the training records' (under dp:
  // their Gaussian-noised counts, accounted in PrepareDp). Written as a new
  // weights file; a finished run resumed again is not calibrated twice.
  Status CalibrateKept(const InputData& input, char delim, const Tokenizer& tok) {
    const auto* ft = dynamic_cast<const FieldTokenizer*>(&tok);
    if (!cfg_.calibrate || weights_file_.empty() || weights_file_.ends_with("-cal.bin"))
      return Status::Ok();
    if (!ft) {
      obs_.OnInfo("calibrate: only for the field tokenizer; skipped");
      return Status::Ok();
    }
    DS_ASSIGN_OR_RETURN(auto f, MappedTensorFile::Open(dir() + "/" + weights_file_));
    DS_ASSIGN_OR_RETURN(const float* p, f->Section("params", layout_.total));
    std::vector<float> params(p, p + layout_.total);
    CalibrateOptions o;
    o.seed = seed_;
    o.temperature = cfg_.gen_temp;
    o.iterations = cfg_.calibrate_iterations;
    if (!cfg_.dp) o.samples = CalibrationSamples(data_.tokens(), int64_t(input.records.size()));
    o.skip_steady_last = !cfg_.dp;  // the last step unmeasured after a steady fall (calibrate.h)
    o.stop_when_worse = !cfg_.dp;  // under dp the steps chase noisy targets: all of them, as measured in docs/privacy.md
    const double sigma_m = dp_.plan.marginal_noise_multiplier;
    if (cfg_.dp && !(sigma_m > 0))
      return DS_ERR(kInternal, "calibrate under dp without a marginal release in the plan");
    dist::Timed calibrate_time(dist::Phase::kCalibrate);  // mpirun: the sampling spread over the ranks
    std::vector<ColumnMarginal> targets;
    MeasureOptions mo;
    mo.pairs = cfg_.calibrate_pairs;
    mo.max_groups = cfg_.calibrate_groups;
    // The rest of the release after the bins' share (train/dp_bins.h).
    const double bins_share = BinsShare(int64_t(input.records.size()), sigma_m);
    const ReleaseSplit split = SplitRelease(sigma_m, bins_share);
    mo.sigma_m = cfg_.dp ? split.rest : 0.0;
    MeasureReport mr;
    DS_RETURN_IF_ERROR(MeasureTargets(*ft, input.records, mo, dp_.noise.get(), &targets, &mr));
    DS_RETURN_IF_ERROR(ShareTargets(&targets));  // mpirun: rank 0's (its dp noise)
    if (cfg_.dp) {
      marginal_split_ = mr.Describe(split.rest);
      if (bins_share > 0)
        marginal_split_ = fmt::format("the numeric bins' histograms at noise multiplier {:.4g}, {}",
                                      split.bins, marginal_split_);
      obs_.OnInfo("calibrate: the marginals' release spent as " + marginal_split_);
    }
    CalibrateReport rep;
    PairTables pairs;
    DS_RETURN_IF_ERROR(
        Calibrate(*ft, input.header, delim, spec_, params.data(), targets, o, &rep, &pairs));
    obs_.OnInfo(rep.Describe());
    if (!pairs.tables.empty()) DS_RETURN_IF_ERROR(pairs.Save(dir()));
    weights_file_ = weights_file_.substr(0, weights_file_.size() - 4) + "-cal.bin";
    weights_crc_ = Crc32(params.data(), params.size() * sizeof(float));
    DS_RETURN_IF_ERROR(WriteTensorFile(dir() + "/" + weights_file_, {{"params", params.data(), layout_.total}}));
    RemoveStale();
    return Status::Ok();
  }

  ModelMeta Meta(const InputData& input, char delim) const {
    ModelMeta meta;
    meta.datasynth_version = DS_VERSION;
    meta.spec = spec_;
    meta.header = input.header;
    meta.delimiter = delim;
    meta.input_path = opts_.input_path;
    meta.input_file = InputFileIdentity(opts_.input_path);
    meta.records = int64_t(input.records.size());
    meta.tokens = cfg_.dp ? recs_.tokens() : data_.tokens();
    meta.epochs_run = int(summary_.history.size());
    meta.best_epoch = best_epoch_;
    meta.best_metric = best_metric_;
    meta.train_seconds = compute_seconds_ + prior_seconds_;
    meta.stop_reason = done_ ? stop_reason_ : "interrupted";
    meta.device = backend_->name();
    meta.precision = PrecisionName(backend_->precision());
    meta.loss = (cfg_.dp ? recs_.legal_ranges() : data_.legal_ranges()) ? "legal" : "full";
    meta.weights_file = weights_file_;
    meta.weights_crc = weights_crc_;
    if (cfg_.dp) {
      meta.dp = true;
      meta.epsilon = dp_.accountant.GetEpsilon(dp_.plan.delta).epsilon;
      meta.delta = dp_.plan.delta;
      meta.dp_unit = fmt::format(
          "one record (one CSV row / text line); DP-SGD with Poisson sampling q={:.4g}, noise "
          "multiplier {:.4g}, clip {:.4g}, {} steps; covers the weights and all generated data, "
          "not the {} or the header",
          dp_.plan.sampling_rate, dp_.plan.noise_multiplier, dp_.plan.l2_norm_clip, global_step_,
          schema_.columns.empty() ? "character set" : "public schema");
      if (dp_.plan.marginal_noise_multiplier > 0)
        meta.dp_unit += fmt::format(
            "; composed with the calibration marginals (Gaussian, noise multiplier {:.4g}, "
            "epsilon {:.4g} alone; DP-SGD alone {:.4g})",
            dp_.plan.marginal_noise_multiplier, dp_.plan.marginal_epsilon_alone,
            dp_.plan.sgd_epsilon_alone);
      if (!marginal_split_.empty()) meta.dp_unit += ", spent as " + marginal_split_;
    }
    return meta;
  }

  Status Finish(const InputData& input, char delim, const Tokenizer& tok, Clock::time_point t0) {
    DS_RETURN_IF_ERROR(CalibrateKept(input, delim, tok));
    DS_RETURN_IF_ERROR(WriteCheckpointJson());
    summary_.meta = Meta(input, delim);
    DS_RETURN_IF_ERROR(WriteModelParams(dir(), cfg_, summary_.meta));
    summary_.seconds = Since(t0);
    if (dist_) {
      obs_.OnInfo(dist_->Report());
      DS_ASSIGN_OR_RETURN(std::vector<std::string> profile, dist::ProfileLines(Since(t0)));
      for (const std::string& line : profile) obs_.OnInfo(line);
    }
    if (backend_) summary_.device_memory = backend_->memory_stats();
    summary_.tokens_per_s = compute_seconds_ > 0 ? double(trained_tokens_) / (compute_seconds_ + prior_seconds_) : 0;
    return Status::Ok();
  }

  TrainOptions opts_;
  TrainObserver& obs_;
  Config cfg_;
  uint64_t seed_ = 0;
  int threads_ = 1;
  bool created_dir_ = false;
  bool epoch_written_ = false;  // a complete epoch's files exist: keep them on failure
  bool done_ = false;
  std::string fingerprint_;
  SequenceData data_;
  RecordData recs_;
  DpRun dp_;
  PublicSchema schema_;  // `schema` (empty: none)
  NetworkSpec spec_;
  ParamLayout layout_;
  std::unique_ptr<TrainBackend> backend_;
  std::unique_ptr<dist::DataParallel> dist_;  // mpirun with several ranks (src/dist)
  std::vector<float> params_;  // [layout_.total] host copy
  std::string metric_;
  bool lower_better_ = true;
  double best_ = 0, best_for_patience_ = 0, best_metric_ = 0;
  int wait_ = 0, best_epoch_ = 0;
  bool last_improved_ = false;  // the last EarlyStop's verdict
  bool restore_best_ = false;   // lr_plateau_restore: this epoch reduced the rate
  LrSchedule lr_;
  int64_t global_step_ = 0, trained_tokens_ = 0, epoch_start_tokens_ = 0;
  double compute_seconds_ = 0, prior_seconds_ = 0;
  // Time budget: this call's start, budget (0 = none) and the measured costs.
  Clock::time_point t0_;
  double budget_ = 0, prior_wall_ = 0;
  double step_seconds_ = 0, last_step_seconds_ = 0, val_batch_seconds_ = 0, save_seconds_ = 0;
  int64_t steps_seen_ = 0, steps_timed_ = 0;
  std::string stop_reason_ = "epochs";
  std::string weights_file_, checkpoint_file_;
  bool field_lr_by_steps_ = false;  // learning_rate from the steps an epoch (ApplyFieldDefaults)
  double bins_sigma_m_ = 0;  // dp bins (DpBinEdges): the sigma_m they were measured at
  std::string marginal_split_;  // dp calibration: how the marginals' release was spent (MeasureReport)
  uint32_t weights_crc_ = 0;
  TrainSummary summary_;
};

}  // namespace

nlohmann::json EpochToJson(const EpochResult& r) {
  auto n = [](double v) { return std::isnan(v) ? Json(nullptr) : Json(v); };
  return {{"epoch", r.epoch},           {"loss", n(r.loss)},         {"accuracy", n(r.accuracy)},
          {"val_loss", n(r.val_loss)},  {"val_accuracy", n(r.val_accuracy)},
          {"epsilon", r.epsilon},       {"delta", r.delta},          {"best", r.best},
          {"seconds", r.seconds},       {"tokens_per_s", r.tokens_per_s},
          {"steps", r.steps},           {"learning_rate", n(r.learning_rate)}};
}

EpochResult EpochFromJson(const nlohmann::json& j) {
  auto n = [&](const char* k) { return j.at(k).is_null() ? kNaN : j.at(k).get<double>(); };
  EpochResult r;
  r.epoch = j.at("epoch").get<int>();
  r.loss = n("loss");
  r.accuracy = n("accuracy");
  r.val_loss = n("val_loss");
  r.val_accuracy = n("val_accuracy");
  r.epsilon = j.at("epsilon").get<double>();
  r.delta = j.at("delta").get<double>();
  r.best = j.at("best").get<bool>();
  r.seconds = j.at("seconds").get<double>();
  r.tokens_per_s = j.at("tokens_per_s").get<double>();
  r.steps = j.value("steps", int64_t(0));  // absent in checkpoints written before the step budget
  // absent before the learning-rate schedule
  r.learning_rate = j.contains("learning_rate") && !j["learning_rate"].is_null()
                        ? j["learning_rate"].get<double>()
                        : kNaN;
  return r;
}

Result<TrainSummary> Train(const TrainOptions& given, TrainObserver* observer) {
  // mpirun: rank 0 alone writes the model and the log (src/dist).
  DS_RETURN_IF_ERROR(dist::CheckLaunch());
  TrainOptions options = given;
  DS_ASSIGN_OR_RETURN(options.model_dir, dist::RankModelDir(given.model_dir, given.resume));
  if (options.model_dir != given.model_dir) observer = nullptr;
  DS_ASSIGN_OR_RETURN(std::unique_ptr<DirLock> lock, LockModelDir(options.model_dir));
  // One run per model directory at a time (model/model_dir.h LockModelDir).
  TrainObserver null_observer;
  TrainRun run(options, observer ? *observer : null_observer);
  if (lock->created()) run.SetCreatedDir();
  Result<TrainSummary> r = run.Run();
  // A directory this run created (the lock did) and left with neither a model
  // nor a checkpoint goes.
  if (!r.ok() && !LooksLikeModel(options.model_dir) &&
      !PathExists(options.model_dir + "/checkpoint.json"))
    lock->RemoveDirOnRelease();
  if (options.model_dir != given.model_dir) {  // another rank's scratch directory
    lock.reset();
    (void)RemoveTree(options.model_dir);
  }
  return r;
}

}  // namespace ds
