#include "config/config.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "backend/device_allocator.h"
#include "io/csv.h"
#include "schema/column_type.h"
#include "util/utf8.h"

namespace ds {
namespace {

using Json = nlohmann::json;

void Ints(Config::Key& k, int64_t lo, int64_t hi) {
  k.has_range = true;
  k.imin = lo;
  k.imax = hi;
}
void Reals(Config::Key& k, double lo, double hi) {
  k.has_range = true;
  k.dmin = lo;
  k.dmax = hi;
}
void Choices(Config::Key& k, std::vector<std::string> c) { k.choices = std::move(c); }

Status CheckFieldDelimiter(const Config& c) {
  if (c.field_delimiter.empty()) return Status::Ok();
  auto d = ParseDelimiter(c.field_delimiter);
  if (!d.ok()) return DS_ERR(kInvalidArgument, "config key 'field_delimiter': {}", d.status().message());
  return Status::Ok();
}

Status CheckDelimiterToken(const Config& c) {
  const std::string& t = c.field_delimiter_token;
  if (t.empty() || t.size() > 64 || t.find_first_of("\r\n") != std::string::npos)
    return DS_ERR(kInvalidArgument,
                  "config key 'field_delimiter_token': must be 1 to 64 bytes without CR or LF");
  return Status::Ok();
}

// A path (the file is read when training starts: schema/public_schema.h).
Status CheckSchemaPath(const Config& c) {
  if (c.schema.size() > 4096 || c.schema.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos)
    return DS_ERR(kInvalidArgument, "config key 'schema': a file path without CR, LF or NUL");
  return Status::Ok();
}

Status CheckFieldTypes(const Config& c) { return ParseFieldTypes(c.field_types).status(); }

Status CheckGpuMemoryLimit(const Config& c) {
  if (c.gpu_memory_limit.empty()) return Status::Ok();
  // Syntax only here (a percentage needs the device: 1 TiB stands in for it).
  auto r = ParseMemoryLimit(c.gpu_memory_limit, size_t(1) << 40);
  if (!r.ok()) return DS_ERR(kInvalidArgument, "config key 'gpu_memory_limit': {}", r.status().message());
  return Status::Ok();
}

using KeyType = Config::Type;
using KeyGroup = Config::Group;
constexpr int64_t kIntMax = std::numeric_limits<int>::max();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Appends keys to the table in the order given (the order of `datasynth train --help`).
class KeyTable {
 public:
  explicit KeyTable(std::vector<Config::Key>* k) : k_(k) {}
  Config::Key& operator()(const char* name, KeyType type, KeyGroup group, const char* help,
                          std::function<void*(Config&)> field) {
    Config::Key key;
    key.name = name;
    key.type = type;
    key.group = group;
    key.help = help;
    key.field = std::move(field);
    k_->push_back(std::move(key));
    return k_->back();
  }

