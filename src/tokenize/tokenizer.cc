// Tokenizer front end: record encoding, training/loading dispatch, the
// incremental RecordDecoder, and the helpers shared by the implementations.
#include "tokenize/tokenizer.h"

#include <fmt/core.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "tokenize/field_tokenizer.h"
#include "tokenize/internal.h"
#include "util/fs.h"
#include "util/utf8.h"

namespace ds {

namespace tok_internal {

std::vector<std::string> SpecialNames(bool column_markers, int num_columns) {
  std::vector<std::string> names = {"<n>"};
  if (column_markers) {
    for (int k = 0; k < num_columns; ++k) names.push_back(fmt::format("<col{}>", k));
  } else {
    names.push_back("<d>");
  }
  return names;
}

TableTokenizer::TableTokenizer(bool column_markers, int num_columns)
    : column_markers_(column_markers),
      num_columns_(column_markers ? num_columns : 0),
      num_specials_(column_markers ? 1 + num_columns : 2) {
  texts_.assign(num_specials_, std::string());
  kinds_.assign(num_specials_, TokenKind::kColumn);
  kinds_[0] = TokenKind::kEndOfRecord;
  if (!column_markers_) kinds_[1] = TokenKind::kDelimiter;
}

const std::string& TableTokenizer::text(int id) const {
  static const std::string kEmpty;
  return id >= 0 && id < vocab_size() ? texts_[id] : kEmpty;
}

nlohmann::json TableTokenizer::CommonJson() const {
  nlohmann::json j;
  j["format"] = kFormatName;
  j["format_version"] = kFormatVersion;
  j["type"] = type();
  j["vocab_size"] = vocab_size();
  j["column_markers"] = column_markers_;
  j["num_columns"] = num_columns();
  j["specials"] = SpecialNames(column_markers_, num_columns_);
  return j;
}

const nlohmann::json& JsonField(const nlohmann::json& obj, const char* key,
                                const std::string& file) {
  if (!obj.is_object()) DS_THROW(kCorrupt, "{}: expected a JSON object around '{}'", file, key);
  auto it = obj.find(key);
  if (it == obj.end()) DS_THROW(kCorrupt, "{}: missing key '{}'", file, key);
  return *it;
}

int64_t JsonInt(const nlohmann::json& obj, const char* key, int64_t lo, int64_t hi,
                const std::string& file) {
  const auto& v = JsonField(obj, key, file);
  if (!v.is_number_integer()) DS_THROW(kCorrupt, "{}: '{}' must be an integer", file, key);
  // Unsigned values above INT64_MAX are out of any range we accept.
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    DS_THROW(kCorrupt, "{}: '{}' is out of range", file, key);
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    DS_THROW(kCorrupt, "{}: '{}' = {} is outside [{}, {}]", file, key, x, lo, hi);
  return x;
}

std::string JsonString(const nlohmann::json& obj, const char* key, const std::string& file) {
  const auto& v = JsonField(obj, key, file);
  if (!v.is_string()) DS_THROW(kCorrupt, "{}: '{}' must be a string", file, key);
  return v.get<std::string>();
}

bool JsonBool(const nlohmann::json& obj, const char* key, const std::string& file) {
  const auto& v = JsonField(obj, key, file);
  if (!v.is_boolean()) DS_THROW(kCorrupt, "{}: '{}' must be true or false", file, key);
  return v.get<bool>();
}

const nlohmann::json& JsonArray(const nlohmann::json& obj, const char* key, size_t max_size,
                                const std::string& file) {
  const auto& v = JsonField(obj, key, file);
  if (!v.is_array()) DS_THROW(kCorrupt, "{}: '{}' must be an array", file, key);
  if (v.size() > max_size)
    DS_THROW(kCorrupt, "{}: '{}' has {} entries (at most {})", file, key, v.size(), max_size);
  return v;
}

Result<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return DS_ERR(kNotFound, "{}: no such file", path);
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return DS_ERR(kIo, "{}: cannot stat: {}", path, ec.message());
  if (size > max_bytes)
    return DS_ERR(kCorrupt, "{}: {} bytes is larger than the limit {}", path, size, max_bytes);
  std::ifstream in(path, std::ios::binary);
  if (!in) return DS_ERR(kIo, "{}: cannot open for reading", path);
  std::string data(size, '\0');
  in.read(data.data(), static_cast<std::streamsize>(size));
  if (static_cast<size_t>(in.gcount()) != size) return DS_ERR(kIo, "{}: short read", path);
  return data;
}

// Atomic, fsynced, through a temp file created with O_EXCL|O_NOFOLLOW (util/fs.h): a
// file or symlink planted in the model directory is never followed.
Status WriteFile(const std::string& path, std::string_view data) {
  return WriteFileAtomic(path, data);
}

Result<std::vector<char32_t>> CheckRecords(const TokenizerConfig& config,
                                           const std::vector<std::vector<std::string>>& records) {
  std::vector<bool> ascii(128, false);
  std::set<char32_t> other;
  for (size_t r = 0; r < records.size(); ++r) {
    const auto& rec = records[r];
    if (rec.empty()) return DS_ERR(kInvalidInput, "training record {}: no fields", r + 1);
    if (config.column_markers && static_cast<int>(rec.size()) != config.num_columns)
      return DS_ERR(kInvalidInput, "training record {}: {} fields, expected {} (num_columns)",
                    r + 1, rec.size(), config.num_columns);
    for (size_t f = 0; f < rec.size(); ++f) {
      const std::string& s = rec[f];
      size_t pos = 0;
      while (pos < s.size()) {
        const auto b = static_cast<unsigned char>(s[pos]);
        if (b < 0x80) {
          ascii[b] = true;
          ++pos;
          continue;
        }
        char32_t cp;
        if (!NextCodePointStrict(s, &pos, &cp))
          return DS_ERR(kInvalidInput, "training record {}: field {}: invalid UTF-8 at byte {}",
                        r + 1, f + 1, pos);
        other.insert(cp);
      }
    }
  }
  std::vector<char32_t> chars;
  for (int c = 0; c < 128; ++c)
    if (ascii[c]) chars.push_back(static_cast<char32_t>(c));
  chars.insert(chars.end(), other.begin(), other.end());
  return chars;
}

int ParseSpVocabLimit(std::string_view message) {
  if (message.find("Vocabulary size too high") == std::string_view::npos) return -1;
  const size_t at = message.rfind("<= ");
  if (at == std::string_view::npos) return -1;
  int64_t v = 0;
  size_t i = at + 3;
  if (i >= message.size() || message[i] < '0' || message[i] > '9') return -1;
  for (; i < message.size() && message[i] >= '0' && message[i] <= '9'; ++i) {
    v = v * 10 + (message[i] - '0');
    if (v > INT32_MAX) return -1;
  }
  return static_cast<int>(v);
}

}  // namespace tok_internal

