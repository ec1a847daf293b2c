// Configuration: every key of the reference (docs/reference.md §2) with its
// name and default, plus datasynth's own keys. One registry (Config::Keys())
// drives JSON loading, command-line flags, `--help`, validation and
// model_params.json, so a key cannot exist in one place and not the others.
//
// Precedence: defaults < JSON config file < command-line flags.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace ds {

struct Config {
  // ---- training (reference names and defaults) ----
  int epochs = 100;
  bool early_stopping = true;
  int early_stopping_patience = 5;
  double early_stopping_min_delta = 0.001;
  std::string best_model_metric = "val_loss";  // val_loss | loss | accuracy | val_accuracy
  int batch_size = 64;
  int buffer_size = 10000;
  int seq_length = 100;
  int embedding_dim = 256;
  int rnn_units = 256;
  double dropout_rate = 0.2;
  double learning_rate = 0.01;
  std::string rnn_initializer = "glorot_uniform";  // glorot_uniform | orthogonal
  bool validation_split = true;
  int64_t max_lines = 0;                  // 0 = all
  double max_training_time_seconds = 0;   // 0 = no limit
  int64_t max_training_steps = 0;         // optimizer steps for the whole run; 0 = no limit
  bool overwrite = false;
  bool save_all_checkpoints = false;
  bool save_best_model = true;
  // datasynth additions
  int num_layers = 2;                     // LSTM layers
  std::string architecture = "lstm";      // lstm | gru (model/network.h)
  std::string precision = "auto";         // fp32 | bf16 | auto (backend/precision.h)
  std::string optimizer = "rmsprop";      // rmsprop | adam
  std::string lr_schedule = "constant";   // constant | plateau (train/lr_schedule.h)
  int lr_plateau_patience = 2;            // epochs without improvement before a reduction
  double lr_plateau_factor = 0.5;         // lr *= factor at each reduction
  double lr_min_ratio = 0.1;              // never below lr_min_ratio * learning_rate
  bool lr_plateau_restore = false;        // at a reduction after overfitting, back to the best weights
  int64_t seed = 0;                       // 0 = random seed (recorded in model_params.json)
  int threads = 0;                        // 0 = all cores
  std::string device = "auto";            // auto | cpu | cuda
  std::string gpu_memory = "grow";        // grow | preallocate
  std::string gpu_memory_limit;           // "" = none; "4GiB", "512MiB", "25%"
  int mpi_shards = 4;                     // mpirun: fixed shards of each global batch (src/dist)

  // ---- tokenizer ----
  std::string tokenizer = "sentencepiece";  // sentencepiece | char | field
  int vocab_size = 20000;
  double character_coverage = 1.0;
  int64_t pretrain_sentence_count = 1000000;
  int max_line_len = 2048;
  std::string sp_model_type = "unigram";  // unigram | bpe
  std::string column_markers = "auto";    // auto | on | off (auto: on for delimited data)
  std::string field_delimiter;            // "" = text lines; "," etc. = CSV with header
  std::string field_delimiter_token = "<d>";

  // ---- privacy ----
  bool dp = false;
  double dp_noise_multiplier = 0.1;
  double dp_l2_norm_clip = 3.0;
  int dp_microbatches = 1;
  double dp_target_epsilon = 0;  // > 0: choose the noise multiplier to meet it
  double dp_delta = 0;           // 0 = 1/n
  bool dp_store_value_rules = false;  // keep category sets / min / max under dp
  bool dp_deterministic_noise = false;  // TESTS ONLY: noise from the seed (no privacy)
  double dp_marginal_share = 0.1;  // share of dp_target_epsilon for the calibration marginals
  double dp_bins_share = 0;        // share of the marginals' release for the numeric bins (train/dp_bins.h)
  // Copy guard (generate/copy_guard.h): generation rejects exact copies of
  // training rows seen fewer than copy_guard_min_count times (not under dp).
  bool copy_guard = true;
  int copy_guard_min_count = 2;

  // ---- generation ----
  double gen_temp = 1.0;
  int64_t gen_chars = 0;
  int64_t gen_lines = 1000;
  int predict_batch_size = 64;
  bool reset_states = true;
  int64_t max_invalid = 1000;

  // ---- field tokenizer (typed fields) ----
  std::string field_types;   // "col=type;col2=type" overrides ("" = infer every column)
  std::string field_order = "auto";  // "auto": fewest distinct values first; "header"
  bool field_relations = true;  // learn numeric a <= b relations and keep them in generation
  int field_rare_count = 2;  // category values seen fewer times share <other>
  int field_text_pieces = 0;  // open free text: sub-word pieces besides the chars (0: chars)
  std::string schema;        // public schema file (schema/public_schema.h); "" = none
  bool calibrate = false;    // match generated 1-way marginals to measured ones (train/calibrate.h)
  int calibrate_pairs = 0;       // calibrate: 2-way marginals with up to this many parents per column
  int calibrate_groups = 10;     // calibrate_pairs: id groups per column of a 2-way table
  int calibrate_iterations = 4;  // calibrate: measure-and-step rounds (14 under dp, ApplyDpDefaults)

  // Keys given explicitly (file or flag), in the order they were set.
  std::vector<std::string> explicit_keys;
  bool IsExplicit(const std::string& key) const;

  // ---- registry ----
  enum class Type { kBool, kInt, kInt64, kDouble, kString };
  enum class Group { kTraining, kTokenizer, kPrivacy, kGeneration };
  // A key and its valid values, declared once: JSON loading, flags, `--help`,
  // Validate() and model loading all check against the same table.
  struct Key {
    std::string name;
    Type type;
    Group group;
    std::string help;
    std::function<void*(Config&)> field;
    // Numbers: the closed range [min, max] (integers exactly as int64; every
    // double key is also finite). Strings: `choices` when not empty.
    bool has_range = false;
    int64_t imin = 0, imax = 0;
    double dmin = 0, dmax = 0;
    std::vector<std::string> choices;
    // Further rules of one key (e.g. field_delimiter: one ASCII byte, not a
    // quote / CR / LF / NUL); errors name the key.
    std::function<Status(const Config&)> extra;

    // "1 to 65536", "one of: a, b", or "" when any value of the type is valid.
    std::string RangeText() const;
    // The current value of this key in `c` against the declared rules.
    Status Check(const Config& c) const;
    bool is_integer() const { return type == Type::kInt || type == Type::kInt64; }
  };
  static const std::vector<Key>& Keys();

  // Sets one key from text (flag value) or JSON value; errors name the key and,
  // for a value out of range, the range. Nothing is wrapped or clamped.
  Status Set(const std::string& key, const std::string& value);
  Status SetJson(const std::string& key, const nlohmann::json& value);
  // Merges a JSON object: unknown keys and wrong types are errors naming the
  // key (and `source`, the file name).
  Status MergeJson(const nlohmann::json& obj, const std::string& source);
  Status LoadFile(const std::string& path);
  // Validates every key (ranges, enums, cross-key rules).
  Status Validate() const;
  nlohmann::json ToJson() const;
  std::string ValueString(const Key& k) const;
  static const Key* Find(const std::string& name);
};

}  // namespace ds
