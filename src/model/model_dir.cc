#include "model/model_dir.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "io/csv.h"
#include "tokenize/field_tokenizer.h"
#include "util/fs.h"
#include "util/json_fields.h"

namespace ds {

using Json = nlohmann::json;

namespace {

const JsonFields<FileIdentity>& FileIdentityFields() {
  static const JsonFields<FileIdentity> fields = {
      JsonMember("path", &FileIdentity::path),
      JsonMember("dev", &FileIdentity::dev),
      JsonMember("ino", &FileIdentity::ino),
      JsonMember("mtime_ns", &FileIdentity::mtime_ns),
  };
  return fields;
}

}  // namespace

Json FileIdentityToJson(const FileIdentity& id) { return ToJsonFields(id, FileIdentityFields()); }

FileIdentity FileIdentityFromJson(const Json& j) {
  FileIdentity id;
  (void)ReadJsonFields(j, FileIdentityFields(), &id, "");  // only throws
  return id;
}

namespace {

// Checks of model_params.json's "datasynth" block as strict as those of
// training input: every error names the file and the key.
Status BadKey(const std::string& src, const char* key, const std::string& why) {
  return DS_ERR(kCorrupt, "{}: key 'datasynth.{}': {}", src, key, why);
}

Status CheckMetaDelimiter(const std::string& d, const std::string& src) {
  if (d.empty()) return Status::Ok();
  if (d.size() > 1)
    return BadKey(src, "delimiter",
                  fmt::format("'{}' is not one ASCII character (model edited or corrupted?)", d));
  auto r = ParseDelimiter(d);
  if (!r.ok()) return BadKey(src, "delimiter", std::string(r.status().message()));
  return Status::Ok();
}

Status CheckMetaValues(const ModelMeta& m, const std::string& src) {
  auto bad = [](int v, int hi) { return v < 1 || v > hi; };
  if (bad(m.spec.vocab_size, 10000000) || bad(m.spec.embedding_dim, 65536) ||
      bad(m.spec.rnn_units, 65536) || bad(m.spec.num_layers, 64))
    return DS_ERR(kCorrupt, "{}: network shape out of range", src);
  if (!(m.spec.dropout_rate >= 0 && m.spec.dropout_rate < 1))
    return BadKey(src, "network.dropout_rate", fmt::format("{} is not in [0, 1)", m.spec.dropout_rate));
  if (m.delimiter) {
    Status h = ValidateHeader(m.header, src + ": key 'datasynth.header'");
    if (!h.ok()) return DS_ERR(kCorrupt, "{}", h.message());
  } else if (!m.header.empty()) {
    return BadKey(src, "header", "a header without a delimiter");
  }
  if (m.records < 0) return BadKey(src, "records", "negative");
  if (m.tokens < 0) return BadKey(src, "tokens", "negative");
  if (m.epochs_run < 0) return BadKey(src, "epochs_run", "negative");
  if (m.best_epoch < 0 || m.best_epoch > m.epochs_run)
    return BadKey(src, "best_epoch", fmt::format("{} is not in [0, epochs_run {}]", m.best_epoch,
                                                 m.epochs_run));
  if (!std::isfinite(m.train_seconds) || m.train_seconds < 0)
    return BadKey(src, "train_seconds", "not a time");
  if (m.dp && !(std::isfinite(m.epsilon) && m.epsilon >= 0 && m.delta >= 0 && m.delta < 1))
    return BadKey(src, "epsilon", "not a privacy guarantee");
  // A plain file name inside the directory: never a path.
  if (m.weights_file.empty() || m.weights_file.size() > 64 ||
      m.weights_file.find_first_of("/\\") != std::string::npos || m.weights_file[0] == '.')
    return DS_ERR(kCorrupt, "{}: bad weights_file name '{}'", src, m.weights_file);
  return Status::Ok();
}

// model_params.json's "datasynth" block, one row per key (util/json_fields.h).
const JsonFields<NetworkSpec>& NetworkFields() {
  static const JsonFields<NetworkSpec> fields = {
      JsonMember("vocab_size", &NetworkSpec::vocab_size),
      JsonMember("embedding_dim", &NetworkSpec::embedding_dim),
      JsonMember("rnn_units", &NetworkSpec::rnn_units),
      JsonMember("num_layers", &NetworkSpec::num_layers),
      JsonMember("dropout_rate", &NetworkSpec::dropout_rate),
      // Absent in version 1 (every model then was an LSTM).
      {"architecture", JsonNeed::kOptional,
       [](const NetworkSpec& n) { return Json(ArchitectureName(n.architecture)); },
       [](const Json& j, NetworkSpec* n, const std::string& src) -> Status {
         const std::string arch = j.get<std::string>();
         Result<Architecture> a = ParseArchitecture(arch);
         if (!a.ok())
           return DS_ERR(kCorrupt, "{}: network architecture '{}' is not one of: lstm, gru", src,
                         arch);
         n->architecture = a.value();
         return Status::Ok();
       }},
  };
  return fields;
}

bool IsDp(const ModelMeta& m) { return m.dp; }

const JsonFields<ModelMeta>& MetaFields() {
  using M = ModelMeta;
  constexpr JsonNeed kOpt = JsonNeed::kOptional;
  static const JsonFields<ModelMeta> fields = {
      {"format_version", JsonNeed::kRequired, [](const M&) { return Json(kModelFormatVersion); },
       [](const Json& j, M* m, const std::string& src) -> Status {
         m->format_version = j.get<int>();
         if (m->format_version < 1 || m->format_version > kModelFormatVersion)
           return DS_ERR(kCorrupt,
                         "{}: model format version {} is not supported (this build reads 1 to {})",
                         src, m->format_version, kModelFormatVersion);
         return Status::Ok();
       }},
      JsonMember("datasynth_version", &M::datasynth_version, kOpt),
      {"network", JsonNeed::kRequired,
       [](const M& m) { return ToJsonFields(m.spec, NetworkFields()); },
       [](const Json& j, M* m, const std::string& src) -> Status {
         DS_RETURN_IF_ERROR(ReadJsonFields(j, NetworkFields(), &m->spec, src));
         if (m->format_version < 2 && m->spec.architecture != Architecture::kLstm)
           return DS_ERR(kCorrupt,
                         "{}: network architecture '{}' needs model format version 2 (the file "
                         "says {})",
                         src, ArchitectureName(m->spec.architecture), m->format_version);
         auto bad = [](int v, int hi) { return v < 1 || v > hi; };
         if (bad(m->spec.vocab_size, 10000000) || bad(m->spec.embedding_dim, 65536) ||
             bad(m->spec.rnn_units, 65536) || bad(m->spec.num_layers, 64))
           return DS_ERR(kCorrupt, "{}: network shape out of range", src);
         return Status::Ok();
       }},
      JsonMember("header", &M::header),
      {"delimiter", JsonNeed::kRequired,
       [](const M& m) { return Json(m.delimiter ? std::string(1, m.delimiter) : std::string()); },
       [](const Json& j, M* m, const std::string& src) -> Status {
         std::string d = j.get<std::string>();
         DS_RETURN_IF_ERROR(CheckMetaDelimiter(d, src));
         m->delimiter = d.empty() ? 0 : d[0];
         return Status::Ok();
       }},
      JsonMember("input_path", &M::input_path, kOpt),
      // Optional: models written before it, and stream inputs, have none.
      JsonOptional("input_file", &M::input_file, FileIdentityToJson, FileIdentityFromJson),
      JsonMember("records", &M::records, kOpt),
      JsonMember("tokens", &M::tokens, kOpt),
      JsonMember("epochs_run", &M::epochs_run, kOpt),
      JsonMember("best_epoch", &M::best_epoch, kOpt),
      JsonMember("best_metric", &M::best_metric, kOpt),
      JsonMember("train_seconds", &M::train_seconds, kOpt),
      JsonMember("stop_reason", &M::stop_reason, kOpt),
      JsonMember("device", &M::device, kOpt),
      {"precision", kOpt, [](const M& m) { return Json(m.precision); },
       [](const Json& j, M* m, const std::string& src) -> Status {
         m->precision = j.get<std::string>();  // absent in older models: fp32
         if (m->precision != "fp32" && m->precision != "bf16")
           return BadKey(src, "precision", fmt::format("'{}' is not fp32 or bf16", m->precision));
         return Status::Ok();
       }},
      {"loss", kOpt, [](const M& m) { return Json(m.loss); },
       [](const Json& j, M* m, const std::string& src) -> Status {
         m->loss = j.get<std::string>();  // absent in older models: full
         if (m->loss != "full" && m->loss != "legal")
           return BadKey(src, "loss", fmt::format("'{}' is not full or legal", m->loss));
         return Status::Ok();
       }},
      JsonMember("dp", &M::dp, kOpt),
      JsonMember("epsilon", &M::epsilon, JsonNeed::kRequired, IsDp),
      JsonMember("delta", &M::delta, JsonNeed::kRequired, IsDp),
      JsonMember("dp_unit", &M::dp_unit, kOpt, IsDp),
      JsonMember("weights_file", &M::weights_file, kOpt),
      JsonMember("weights_crc32", &M::weights_crc),
  };
  return fields;
}

}  // namespace

Json ModelMeta::ToJson() const { return ToJsonFields(*this, MetaFields()); }

Result<ModelMeta> ModelMeta::FromJson(const Json& j, const std::string& src) {
  ModelMeta m;
  try {
    if (!j.is_object()) return DS_ERR(kCorrupt, "{}: 'datasynth' block is not an object", src);
    DS_RETURN_IF_ERROR(ReadJsonFields(j, MetaFields(), &m, src));
  } catch (const Json::exception& e) {
    return DS_ERR(kCorrupt, "{}: malformed model metadata: {}", src, e.what());
  }
  DS_RETURN_IF_ERROR(CheckMetaValues(m, src));
  return m;
}

// The config keys against the key table (Config::Validate) and the metadata.
Status CheckParamsAgainstMeta(const Config& c, const ModelMeta& m, const std::string& src) {
  if (Status s = c.Validate(); !s.ok()) return DS_ERR(kCorrupt, "{}: {}", src, s.message());
  char d = 0;
  if (!c.field_delimiter.empty()) {
    DS_ASSIGN_OR_RETURN(d, ParseDelimiter(c.field_delimiter));
  }
  if (d != m.delimiter)
    return DS_ERR(kCorrupt,
                  "{}: config key 'field_delimiter' ({}) disagrees with key 'datasynth.delimiter' "
                  "({}) (model edited?)",
                  src, Json(c.field_delimiter).dump(),
                  Json(m.delimiter ? std::string(1, m.delimiter) : std::string()).dump());
  return Status::Ok();
}

bool LooksLikeModel(const std::string& dir) { return PathExists(dir + "/model_params.json"); }

bool IsModelDirectory(const std::string& dir) {
  // tabular.json: the spec file of src/tabular (a tabular model is a directory of
  // batch models described by it). checkpoint.json alone is no sign (a common name);
  // a training run writes model_params.json with its first checkpoint.
  for (const char* f : {"model_params.json", "tabular.json", kModelLockFile})
    if (PathExists(dir + "/" + f)) return true;
  return false;
}

Result<std::unique_ptr<DirLock>> LockModelDir(const std::string& dir) {
  if (dir.empty()) return DS_ERR(kInvalidArgument, "no model directory given (--model-dir)");
  return DirLock::Acquire(dir, kModelLockFile, "training into");
}

Status WriteModelParams(const std::string& dir, const Config& config, const ModelMeta& meta) {
  Json j = config.ToJson();
  j["datasynth"] = meta.ToJson();
  // Binds the tokenizer to this model (a tokenizer.json copied from another model
  // with the same vocabulary size would otherwise load and mistranslate every id).
  if (PathExists(dir + "/tokenizer.json")) {
    DS_ASSIGN_OR_RETURN(std::string tok, ReadFile(dir + "/tokenizer.json", 64 << 20));
    j["datasynth"]["tokenizer_crc32"] = Crc32(tok.data(), tok.size());
    // Field tokenizer: the column schema (types, precision, formats), for
    // readers of model_params.json; generation reads it from tokenizer.json.
    Json tj = Json::parse(tok, nullptr, false);
    if (tj.is_object() && tj.value("type", "") == "field" && tj.contains("field")) {
      Json schema = Json::array();
      for (const auto& c : tj["field"].value("columns", Json::array())) {
        Json e = Json::object();
        for (const char* k : {"name", "type", "decimals", "trim", "format", "constant"})
          if (c.contains(k)) e[k] = c[k];
        schema.push_back(std::move(e));
      }
      j["datasynth"]["schema"] = std::move(schema);
    }
  }
  // The copy guard (generate/copy_guard.h) is bound the same way.
  if (PathExists(dir + "/" + kCopyGuardFile)) {
    DS_ASSIGN_OR_RETURN(std::string g, ReadFile(dir + "/" + kCopyGuardFile));
    j["datasynth"]["copy_guard_crc32"] = Crc32(g.data(), g.size());
  }
  if (PathExists(dir + "/" + kPairTablesFile)) {
    DS_ASSIGN_OR_RETURN(std::string g, ReadFile(dir + "/" + kPairTablesFile, 256 << 20));
    j["datasynth"]["pair_tables_crc32"] = Crc32(g.data(), g.size());
  }
  return WriteFileAtomic(dir + "/model_params.json", j.dump(2) + "\n");
}

namespace {

// copy_guard.bin: optional (older models, --dp), but when model_params.json
// names one it must be there and be that file; one it does not name is refused.
Status LoadCopyGuard(const std::string& dir, const Json& crc, Model* model) {
  const std::string path = dir + "/" + kCopyGuardFile;
  const bool exists = PathExists(path);
  if (crc.is_null()) {
    if (exists)
      return DS_ERR(kCorrupt,
                    "{}: not named by model_params.json (copied from another model?); remove it "
                    "or retrain",
                    path);
    return Status::Ok();
  }
  if (!exists)
    return DS_ERR(kCorrupt, "{}: missing (model_params.json names a copy guard)", path);
  DS_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path, 8 * CopyGuard::kMaxRows + 64));
  if (!crc.is_number_unsigned() || crc.get<uint64_t>() != Crc32(bytes.data(), bytes.size()))
    return DS_ERR(kCorrupt,
                  "{}: does not belong to this model_params.json (checksum; copy guard from "
                  "another model?)",
                  path);
  DS_ASSIGN_OR_RETURN(model->copy_guard, CopyGuard::Parse(bytes, path));
  return Status::Ok();
}