using namespace tok_internal;

Status Tokenizer::EncodeRecord(const std::vector<std::string>& fields,
                               std::vector<int32_t>* out) const {
  if (fields.empty()) return DS_ERR(kInvalidInput, "record has no fields");
  if (column_markers() && static_cast<int>(fields.size()) != num_columns())
    return DS_ERR(kInvalidInput, "record has {} fields, expected {}", fields.size(), num_columns());
  const size_t start = out->size();
  for (size_t f = 0; f < fields.size(); ++f) {
    if (column_markers()) {
      out->push_back(column_id(static_cast<int>(f)));
    } else if (f > 0) {
      out->push_back(delimiter_id());
    }
    Status s = EncodeField(fields[f], out);
    if (!s.ok()) {
      out->resize(start);
      return s.WithContext(fmt::format("field {}", f + 1));
    }
  }
  out->push_back(end_id());
  return Status::Ok();
}

Status Tokenizer::EncodePrefix(const std::vector<std::string>& fields,
                               std::vector<int32_t>* out) const {
  if (column_markers() && static_cast<int>(fields.size()) >= num_columns())
    return DS_ERR(kInvalidInput, "start has {} fields; with {} columns at most {} can be given",
                  fields.size(), num_columns(), num_columns() - 1);
  const size_t start = out->size();
  if (column_markers()) out->push_back(column_id(0));
  for (size_t f = 0; f < fields.size(); ++f) {
    Status s = EncodeField(fields[f], out);
    if (!s.ok()) {
      out->resize(start);
      return s.WithContext(fmt::format("field {}", f + 1));
    }
    out->push_back(column_markers() ? column_id(static_cast<int>(f) + 1) : delimiter_id());
  }
  return Status::Ok();
}

Result<std::unique_ptr<Tokenizer>> TrainTokenizer(
    const TokenizerConfig& config, const std::vector<std::vector<std::string>>& records) {
  if (config.type == "field") {
    if (config.header.empty())
      return DS_ERR(kInvalidArgument, "tokenizer 'field' needs delimited input (field_delimiter)");
    FieldTokenizerOptions fo;
    fo.rare_count = config.rare_count;
    fo.text_pieces = config.text_pieces;
    fo.field_types = config.field_types;
    fo.header_order = config.field_header_order;
    fo.relations = config.field_relations;
    DS_ASSIGN_OR_RETURN(auto ft, FieldTokenizer::Train(config.header, records, fo));
    return std::unique_ptr<Tokenizer>(std::move(ft));
  }
  if (config.type != "char" && config.type != "sentencepiece")
    return DS_ERR(kInvalidArgument,
                  "tokenizer type '{}': expected 'sentencepiece', 'char' or 'field'", config.type);
  if (config.column_markers && (config.num_columns < 1 || config.num_columns > kMaxColumns))
    return DS_ERR(kInvalidArgument, "column markers need num_columns in [1, {}], got {}",
                  kMaxColumns, config.num_columns);
  DS_ASSIGN_OR_RETURN(std::vector<char32_t> chars, CheckRecords(config, records));
  if (config.type == "char") return TrainChar(config, chars);
  return TrainSentencePiece(config, records, chars);
}

