#include "config/config.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "util/utf8.h"

namespace ds {
namespace {

using Json = nlohmann::json;

template <typename T>
std::function<Status(const Config&)> Range(T Config::*m, const char* name, double lo, double hi) {
  return [m, name, lo, hi](const Config& c) -> Status {
    double v = double(c.*m);
    if (!(v >= lo && v <= hi))
      return DS_ERR(kInvalidArgument, "config key '{}': value {} out of range [{}, {}]", name,
                    c.*m, lo, hi);
    return Status::Ok();
  };
}

std::function<Status(const Config&)> OneOf(std::string Config::*m, const char* name,
                                           std::vector<std::string> allowed) {
  return [m, name, allowed](const Config& c) -> Status {
    for (const auto& a : allowed)
      if (c.*m == a) return Status::Ok();
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    return DS_ERR(kInvalidArgument, "config key '{}': '{}' is not one of: {}", name, c.*m, list);
  };
}

std::vector<Config::Key> MakeKeys() {
  using T = Config::Type;
  using G = Config::Group;
  std::vector<Config::Key> k;
  constexpr double kBig = 1e12;
#define DS_KEY(member, type, group, help, check) \
  k.push_back({#member, type, group, help, [](Config& c) -> void* { return &c.member; }, check})
  // training
  DS_KEY(epochs, T::kInt, G::kTraining, "training epochs", Range(&Config::epochs, "epochs", 1, 1e6));
  DS_KEY(early_stopping, T::kBool, G::kTraining, "stop when best_model_metric stops improving",
         nullptr);
  DS_KEY(early_stopping_patience, T::kInt, G::kTraining, "epochs without improvement before stopping",
         Range(&Config::early_stopping_patience, "early_stopping_patience", 1, 1e6));
  DS_KEY(early_stopping_min_delta, T::kDouble, G::kTraining, "smallest change that counts as improvement",
         Range(&Config::early_stopping_min_delta, "early_stopping_min_delta", 0, kBig));
  DS_KEY(best_model_metric, T::kString, G::kTraining, "val_loss | loss | accuracy | val_accuracy",
         OneOf(&Config::best_model_metric, "best_model_metric",
               {"val_loss", "loss", "accuracy", "val_accuracy"}));
  DS_KEY(batch_size, T::kInt, G::kTraining, "sequences per training batch",
         Range(&Config::batch_size, "batch_size", 1, 65536));
  DS_KEY(buffer_size, T::kInt, G::kTraining, "shuffle buffer (sequences)",
         Range(&Config::buffer_size, "buffer_size", 1, 1e9));
  DS_KEY(seq_length, T::kInt, G::kTraining, "tokens per training sequence",
         Range(&Config::seq_length, "seq_length", 1, 100000));
  DS_KEY(embedding_dim, T::kInt, G::kTraining, "embedding width",
         Range(&Config::embedding_dim, "embedding_dim", 1, 65536));
  DS_KEY(rnn_units, T::kInt, G::kTraining, "LSTM units per layer",
         Range(&Config::rnn_units, "rnn_units", 1, 65536));
  DS_KEY(dropout_rate, T::kDouble, G::kTraining, "dropout after embedding and each LSTM layer",
         Range(&Config::dropout_rate, "dropout_rate", 0, 0.99));
  DS_KEY(learning_rate, T::kDouble, G::kTraining, "optimizer learning rate",
         Range(&Config::learning_rate, "learning_rate", 1e-12, 100));
  DS_KEY(rnn_initializer, T::kString, G::kTraining, "recurrent kernel init: glorot_uniform | orthogonal",
         OneOf(&Config::rnn_initializer, "rnn_initializer", {"glorot_uniform", "orthogonal"}));
  DS_KEY(validation_split, T::kBool, G::kTraining, "hold out every 5th batch for validation", nullptr);
  DS_KEY(max_lines, T::kInt64, G::kTraining, "read at most this many records (0 = all)",
         Range(&Config::max_lines, "max_lines", 0, 1e15));
  DS_KEY(max_training_time_seconds, T::kDouble, G::kTraining, "stop training after this time (0 = none)",
         Range(&Config::max_training_time_seconds, "max_training_time_seconds", 0, 1e9));
  DS_KEY(overwrite, T::kBool, G::kTraining, "replace an existing model in model_dir", nullptr);
  DS_KEY(save_all_checkpoints, T::kBool, G::kTraining, "keep the weights of every epoch", nullptr);
  DS_KEY(save_best_model, T::kBool, G::kTraining, "keep the best epoch's weights (else the last)",
         nullptr);
  DS_KEY(num_layers, T::kInt, G::kTraining, "LSTM layers", Range(&Config::num_layers, "num_layers", 1, 16));
  DS_KEY(optimizer, T::kString, G::kTraining, "rmsprop | adam",
         OneOf(&Config::optimizer, "optimizer", {"rmsprop", "adam"}));
  DS_KEY(seed, T::kInt64, G::kTraining, "random seed (0 = pick one; recorded in model_params.json)",
         Range(&Config::seed, "seed", 0, 9.2e18));
  DS_KEY(threads, T::kInt, G::kTraining, "compute threads (0 = all cores)",
         Range(&Config::threads, "threads", 0, 4096));
  DS_KEY(device, T::kString, G::kTraining, "auto | cpu | cuda (auto: CUDA when a usable GPU is present)",
         OneOf(&Config::device, "device", {"auto", "cpu", "cuda"}));
  DS_KEY(gpu_memory, T::kString, G::kTraining,
         "grow (take GPU memory on demand) | preallocate (reserve the limit up front)",
         OneOf(&Config::gpu_memory, "gpu_memory", {"grow", "preallocate"}));
  DS_KEY(gpu_memory_limit, T::kString, G::kTraining,
         "hard cap on this process's GPU memory: 4GiB, 512MiB, 25% (empty: none)", nullptr);
  // tokenizer
  DS_KEY(tokenizer, T::kString, G::kTokenizer,
         "sentencepiece | char | field (typed values; the default for CSV input)",
         OneOf(&Config::tokenizer, "tokenizer", {"sentencepiece", "char", "field"}));
  DS_KEY(vocab_size, T::kInt, G::kTokenizer, "SentencePiece vocabulary size (soft limit)",
         Range(&Config::vocab_size, "vocab_size", 8, 1000000));
  DS_KEY(character_coverage, T::kDouble, G::kTokenizer, "SentencePiece character coverage",
         Range(&Config::character_coverage, "character_coverage", 0.9, 1.0));
  DS_KEY(pretrain_sentence_count, T::kInt64, G::kTokenizer, "records used to train SentencePiece",
         Range(&Config::pretrain_sentence_count, "pretrain_sentence_count", 1, 1e12));
  DS_KEY(max_line_len, T::kInt, G::kTokenizer, "longest record (bytes) used for SentencePiece",
         Range(&Config::max_line_len, "max_line_len", 1, 1e9));
  DS_KEY(sp_model_type, T::kString, G::kTokenizer, "SentencePiece model: unigram | bpe",
         OneOf(&Config::sp_model_type, "sp_model_type", {"unigram", "bpe"}));
  DS_KEY(column_markers, T::kString, G::kTokenizer, "<colN> marker before each field: auto | on | off",
         OneOf(&Config::column_markers, "column_markers", {"auto", "on", "off"}));
  DS_KEY(field_delimiter, T::kString, G::kTokenizer, "CSV delimiter (empty: one text record per line)",
         nullptr);
  DS_KEY(field_delimiter_token, T::kString, G::kTokenizer, "token standing for the delimiter", nullptr);
  // privacy
  DS_KEY(dp, T::kBool, G::kPrivacy, "differentially private training (DP-SGD)", nullptr);
  DS_KEY(dp_noise_multiplier, T::kDouble, G::kPrivacy, "Gaussian noise std / clip",
         Range(&Config::dp_noise_multiplier, "dp_noise_multiplier", 0, 1e6));
  DS_KEY(dp_l2_norm_clip, T::kDouble, G::kPrivacy, "per-record gradient L2 clip",
         Range(&Config::dp_l2_norm_clip, "dp_l2_norm_clip", 1e-9, 1e9));
  DS_KEY(dp_microbatches, T::kInt, G::kPrivacy, "kept for compatibility (clipping is per record)",
         Range(&Config::dp_microbatches, "dp_microbatches", 1, 1e9));
  DS_KEY(dp_target_epsilon, T::kDouble, G::kPrivacy, "choose the noise to meet this epsilon (0 = off)",
         Range(&Config::dp_target_epsilon, "dp_target_epsilon", 0, 1e6));
  DS_KEY(dp_delta, T::kDouble, G::kPrivacy, "delta (0 = 1/records)", Range(&Config::dp_delta, "dp_delta", 0, 0.5));
  DS_KEY(dp_store_value_rules, T::kBool, G::kPrivacy,
         "under dp, also store category sets and min/max (they reveal exact values)", nullptr);
  DS_KEY(dp_deterministic_noise, T::kBool, G::kPrivacy,
         "TESTS ONLY: derive DP noise from the seed (gives no privacy)", nullptr);
  // generation
  DS_KEY(gen_temp, T::kDouble, G::kGeneration, "sampling temperature",
         Range(&Config::gen_temp, "gen_temp", 1e-6, 1e3));
  DS_KEY(gen_chars, T::kInt64, G::kGeneration, "cap on characters per record (0 = none)",
         Range(&Config::gen_chars, "gen_chars", 0, 1e12));
  DS_KEY(gen_lines, T::kInt64, G::kGeneration, "records to generate",
         Range(&Config::gen_lines, "gen_lines", 0, 1e15));
  DS_KEY(predict_batch_size, T::kInt, G::kGeneration, "records sampled side by side per worker",
         Range(&Config::predict_batch_size, "predict_batch_size", 1, 65536));
  DS_KEY(reset_states, T::kBool, G::kGeneration, "reset the LSTM state for each record", nullptr);
  DS_KEY(max_invalid, T::kInt64, G::kGeneration, "stop after this many invalid records",
         Range(&Config::max_invalid, "max_invalid", 0, 1e15));
  // field tokenizer (typed fields)
  DS_KEY(field_types, T::kString, G::kTokenizer,
         "column type overrides: \"col=integer;day=datetime:%d.%m.%Y\" (JSON: an object)",
         nullptr);
  DS_KEY(field_rare_count, T::kInt, G::kTokenizer,
         "field tokenizer: category values seen fewer times share one <other> token",
         Range(&Config::field_rare_count, "field_rare_count", 1, 1e9));
#undef DS_KEY
  return k;
}

Status ParseBool(const std::string& key, const std::string& v, bool* out) {
  if (v == "true" || v == "1" || v == "yes" || v == "on") {
    *out = true;
  } else if (v == "false" || v == "0" || v == "no" || v == "off") {
    *out = false;
  } else {
    return DS_ERR(kInvalidArgument, "config key '{}': '{}' is not a boolean (true/false)", key, v);
  }
  return Status::Ok();
}

template <typename I>
Status ParseInt(const std::string& key, const std::string& v, I* out) {
  I x{};
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty())
    return DS_ERR(kInvalidArgument, "config key '{}': '{}' is not an integer{}", key, v,
                  ec == std::errc::result_out_of_range ? " in range" : "");
  *out = x;
  return Status::Ok();
}

Status ParseDouble(const std::string& key, const std::string& v, double* out) {
  char* end = nullptr;
  errno = 0;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || errno == ERANGE || !std::isfinite(x))
    return DS_ERR(kInvalidArgument, "config key '{}': '{}' is not a number", key, v);
  *out = x;
  return Status::Ok();
}

}  // namespace

const std::vector<Config::Key>& Config::Keys() {
  static const std::vector<Key> keys = MakeKeys();
  return keys;
}

const Config::Key* Config::Find(const std::string& name) {
  for (const auto& k : Keys())
    if (k.name == name) return &k;
  return nullptr;
}

bool Config::IsExplicit(const std::string& key) const {
  for (const auto& k : explicit_keys)
    if (k == key) return true;
  return false;
}

Status Config::Set(const std::string& key, const std::string& value) {
  const Key* k = Find(key);
  if (!k) return DS_ERR(kInvalidArgument, "unknown config key '{}'", key);
  explicit_keys.push_back(key);
  void* f = k->field(*this);
  switch (k->type) {
    case Type::kBool: DS_RETURN_IF_ERROR(ParseBool(key, value, static_cast<bool*>(f))); break;
    case Type::kInt: DS_RETURN_IF_ERROR(ParseInt(key, value, static_cast<int*>(f))); break;
    case Type::kInt64: DS_RETURN_IF_ERROR(ParseInt(key, value, static_cast<int64_t*>(f))); break;
    case Type::kDouble: DS_RETURN_IF_ERROR(ParseDouble(key, value, static_cast<double*>(f))); break;
    case Type::kString:
      // Strings end up in model_params.json (JSON is UTF-8); JSON values already are.
      if (!IsValidUtf8(value))
        return DS_ERR(kInvalidArgument, "config key '{}': value is not valid UTF-8", key);
      *static_cast<std::string*>(f) = value;
      break;
  }
  return k->check ? k->check(*this) : Status::Ok();
}

Status Config::SetJson(const std::string& key, const Json& v) {
  const Key* k = Find(key);
  if (!k) return DS_ERR(kInvalidArgument, "unknown config key '{}'", key);
  explicit_keys.push_back(key);
  void* f = k->field(*this);
  auto wrong = [&](const char* want) {
    return DS_ERR(kInvalidArgument, "config key '{}': expected {}, got {}", key, want, v.dump());
  };
  switch (k->type) {
    case Type::kBool:
      if (!v.is_boolean()) return wrong("true or false");
      *static_cast<bool*>(f) = v.get<bool>();
      break;
    case Type::kInt:
    case Type::kInt64: {
      if (!v.is_number_integer()) {
        // Accept 5.0 but not 5.5.
        if (!v.is_number_float() || std::floor(v.get<double>()) != v.get<double>())
          return wrong("an integer");
      }
      double d = v.get<double>();
      double lim = k->type == Type::kInt ? double(std::numeric_limits<int>::max()) : 9.2e18;
      if (std::fabs(d) > lim) return wrong("an integer in range");
      if (k->type == Type::kInt)
        *static_cast<int*>(f) = v.is_number_integer() ? v.get<int>() : int(d);
      else
        *static_cast<int64_t*>(f) = v.is_number_integer() ? v.get<int64_t>() : int64_t(d);
      break;
    }
    case Type::kDouble:
      if (v.is_null() && key == "max_training_time_seconds") {
        *static_cast<double*>(f) = 0;
        break;
      }
      if (!v.is_number()) return wrong("a number");
      *static_cast<double*>(f) = v.get<double>();
      break;
    case Type::kString:
      if (v.is_null() && key == "field_delimiter") {
        static_cast<std::string*>(f)->clear();
        break;
      }
      if (v.is_object() && key == "field_types") {  // {"col": "type"} -> "col=type;..."
        std::string spec;
        for (auto it = v.begin(); it != v.end(); ++it) {
          if (!it.value().is_string()) return wrong("an object of column: type strings");
          spec += (spec.empty() ? "" : ";") + it.key() + "=" + it.value().get<std::string>();
        }
        *static_cast<std::string*>(f) = spec;
        break;
      }
      if (!v.is_string()) return wrong("a string");
      *static_cast<std::string*>(f) = v.get<std::string>();
      break;
  }
  return k->check ? k->check(*this) : Status::Ok();
}

Status Config::MergeJson(const Json& obj, const std::string& source) {
  if (!obj.is_object()) return DS_ERR(kInvalidArgument, "{}: expected a JSON object of config keys", source);
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    Status s = SetJson(it.key(), it.value());
    if (!s.ok()) return s.WithContext(source);
  }
  return Status::Ok();
}