 private:
  std::vector<Config::Key>* k_;
};

#define DS_KEY(member, type, group, help) \
  add(#member, type, group, help, [](Config& c) -> void* { return &c.member; })

void AddTrainingKeys(KeyTable& add) {
  using T = KeyType;
  using G = KeyGroup;
  // training
  Ints(DS_KEY(epochs, T::kInt, G::kTraining, "training epochs"), 1, 1000000);
  DS_KEY(early_stopping, T::kBool, G::kTraining, "stop when best_model_metric stops improving");
  Ints(DS_KEY(early_stopping_patience, T::kInt, G::kTraining,
              "epochs without improvement before stopping"), 1, 1000000);
  Reals(DS_KEY(early_stopping_min_delta, T::kDouble, G::kTraining,
               "smallest change that counts as improvement"), 0, 1e12);
  Choices(DS_KEY(best_model_metric, T::kString, G::kTraining, "metric that picks the kept epoch"),
          {"val_loss", "loss", "accuracy", "val_accuracy"});
  Ints(DS_KEY(batch_size, T::kInt, G::kTraining, "sequences per training batch"), 1, 65536);
  Ints(DS_KEY(buffer_size, T::kInt, G::kTraining, "shuffle buffer (sequences)"), 1, 1000000000);
  Ints(DS_KEY(seq_length, T::kInt, G::kTraining, "tokens per training sequence"), 1, 100000);
  Ints(DS_KEY(embedding_dim, T::kInt, G::kTraining, "embedding width"), 1, 65536);
  Ints(DS_KEY(rnn_units, T::kInt, G::kTraining, "LSTM units per layer"), 1, 65536);
  Reals(DS_KEY(dropout_rate, T::kDouble, G::kTraining, "dropout after embedding and each LSTM layer"),
        0, 0.99);
  Reals(DS_KEY(learning_rate, T::kDouble, G::kTraining, "optimizer learning rate"), 1e-12, 100);
  Choices(DS_KEY(rnn_initializer, T::kString, G::kTraining, "recurrent kernel init"),
          {"glorot_uniform", "orthogonal"});
  DS_KEY(validation_split, T::kBool, G::kTraining, "hold out every 5th batch for validation");
  Ints(DS_KEY(max_lines, T::kInt64, G::kTraining, "read at most this many records (0 = all)"), 0,
       1000000000000000);
  Reals(DS_KEY(max_training_time_seconds, T::kDouble, G::kTraining,
               "stop training after this time (0 = none)"), 0, 1e9);
  Ints(DS_KEY(max_training_steps, T::kInt64, G::kTraining,
              "stop training after this many optimizer steps, all epochs and resumed sessions "
              "together (0 = none)"), 0, 1000000000000);
  DS_KEY(overwrite, T::kBool, G::kTraining, "replace an existing model in model_dir");
  DS_KEY(save_all_checkpoints, T::kBool, G::kTraining, "keep the weights of every epoch");
  DS_KEY(save_best_model, T::kBool, G::kTraining, "keep the best epoch's weights (else the last)");
  Ints(DS_KEY(num_layers, T::kInt, G::kTraining, "LSTM layers"), 1, 16);
  Choices(DS_KEY(architecture, T::kString, G::kTraining, "recurrent cell"), {"lstm", "gru"});
  Choices(DS_KEY(precision, T::kString, G::kTraining,
                 "GEMM precision (bf16: bf16 operands, fp32 accumulation and weights; auto, the "
                 "default: bf16 where the CPU has AVX512_BF16 or AMX, else fp32; fp32 on CUDA)"),
          {"fp32", "bf16", "auto"});
  Choices(DS_KEY(optimizer, T::kString, G::kTraining, "optimizer"), {"rmsprop", "adam"});
  Choices(DS_KEY(lr_schedule, T::kString, G::kTraining,
                 "learning rate schedule: constant, or plateau (reduce when the early-stopping "
                 "metric stops improving; the field tokenizer's default)"),
          {"constant", "plateau"});
  Ints(DS_KEY(lr_plateau_patience, T::kInt, G::kTraining,
              "plateau: epochs without improvement before the learning rate is reduced"), 0, 1000000);
  Reals(DS_KEY(lr_plateau_factor, T::kDouble, G::kTraining,
               "plateau: factor applied to the learning rate at each reduction"), 0.01, 0.99);
  Reals(DS_KEY(lr_min_ratio, T::kDouble, G::kTraining,
               "plateau: lowest learning rate, as a fraction of learning_rate"), 0, 1);
  DS_KEY(lr_plateau_restore, T::kBool, G::kTraining,
         "plateau: at a reduction from an epoch worse than the best by more than "
         "early_stopping_min_delta, continue from the best epoch's weights (needs "
         "save_best_model; the field tokenizer's default)");
  Ints(DS_KEY(seed, T::kInt64, G::kTraining,
              "random seed (0 = pick one; recorded in model_params.json)"), 0, kInt64Max);
  Ints(DS_KEY(threads, T::kInt, G::kTraining, "compute threads (0 = all cores)"), 0, 4096);
  Choices(DS_KEY(device, T::kString, G::kTraining, "compute device (auto: CUDA when a usable GPU is present)"),
          {"auto", "cpu", "cuda"});
  Choices(DS_KEY(gpu_memory, T::kString, G::kTraining,
                 "grow (take GPU memory on demand) or preallocate (reserve the limit up front)"),
          {"grow", "preallocate"});
  DS_KEY(gpu_memory_limit, T::kString, G::kTraining,
         "hard cap on this process's GPU memory: 4GiB, 512MiB, 25% (empty: none)")
      .extra = CheckGpuMemoryLimit;
  Ints(DS_KEY(mpi_shards, T::kInt, G::kTraining,
              "mpirun: each global batch is cut into this many fixed shards, summed exactly: the "
              "weights are the same for any number of ranks up to it (docs/scale.md)"),
       1, 65536);
}

void AddTokenizerKeys(KeyTable& add) {
  using T = KeyType;
  using G = KeyGroup;
  // tokenizer
  Choices(DS_KEY(tokenizer, T::kString, G::kTokenizer,
                 "tokenizer (field: typed values, the default for CSV input)"),
          {"sentencepiece", "char", "field"});
  Ints(DS_KEY(vocab_size, T::kInt, G::kTokenizer, "SentencePiece vocabulary size (soft limit)"), 8,
       1000000);
  Reals(DS_KEY(character_coverage, T::kDouble, G::kTokenizer, "SentencePiece character coverage"),
        0.9, 1.0);
  Ints(DS_KEY(pretrain_sentence_count, T::kInt64, G::kTokenizer, "records used to train SentencePiece"),
       1, 1000000000000);
  Ints(DS_KEY(max_line_len, T::kInt, G::kTokenizer, "longest record (bytes) used for SentencePiece"),
       1, 1000000000);
  Choices(DS_KEY(sp_model_type, T::kString, G::kTokenizer, "SentencePiece model"), {"unigram", "bpe"});
  Choices(DS_KEY(column_markers, T::kString, G::kTokenizer,
                 "<colN> marker before each field (auto: on for delimited data)"),
          {"auto", "on", "off"});
  DS_KEY(field_delimiter, T::kString, G::kTokenizer,
         "CSV delimiter: one ASCII character or tab, comma, semicolon, pipe, space (empty: one "
         "text record per line; a .csv/.tsv input defaults to , / tab)")
      .extra = CheckFieldDelimiter;
  DS_KEY(field_delimiter_token, T::kString, G::kTokenizer, "token standing for the delimiter")
      .extra = CheckDelimiterToken;
}

// Privacy, with the schema and calibration keys that DP runs lean on.
void AddPrivacyKeys(KeyTable& add) {
  using T = KeyType;
  using G = KeyGroup;
  // privacy
  DS_KEY(dp, T::kBool, G::kPrivacy, "differentially private training (DP-SGD)");
  Reals(DS_KEY(dp_noise_multiplier, T::kDouble, G::kPrivacy, "Gaussian noise std / clip"), 0, 1e6);
  Reals(DS_KEY(dp_l2_norm_clip, T::kDouble, G::kPrivacy, "per-record gradient L2 clip"), 1e-9, 1e9);
  Ints(DS_KEY(dp_microbatches, T::kInt, G::kPrivacy, "kept for compatibility (clipping is per record)"),
       1, 1000000000);
  Reals(DS_KEY(dp_target_epsilon, T::kDouble, G::kPrivacy,
               "choose the noise to meet this epsilon (0 = off)"), 0, 1e6);
  Reals(DS_KEY(dp_delta, T::kDouble, G::kPrivacy, "delta (0 = 1/records)"), 0, 0.5);
  DS_KEY(dp_store_value_rules, T::kBool, G::kPrivacy,
         "under dp, also store category sets and min/max (they reveal exact values)");
  DS_KEY(dp_deterministic_noise, T::kBool, G::kPrivacy,
         "TESTS ONLY: derive DP noise from the seed (gives no privacy)");
  Reals(DS_KEY(dp_marginal_share, T::kDouble, G::kPrivacy,
               "with calibrate: share of dp_target_epsilon spent on the measured marginals"),
        0.001, 0.9);
  Reals(DS_KEY(dp_bins_share, T::kDouble, G::kPrivacy,
               "with calibrate and a schema: share of the marginals' release spent choosing the "
               "numeric bins at noisy quantiles (0 = the schema's uniform bins; 0.1 under dp)"),
        0, 0.9);
  DS_KEY(schema, T::kString, G::kTokenizer,
         "public schema JSON for the field tokenizer (required for it under dp; "
         "`datasynth schema` writes a template)")
      .extra = CheckSchemaPath;
  DS_KEY(calibrate, T::kBool, G::kTraining,
         "after training, match the generated per-column marginals to the measured ones (the "
         "field tokenizer's default, with calibrate_pairs 3; also under dp)");
  Ints(DS_KEY(calibrate_pairs, T::kInt, G::kTraining,
              "calibrate: measure each column jointly with up to this many earlier columns and "
              "correct those pairs (pair_tables.bin; 0 = 1-way marginals only; 3 for the field "
              "tokenizer and under dp)"),
       0, 64);
  Ints(DS_KEY(calibrate_groups, T::kInt, G::kTraining,
              "calibrate_pairs: groups of values per column in a 2-way table"),
       2, 4096);
  Ints(DS_KEY(calibrate_iterations, T::kInt, G::kTraining,
              "calibrate: rounds of measuring the generated marginals and stepping towards the "
              "targets (4; 14 under dp)"),
       1, 200);
  DS_KEY(copy_guard, T::kBool, G::kPrivacy,
         "store hashes of rare training rows; generation rejects exact copies of them (not "
         "under dp)");
  Ints(DS_KEY(copy_guard_min_count, T::kInt, G::kPrivacy,
              "copy guard: rows seen fewer times in training are rare (1 = guard none)"),
       1, 1000000000);
}

// Generation, then the field tokenizer's keys.
void AddGenerationKeys(KeyTable& add) {
  using T = KeyType;
  using G = KeyGroup;
  // generation
  Reals(DS_KEY(gen_temp, T::kDouble, G::kGeneration, "sampling temperature"), 1e-6, 1e3);
  Ints(DS_KEY(gen_chars, T::kInt64, G::kGeneration, "cap on characters per record (0 = none)"), 0,
       1000000000000);
  Ints(DS_KEY(gen_lines, T::kInt64, G::kGeneration, "records to generate"), 0, 1000000000000);
  Ints(DS_KEY(predict_batch_size, T::kInt, G::kGeneration, "records sampled side by side per worker"),
       1, 65536);
  DS_KEY(reset_states, T::kBool, G::kGeneration, "reset the LSTM state for each record");
  Ints(DS_KEY(max_invalid, T::kInt64, G::kGeneration, "stop after this many invalid records"), 0,
       1000000000000000);
  // field tokenizer (typed fields)
  DS_KEY(field_types, T::kString, G::kTokenizer,
         "column type overrides: \"col=integer;day=datetime:%d.%m.%Y\" (JSON: an object)")
      .extra = CheckFieldTypes;
  Choices(DS_KEY(field_order, T::kString, G::kTokenizer,
                 "field tokenizer: column generation order (auto: fewest distinct values first)"),
          {"auto", "header"});
  DS_KEY(field_relations, T::kBool, G::kTokenizer,
         "field tokenizer: learn order relations between numeric (or date) columns (a <= b on every "
         "training row) and keep them in generation");
  Ints(DS_KEY(field_rare_count, T::kInt, G::kTokenizer,
              "field tokenizer: category values seen fewer times share one <other> token"),
       1, 1000000000);
  Ints(DS_KEY(field_text_pieces, T::kInt, G::kTokenizer,
              "field tokenizer: sub-word pieces per open free-text column (0: characters only)"),
       0, 65536);
}
#undef DS_KEY

std::vector<Config::Key> MakeKeys() {
  std::vector<Config::Key> k;
  k.reserve(64);
  KeyTable add(&k);
  AddTrainingKeys(add);
  AddTokenizerKeys(add);
  AddPrivacyKeys(add);
  AddGenerationKeys(add);
  for (const auto& key : k)  // an int key's range must fit an int (no wrap-around)
    DS_CHECK(key.type != KeyType::kInt || (key.imin >= -kIntMax && key.imax <= kIntMax));
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

std::string Num(double v) { return fmt::format("{}", v); }

Status OutOfRange(const Config::Key& k, const std::string& shown) {
  return DS_ERR(kInvalidArgument, "config key '{}': value {} out of range {}", k.name, shown,
                k.RangeText());
}

// An integer value against the key's range, before it is stored (so an int
// field never receives a value it cannot hold).
Status CheckInt(const Config::Key& k, int64_t v) {
  if (k.has_range && (v < k.imin || v > k.imax)) return OutOfRange(k, std::to_string(v));
  return Status::Ok();
}

Status CheckReal(const Config::Key& k, double v) {
  if (!std::isfinite(v))
    return DS_ERR(kInvalidArgument, "config key '{}': value {} is not a finite number", k.name, v);
  if (k.has_range && !(v >= k.dmin && v <= k.dmax)) return OutOfRange(k, Num(v));
  return Status::Ok();
}

void StoreInt(const Config::Key& k, void* f, int64_t v) {
  if (k.type == Config::Type::kInt)
    *static_cast<int*>(f) = static_cast<int>(v);  // in range: CheckInt ran (ints' ranges fit)
  else
    *static_cast<int64_t*>(f) = v;
}

Result<int64_t> ParseInt(const Config::Key& k, const std::string& v) {
  int64_t x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec == std::errc::result_out_of_range && p == v.data() + v.size()) return OutOfRange(k, v);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty())
    return DS_ERR(kInvalidArgument, "config key '{}': '{}' is not an integer", k.name, v);
  DS_RETURN_IF_ERROR(CheckInt(k, x));
  return x;
}

Result<double> ParseDouble(const Config::Key& k, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || std::isspace(static_cast<unsigned char>(v[0])))
    return DS_ERR(kInvalidArgument, "config key '{}': '{}' is not a number", k.name, v);
  if (!std::isfinite(x) || errno == ERANGE)
    return DS_ERR(kInvalidArgument, "config key '{}': '{}' is not a finite number in range {}",
                  k.name, v, k.RangeText());
  DS_RETURN_IF_ERROR(CheckReal(k, x));
  return x;
}

// A JSON number for an integer key: 5 and 5.0, not 5.5; never wrapped.
Result<int64_t> JsonInt(const Config::Key& k, const Json& v) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    return OutOfRange(k, v.dump());
  if (v.is_number_integer()) {
    int64_t x = v.get<int64_t>();
    DS_RETURN_IF_ERROR(CheckInt(k, x));
    return x;
  }
  if (!v.is_number_float() || std::floor(v.get<double>()) != v.get<double>())
    return DS_ERR(kInvalidArgument, "config key '{}': expected an integer, got {}", k.name, v.dump());
  const double d = v.get<double>();
  if (!(std::fabs(d) < 9.2e18)) return OutOfRange(k, v.dump());
  DS_RETURN_IF_ERROR(CheckInt(k, int64_t(d)));
  return int64_t(d);
}

}  // namespace

