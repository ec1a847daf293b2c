// A trained model directory:
//
//   model_params.json  every config key (reference names) plus a "datasynth"
//                      block: format version, network shape, input header and
//                      delimiter, training summary, privacy figures, the
//                      weights file name and checksum. Rewritten atomically
//                      after every epoch, after the files it names: a
//                      directory is a model exactly when this file exists.
//   tokenizer.json     tokenizer (+ tokenizer.model for SentencePiece)
//   weights-eNNNN.bin  tensor file (model/tensor_file.h), section "params"
//                      laid out by ParamLayout: the kept epoch's weights
//                      (the name carries the epoch: a new file per kept
//                      epoch, so model_params.json always names a complete
//                      file, whenever the process is killed)
//   column_rules.json  learned per-column validation rules (delimited data)
//   copy_guard.bin     salted hashes of the rare training rows generation must
//                      not copy (generate/copy_guard.h; absent in older models,
//                      under --dp and with copy_guard = false)
//   pair_tables.bin    calibrate_pairs: the 2-way correction tables
//                      (generate/pair_correction.h; bound by its CRC-32)
//   model_history.csv  epoch,loss,accuracy,val_loss,val_accuracy,[epsilon,delta,]best,steps
//   checkpoint-eNNNN.bin  last complete epoch for --resume (params, optimizer
//                      state), named by checkpoint.json (trainer state)
//   checkpoints/       weights of every epoch when save_all_checkpoints
//   .datasynth.lock    while a `train` runs: its lock (LockModelDir); removed after
//
// The training text is NOT stored (it is the private data); the reference did.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "generate/copy_guard.h"
#include "generate/pair_correction.h"
#include "model/network.h"
#include "model/tensor_file.h"
#include "tokenize/tokenizer.h"
#include "util/fs.h"
#include "util/status.h"

namespace ds {

// 1: LSTM only, no architecture anywhere; 2: network.architecture and the
// config key `architecture`. This build reads both (1 as lstm) and writes 2, so
// a version-1 reader refuses a GRU model by its version instead of misreading
// the weights.
inline constexpr int kModelFormatVersion = 2;

struct ModelMeta {
  int format_version = kModelFormatVersion;
  std::string datasynth_version;
  NetworkSpec spec;
  std::vector<std::string> header;  // CSV header (empty for text lines)
  char delimiter = 0;               // 0 for text lines
  std::string input_path;           // informational
  // The training input file (absent for a stream such as a pipe): generate never
  // writes it, under any name (generate/output.h CheckOutputTarget).
  std::optional<FileIdentity> input_file;
  int64_t records = 0;              // training records used
  int64_t tokens = 0;               // tokens in the training stream
  int epochs_run = 0;
  int best_epoch = 0;               // 1-based epoch whose weights are kept
  double best_metric = 0;
  double train_seconds = 0;
  std::string stop_reason;          // "epochs", "early_stopping", "time_limit", "step_limit", "privacy_budget"
  std::string device = "cpu";
  std::string precision = "fp32";  // the precision training ran (absent in older models: fp32)
  // The training loss (model/network.h): "legal", softmax CE over each
  // target's legal ids (field tokenizer), or "full", over the whole
  // vocabulary (char, SentencePiece; older models). Informational.
  std::string loss = "full";
  // Privacy (dp only)
  bool dp = false;
  double epsilon = 0, delta = 0;
  std::string dp_unit;  // what the guarantee covers
  std::string weights_file = "weights.bin";  // file name inside the model directory
  uint32_t weights_crc = 0;  // CRC-32 of the weights file's params section

  nlohmann::json ToJson() const;
  static Result<ModelMeta> FromJson(const nlohmann::json& j, const std::string& source);
};

// {"path", "dev", "ino", "mtime_ns"}; FromJson throws nlohmann::json::exception on a
// missing or mistyped member (callers turn that into kCorrupt).
nlohmann::json FileIdentityToJson(const FileIdentity& id);
FileIdentity FileIdentityFromJson(const nlohmann::json& j);

// True when `dir/model_params.json` exists.
bool LooksLikeModel(const std::string& dir);

// True when dir holds a datasynth model or a run that writes one: model_params.json,
// tabular.json (a tabular model) or the training lock. Generate never writes inside
// such a directory.
bool IsModelDirectory(const std::string& dir);

inline constexpr const char* kModelLockFile = ".datasynth.lock";

// Locks a model directory for a training run (DirLock on dir/.datasynth.lock; creates
// dir when missing, and removes it again on release if nothing else was left in it).
// A second concurrent run into the same directory fails at once (kIo, "another
// datasynth process is already training into this directory").
Result<std::unique_ptr<DirLock>> LockModelDir(const std::string& dir);

// Writes model_params.json (config + meta) atomically.
Status WriteModelParams(const std::string& dir, const Config& config, const ModelMeta& meta);

// A loaded model: config, metadata, tokenizer and memory-mapped weights.
struct Model {
  std::string dir;
  Config config;
  ModelMeta meta;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<MappedTensorFile> weights;
  const float* params = nullptr;  // [ParamLayout::For(meta.spec).total], inside `weights`
  nlohmann::json column_rules;    // content of column_rules.json (null when absent)
  std::shared_ptr<const CopyGuard> copy_guard;  // copy_guard.bin (null when absent)
  std::shared_ptr<const PairTables> pair_tables;  // pair_tables.bin (calibrate_pairs; null when absent)
};

// Loads and verifies every file (untrusted input): versions, checksums, shapes
// against the network spec, tokenizer vocabulary against the network's.
Result<std::unique_ptr<Model>> LoadModel(const std::string& dir);

}  // namespace ds