// pair_tables.bin: bound like the copy guard, and its ranges to the tokenizer.
Status LoadPairTables(const std::string& dir, const Json& crc, Model* model) {
  const std::string path = dir + "/" + kPairTablesFile;
  const bool exists = PathExists(path);
  if (crc.is_null()) {
    if (exists)
      return DS_ERR(kCorrupt, "{}: not named by model_params.json (copied from another model?)",
                    path);
    return Status::Ok();
  }
  if (!exists)
    return DS_ERR(kCorrupt, "{}: missing (model_params.json names pair tables)", path);
  DS_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path, 256 << 20));
  if (!crc.is_number_unsigned() || crc.get<uint64_t>() != Crc32(bytes.data(), bytes.size()))
    return DS_ERR(kCorrupt, "{}: does not belong to this model_params.json (checksum)", path);
  const auto* ft = dynamic_cast<const FieldTokenizer*>(model->tokenizer.get());
  if (!ft) return DS_ERR(kCorrupt, "{}: pair tables need the field tokenizer", path);
  DS_ASSIGN_OR_RETURN(model->pair_tables, PairTables::Parse(bytes, path));
  return model->pair_tables->Check(*ft, path);
}

}  // namespace

Result<std::unique_ptr<Model>> LoadModel(const std::string& dir) {
  if (!PathExists(dir)) return DS_ERR(kNotFound, "{}: model directory does not exist", dir);
  std::string params_path = dir + "/model_params.json";
  if (!PathExists(params_path))
    return DS_ERR(kNotFound, "{}: not a trained model (no model_params.json)", dir);
  DS_ASSIGN_OR_RETURN(std::string text, ReadFile(params_path, 64 << 20));
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return DS_ERR(kCorrupt, "{}: not valid JSON", params_path);
  auto model = std::make_unique<Model>();
  model->dir = dir;
  if (!j.contains("datasynth")) return DS_ERR(kCorrupt, "{}: missing 'datasynth' block", params_path);
  DS_ASSIGN_OR_RETURN(model->meta, ModelMeta::FromJson(j["datasynth"], params_path));
  // Optional (models written before it existed have none); see WriteModelParams.
  const Json tokenizer_crc = j["datasynth"].value("tokenizer_crc32", Json());
  const Json guard_crc = j["datasynth"].value("copy_guard_crc32", Json());
  const Json pairs_crc = j["datasynth"].value("pair_tables_crc32", Json());
  j.erase("datasynth");
  if (Status st = model->config.MergeJson(j, params_path); !st.ok())
    return DS_ERR(kCorrupt, "{}", st.message());
  DS_RETURN_IF_ERROR(CheckParamsAgainstMeta(model->config, model->meta, params_path));
  const char* arch = ArchitectureName(model->meta.spec.architecture);
  if (model->config.architecture != arch)
    return DS_ERR(kCorrupt, "{}: config key 'architecture' is '{}' but the network is '{}'",
                  params_path, model->config.architecture, arch);

  DS_ASSIGN_OR_RETURN(model->tokenizer, LoadTokenizer(dir));
  if (!tokenizer_crc.is_null()) {
    DS_ASSIGN_OR_RETURN(std::string tok, ReadFile(dir + "/tokenizer.json", 64 << 20));
    if (!tokenizer_crc.is_number_unsigned() ||
        tokenizer_crc.get<uint64_t>() != Crc32(tok.data(), tok.size()))
      return DS_ERR(kCorrupt,
                    "{}/tokenizer.json: does not belong to this model_params.json (checksum; "
                    "tokenizer from another model?)",
                    dir);
  }
  if (model->tokenizer->vocab_size() != model->meta.spec.vocab_size)
    return DS_ERR(kCorrupt,
                  "{}: tokenizer has {} tokens but the network was trained for {} (tokenizer "
                  "from another model?)",
                  dir, model->tokenizer->vocab_size(), model->meta.spec.vocab_size);

  DS_ASSIGN_OR_RETURN(model->weights,
                      MappedTensorFile::Open(dir + "/" + model->meta.weights_file));
  ParamLayout layout = ParamLayout::For(model->meta.spec);
  DS_ASSIGN_OR_RETURN(model->params, model->weights->Section("params", layout.total));
  uint32_t crc = Crc32(model->params, layout.total * sizeof(float));
  if (crc != model->meta.weights_crc)
    return DS_ERR(kCorrupt, "{}/{}: does not belong to this model_params.json (checksum)", dir,
                  model->meta.weights_file);

  DS_RETURN_IF_ERROR(LoadCopyGuard(dir, guard_crc, model.get()));
  DS_RETURN_IF_ERROR(LoadPairTables(dir, pairs_crc, model.get()));
  std::string rules_path = dir + "/column_rules.json";
  if (PathExists(rules_path)) {
    DS_ASSIGN_OR_RETURN(std::string rules, ReadFile(rules_path, 256 << 20));
    model->column_rules = Json::parse(rules, nullptr, false);
    if (model->column_rules.is_discarded())
      return DS_ERR(kCorrupt, "{}: not valid JSON", rules_path);
  }
  return model;
}

}  // namespace ds