std::string Config::Key::RangeText() const {
  if (!choices.empty()) {
    std::string list;
    for (const auto& a : choices) list += (list.empty() ? "" : ", ") + a;
    return list;
  }
  if (!has_range) return "";
  if (is_integer()) return fmt::format("[{}, {}]", imin, imax);
  return fmt::format("[{}, {}]", Num(dmin), Num(dmax));
}

Status Config::Key::Check(const Config& c) const {
  void* f = field(const_cast<Config&>(c));
  switch (type) {
    case Type::kBool: break;
    case Type::kInt: DS_RETURN_IF_ERROR(CheckInt(*this, *static_cast<const int*>(f))); break;
    case Type::kInt64: DS_RETURN_IF_ERROR(CheckInt(*this, *static_cast<const int64_t*>(f))); break;
    case Type::kDouble: DS_RETURN_IF_ERROR(CheckReal(*this, *static_cast<const double*>(f))); break;
    case Type::kString: {
      const std::string& v = *static_cast<const std::string*>(f);
      if (!choices.empty() && std::find(choices.begin(), choices.end(), v) == choices.end())
        return DS_ERR(kInvalidArgument, "config key '{}': '{}' is not one of: {}", name, v,
                      RangeText());
      break;
    }
  }
  return extra ? extra(c) : Status::Ok();
}

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
  void* f = k->field(*this);
  switch (k->type) {
    case Type::kBool: DS_RETURN_IF_ERROR(ParseBool(key, value, static_cast<bool*>(f))); break;
    case Type::kInt:
    case Type::kInt64: {
      DS_ASSIGN_OR_RETURN(int64_t x, ParseInt(*k, value));
      StoreInt(*k, f, x);
      break;
    }
    case Type::kDouble: {
      DS_ASSIGN_OR_RETURN(double x, ParseDouble(*k, value));
      *static_cast<double*>(f) = x;
      break;
    }
    case Type::kString:
      // Strings end up in model_params.json (JSON is UTF-8); JSON values already are.
      if (!IsValidUtf8(value))
        return DS_ERR(kInvalidArgument, "config key '{}': value is not valid UTF-8", key);
      *static_cast<std::string*>(f) = value;
      break;
  }
  DS_RETURN_IF_ERROR(k->Check(*this));
  explicit_keys.push_back(key);
  return Status::Ok();
}

Status Config::SetJson(const std::string& key, const Json& v) {
  const Key* k = Find(key);
  if (!k) return DS_ERR(kInvalidArgument, "unknown config key '{}'", key);
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
      if (!v.is_number()) return wrong("an integer");
      DS_ASSIGN_OR_RETURN(int64_t x, JsonInt(*k, v));
      StoreInt(*k, f, x);
      break;
    }
    case Type::kDouble:
      if (v.is_null() && key == "max_training_time_seconds") {
        *static_cast<double*>(f) = 0;
        break;
      }
      if (!v.is_number()) return wrong("a number");
      DS_RETURN_IF_ERROR(CheckReal(*k, v.get<double>()));
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
  DS_RETURN_IF_ERROR(k->Check(*this));
  explicit_keys.push_back(key);
  return Status::Ok();
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
  for (const auto& k : Keys()) DS_RETURN_IF_ERROR(k.Check(*this));
  // !validation_split with a val_* best_model_metric: the reference falls back
  // to the training metric; so does the Trainer.
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