Result<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kJsonFile).string();
  DS_ASSIGN_OR_RETURN(std::string text, tok_internal::ReadFile(path, size_t(64) << 20));
  Result<std::unique_ptr<Tokenizer>> result = DS_ERR(kInternal, "unset");
  Status st = Capture([&]() -> Status {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      return DS_ERR(kCorrupt, "{}: not valid JSON: {}", path, e.what());
    }
    if (!j.is_object()) return DS_ERR(kCorrupt, "{}: not a JSON object", path);
    if (JsonString(j, "format", path) != kFormatName)
      return DS_ERR(kCorrupt, "{}: not a datasynth tokenizer file", path);
    const int64_t version = JsonInt(j, "format_version", 0, INT32_MAX, path);
    if (version != kFormatVersion)
      return DS_ERR(kCorrupt, "{}: format_version {} is not supported (this build reads {})", path,
                    version, kFormatVersion);
    const std::string type = JsonString(j, "type", path);
    if (type == "field") {
      const int64_t fvocab = JsonInt(j, "vocab_size", 1, INT32_MAX, path);
      DS_ASSIGN_OR_RETURN(auto ftok, FieldTokenizer::Load(j, path));
      if (ftok->vocab_size() != fvocab)
        return DS_ERR(kCorrupt, "{}: vocab_size {} does not match the vocabulary ({} ids)", path,
                      fvocab, ftok->vocab_size());
      result = std::move(ftok);
      return Status::Ok();
    }
    const bool markers = JsonBool(j, "column_markers", path);
    const int num_columns = static_cast<int>(JsonInt(j, "num_columns", 0, kMaxColumns, path));
    if (markers != (num_columns > 0))
      return DS_ERR(kCorrupt, "{}: column_markers {} does not agree with num_columns {}", path,
                    markers, num_columns);
    const auto& specials = JsonArray(j, "specials", size_t(kMaxColumns) + 2, path);
    if (specials != nlohmann::json(SpecialNames(markers, num_columns)))
      return DS_ERR(kCorrupt, "{}: 'specials' does not match the column settings", path);
    const int64_t vocab = JsonInt(j, "vocab_size", 1, INT32_MAX, path);
    Result<std::unique_ptr<Tokenizer>> tok = DS_ERR(kInternal, "unset");
    if (type == "char") {
      tok = LoadChar(j, markers, num_columns, path);
    } else if (type == "sentencepiece") {
      tok = LoadSentencePiece(j, markers, num_columns, dir);
    } else {
      return DS_ERR(kCorrupt, "{}: unknown tokenizer type '{}'", path, type);
    }
    if (!tok.ok()) return tok.status();
    if ((*tok)->vocab_size() != vocab)
      return DS_ERR(kCorrupt, "{}: vocab_size {} does not match the vocabulary ({} ids)", path,
                    vocab, (*tok)->vocab_size());
    result = std::move(tok);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return result;
}

void RecordDecoder::Reset() {
  fields_.clear();
  ids_.clear();
  error_.clear();
  chars_ = 0;
  done_ = false;
}

bool RecordDecoder::Push(int32_t id) {
  if (done_) Reset();
  if (tok_->decodes_records()) {
    if (tok_->kind(id) != TokenKind::kEndOfRecord) {
      ids_.push_back(id);  // chars() stays 0: gen_chars does not cut value records
      return false;
    }
    error_ = tok_->DecodeRecord(ids_, &fields_);
    done_ = true;
    return true;
  }
  switch (tok_->kind(id)) {
    case TokenKind::kText: {
      if (fields_.empty()) fields_.emplace_back();
      const std::string& t = tok_->text(id);
      fields_.back() += t;
      chars_ += CountCodePoints(t);
      return false;
    }
    case TokenKind::kDelimiter:
      if (fields_.empty()) fields_.emplace_back();  // the empty field 0 before it
      fields_.emplace_back();
      return false;
    case TokenKind::kColumn:
      // <col0> at the start opens field 0; any other marker opens a new field.
      if (fields_.empty() && tok_->column(id) != 0) fields_.emplace_back();
      fields_.emplace_back();
      return false;
    case TokenKind::kEndOfRecord:
      if (fields_.empty()) fields_.emplace_back();
      done_ = true;
      return true;
    case TokenKind::kUnused:
      return false;
  }
  return false;
}

}  // namespace ds