Status Config::LoadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return DS_ERR(kNotFound, "{}: cannot open config file: {}", path, std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  Json j = Json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return DS_ERR(kInvalidArgument, "{}: not valid JSON", path);
  return MergeJson(j, path);
}

Status Config::Validate() const {
  for (const auto& k : Keys())
    if (k.check) DS_RETURN_IF_ERROR(k.check(*this));
  if (field_delimiter.size() > 1 && field_delimiter != "\\t" && field_delimiter != "tab")
    return DS_ERR(kInvalidArgument, "config key 'field_delimiter': '{}' must be one character",
                  field_delimiter);
  if (field_delimiter == "\"" || field_delimiter == "\n" || field_delimiter == "\r")
    return DS_ERR(kInvalidArgument, "config key 'field_delimiter': quote and newline are not allowed");
  if (!validation_split && (best_model_metric == "val_loss" || best_model_metric == "val_accuracy")) {
    // The reference falls back to the training metric; so do we (see Trainer).
  }
  return Status::Ok();
}

std::string Config::ValueString(const Key& k) const {
  void* f = k.field(const_cast<Config&>(*this));
  switch (k.type) {
    case Type::kBool: return *static_cast<bool*>(f) ? "true" : "false";
    case Type::kInt: return std::to_string(*static_cast<int*>(f));
    case Type::kInt64: return std::to_string(*static_cast<int64_t*>(f));
    case Type::kDouble: return fmt::format("{}", *static_cast<double*>(f));
    case Type::kString: return *static_cast<std::string*>(f);
  }
  return "";
}

nlohmann::json Config::ToJson() const {
  Json j = Json::object();
  for (const auto& k : Keys()) {
    void* f = k.field(const_cast<Config&>(*this));
    switch (k.type) {
      case Type::kBool: j[k.name] = *static_cast<bool*>(f); break;
      case Type::kInt: j[k.name] = *static_cast<int*>(f); break;
      case Type::kInt64: j[k.name] = *static_cast<int64_t*>(f); break;
      case Type::kDouble: j[k.name] = *static_cast<double*>(f); break;
      case Type::kString: j[k.name] = *static_cast<std::string*>(f); break;
    }
  }
  return j;
}

}  // namespace ds
