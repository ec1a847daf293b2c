// SentencePiece tokenizer (unigram or BPE, libsentencepiece 0.1.97).
//
// Policy:
//  * Specials (<n>, <d>, <colK>) live outside SentencePiece: fields are encoded
//    one at a time, so no piece crosses a field boundary and field text such as
//    "<d>" is ordinary text. SP is trained with only <unk> as a meta piece
//    (bos/eos/pad off); <unk> gets no datasynth id (text needing it is an
//    error naming the character). Id of SP piece p >= 1: S + p - 1.
//  * Exact round trip: normalization "identity", add_dummy_prefix off,
//    remove_extra_whitespaces off, byte_fallback off; ' ' is SP's U+2581 meta
//    symbol and maps back to ' ' in text(id). Characters SP would mangle or
//    reserves (C0/C1 controls incl. \n \r \t, DEL, U+2580..U+259F which hold
//    SP's meta symbols, U+2028/9, U+FEFF, U+FFFD) are replaced before SP by
//    private-use code points absent from the training text ("escapes", saved
//    in tokenizer.json) and mapped back in text(id). A literal escape target in
//    later input was never seen in training, so it is an error.
//  * Training sentences are the non-empty fields of the records (in memory,
//    SentenceIterator; no temporary files). pretrain_sentence_count caps the
//    number of RECORDS used: a seeded sample (Philox), plus every further
//    record that holds a character the sample lacks, so that with
//    character_coverage 1.0 every training record stays encodable.
//  * max_line_len: a record whose text (fields plus one byte per separator)
//    is longer than max_line_len bytes is an error (kInvalidInput naming the
//    record): raise max_line_len or drop the record. SP's own
//    max_sentence_length is set above the longest sentence so that SP never
//    skips one silently.
//  * vocab_size is a soft limit on the whole vocabulary (specials included):
//    hard_vocab_limit=false, and a "vocabulary size too high" failure is
//    retried with the size SP reports as possible.
//  * Deterministic: num_threads 2, no input shuffling by SP, the random
//    generator seeded from config.seed; the same records give the same model.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "tokenize/internal.h"
#include "util/rng.h"
#include "util/utf8.h"

namespace ds::tok_internal {
namespace {

constexpr char32_t kSpaceMeta = 0x2581;  // SP's whitespace symbol

bool NeedsEscape(char32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || (cp >= 0x2580 && cp <= 0x259F) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF || cp == 0xFFFD;
}

bool IsPrivateUse(char32_t cp) {
  return (cp >= 0xE000 && cp <= 0xF8FF) || (cp >= 0xF0000 && cp <= 0xFFFFD) ||
         (cp >= 0x100000 && cp <= 0x10FFFD);
}

uint32_t Crc32(std::string_view data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  size_t pos = 0;
  while (pos < data.size()) {
    const uInt n = static_cast<uInt>(std::min<size_t>(data.size() - pos, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data() + pos), n);
    pos += n;
  }
  return static_cast<uint32_t>(crc);
}

class SpTokenizer final : public TableTokenizer {
 public:
  SpTokenizer(bool markers, int num_columns) : TableTokenizer(markers, num_columns) {}

  // Loads the model and builds the id tables. Errors are kCorrupt naming
  // `where` (a loaded file) or kInternal for a freshly trained model.
  Status Init(std::string model_proto, std::string model_type,
              std::vector<std::pair<char32_t, char32_t>> escapes, const std::string& where,
              Code code) {
    model_proto_ = std::move(model_proto);
    model_type_ = std::move(model_type);
    escapes_ = std::move(escapes);
    std::unordered_map<char32_t, char32_t> unescape;  // target -> original
    for (auto [from, to] : escapes_) {
      if (!NeedsEscape(from) || !IsPrivateUse(to) || escape_of_.count(from) || unescape.count(to))
        return Status(code,
                      fmt::format("{}: invalid escape U+{:04X} -> U+{:04X}", where, uint32_t(from),
                                  uint32_t(to)),
                      __FILE__, __LINE__);
      escape_of_[from] = to;
      unescape[to] = from;
    }
    sentencepiece::util::Status st;
    try {
      st = sp_.LoadFromSerializedProto(model_proto_);
    } catch (const std::exception& e) {
      // SentencePiece throws on some malformed models (e.g. an empty piece: "failed
      // to insert key: zero-length key" from its trie builder); found by fuzzing.
      return Status(code, fmt::format("{}: not a SentencePiece model: {}", where, e.what()),
                    __FILE__, __LINE__);
    }
    if (!st.ok())
      return Status(code, fmt::format("{}: not a SentencePiece model: {}", where, st.ToString()),
                    __FILE__, __LINE__);
    const int pieces = sp_.GetPieceSize();
    if (pieces < 1 || sp_.unk_id() != 0 || sp_.bos_id() != -1 || sp_.eos_id() != -1 ||
        sp_.pad_id() != -1)
      return Status(
          code,
          fmt::format("{}: SentencePiece model has an unexpected special-piece layout", where),
          __FILE__, __LINE__);
    for (int p = 1; p < pieces; ++p) {
      if (sp_.IsUnknown(p) || sp_.IsControl(p) || sp_.IsUnused(p) || sp_.IsByte(p))
        return Status(code,
                      fmt::format("{}: SentencePiece piece {} is not a normal piece", where, p),
                      __FILE__, __LINE__);
      const std::string& piece = sp_.IdToPiece(p);
      std::string text;
      size_t pos = 0;
      size_t n = 0;
      char32_t cp = 0, last = 0;
      while (pos < piece.size()) {
        if (!NextCodePointStrict(piece, &pos, &cp))
          return Status(code,
                        fmt::format("{}: SentencePiece piece {} is not valid UTF-8", where, p),
                        __FILE__, __LINE__);
        if (cp == kSpaceMeta) {
          last = ' ';
        } else if (auto it = unescape.find(cp); it != unescape.end()) {
          last = it->second;
        } else if (NeedsEscape(cp)) {
          return Status(code,
                        fmt::format("{}: SentencePiece piece {} holds an unescaped U+{:04X}", where,
                                    p, uint32_t(cp)),
                        __FILE__, __LINE__);
        } else {
          last = cp;
        }
        AppendCodePoint(&text, last);
        ++n;
      }
      if (text.empty())
        return Status(code, fmt::format("{}: SentencePiece piece {} is empty", where, p), __FILE__,
                      __LINE__);
      if (n == 1) known_chars_.insert(last);
      AddText(std::move(text));
    }
    return Status::Ok();
  }

  std::string type() const override { return "sentencepiece"; }

  Status EncodeField(std::string_view field, std::vector<int32_t>* out) const override {
    if (field.empty()) return Status::Ok();
    // Escape into the text SP was trained on.
    std::string mapped;
    mapped.reserve(field.size() + 8);
    size_t pos = 0;
    while (pos < field.size()) {
      const auto b = static_cast<unsigned char>(field[pos]);
      if (b >= 0x20 && b < 0x7F) {
        mapped.push_back(static_cast<char>(b));
        ++pos;
        continue;
      }
      const size_t at = pos;
      char32_t cp;
      if (!NextCodePointStrict(field, &pos, &cp))
        return DS_ERR(kInvalidInput, "invalid UTF-8 at byte {}", at);
      if (NeedsEscape(cp)) {
        auto it = escape_of_.find(cp);
        if (it == escape_of_.end()) return Unseen(cp, at);
        AppendCodePoint(&mapped, it->second);
      } else if (IsPrivateUse(cp) && IsTarget(cp)) {
        return Unseen(cp, at);
      } else {
        mapped.append(field.substr(at, pos - at));
      }
    }
    std::vector<int> ids;
    sentencepiece::util::Status st;
    try {
      st = sp_.Encode(mapped, &ids);
    } catch (const std::exception& e) {
      return DS_ERR(kInternal, "SentencePiece encode failed: {}", e.what());
    }
    if (!st.ok()) return DS_ERR(kInternal, "SentencePiece encode failed: {}", st.ToString());
    const int pieces = sp_.GetPieceSize();
    for (int id : ids) {
      if (id <= 0 || id >= pieces) return UnknownIn(field);
    }
    const int base = num_specials() - 1;
    for (int id : ids) out->push_back(base + id);
    return Status::Ok();
  }

  Status Save(const std::string& dir) const override {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return DS_ERR(kIo, "{}: cannot create directory: {}", dir, ec.message());
    const std::filesystem::path d(dir);
    DS_RETURN_IF_ERROR(WriteFile((d / kModelFile).string(), model_proto_));
    nlohmann::json j = CommonJson();
    nlohmann::json esc = nlohmann::json::array();
    for (auto [from, to] : escapes_) esc.push_back({uint32_t(from), uint32_t(to)});
    j["sentencepiece"] = {
        {"model_file", kModelFile},
        {"model_bytes", model_proto_.size()},
        {"model_crc32", Crc32(model_proto_)},
        {"model_type", model_type_},
        {"num_pieces", sp_.GetPieceSize()},
        {"escapes", std::move(esc)},
        {"id_layout", "id = num_specials + sp_piece_id - 1; sp piece 0 (<unk>) has no id"},
    };
    if (!training_.is_null()) j["training"] = training_;
    return WriteFile((d / kJsonFile).string(), j.dump(1) + "\n");
  }

  void set_training(nlohmann::json t) { training_ = std::move(t); }

 private:
  bool IsTarget(char32_t cp) const {
    for (auto [from, to] : escapes_)
      if (to == cp) return true;
    return false;
  }
  static Status Unseen(char32_t cp, size_t at) {
    return DS_ERR(kInvalidInput,
                  "character {} at byte {} was not seen in training (SentencePiece vocabulary)",
                  DescribeCodePoint(cp), at);
  }
  // SP produced <unk>: name the first character no single piece covers.
  Status UnknownIn(std::string_view field) const {
    size_t pos = 0;
    while (pos < field.size()) {
      const size_t at = pos;
      char32_t cp;
      if (!NextCodePointStrict(field, &pos, &cp)) break;
      if (!known_chars_.count(cp)) return Unseen(cp, at);
    }
    return DS_ERR(kInvalidInput,
                  "text cannot be encoded with the SentencePiece vocabulary (unknown piece)");
  }

  std::string model_proto_;  // serialized SP ModelProto (tokenizer.model)
  std::string model_type_;   // "unigram" or "bpe"
  std::vector<std::pair<char32_t, char32_t>> escapes_;  // (original, private-use stand-in)
  std::unordered_map<char32_t, char32_t> escape_of_;    // original -> stand-in
  std::unordered_set<char32_t> known_chars_;            // characters with a one-char piece
  nlohmann::json training_;                             // informational: the training config
  sentencepiece::SentencePieceProcessor sp_;
};

class VectorIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit VectorIterator(const std::vector<std::string>& v) : v_(v) {}
  bool done() const override { return i_ >= v_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return v_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& v_;
  size_t i_ = 0;
};

std::mutex& TrainMutex() {  // SP training uses process-global state (seed, log level)
  static std::mutex m;
  return m;
}

// Indices of the records SP trains on (see the policy above).
std::vector<size_t> SelectRecords(const TokenizerConfig& config,
                                  const std::vector<std::vector<std::string>>& records) {
  const size_t n = records.size();
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), size_t(0));
  const size_t cap = static_cast<size_t>(config.pretrain_sentence_count);
  if (n <= cap) return idx;
  Philox rng(config.seed, /*stream=*/0x746f6b656e697a65ull);  // "tokenize"
  for (size_t i = 0; i < cap; ++i) std::swap(idx[i], idx[i + rng.Below(n - i)]);
  std::vector<bool> chosen(n, false);
  std::unordered_set<char32_t> seen;
  auto add_chars = [&](size_t r, bool only_if_new) {
    bool fresh = false;
    for (const auto& f : records[r]) {
      size_t pos = 0;
      char32_t cp;
      while (NextCodePointStrict(f, &pos, &cp)) fresh |= seen.insert(cp).second;
    }
    return !only_if_new || fresh;
  };
  for (size_t i = 0; i < cap; ++i) {
    chosen[idx[i]] = true;
    add_chars(idx[i], false);
  }
  for (size_t r = 0; r < n; ++r)
    if (!chosen[r] && add_chars(r, true)) chosen[r] = true;
  std::vector<size_t> out;
  for (size_t r = 0; r < n; ++r)
    if (chosen[r]) out.push_back(r);
  return out;
}

int SpecialCount(const TokenizerConfig& config) {
  return config.column_markers ? 1 + config.num_columns : 2;
}

// The settings and the records' lengths; returns the number of SentencePiece
// pieces wanted (specials excluded, <unk> included).
Result<int64_t> CheckSpTraining(const TokenizerConfig& config,
                                const std::vector<std::vector<std::string>>& records) {
  if (config.sp_model_type != "unigram" && config.sp_model_type != "bpe")
    return DS_ERR(kInvalidArgument, "sp_model_type '{}': expected 'unigram' or 'bpe'",
                  config.sp_model_type);
  if (!(config.character_coverage > 0.0 && config.character_coverage <= 1.0))
    return DS_ERR(kInvalidArgument, "character_coverage {} must be in (0, 1]",
                  config.character_coverage);
  if (config.pretrain_sentence_count < 1)
    return DS_ERR(kInvalidArgument, "pretrain_sentence_count {} must be positive",
                  config.pretrain_sentence_count);
  if (config.max_line_len < 1)
    return DS_ERR(kInvalidArgument, "max_line_len {} must be positive", config.max_line_len);
  const int specials = SpecialCount(config);
  // Our vocabulary = specials + SP pieces - 1 (<unk> has no id).
  const int64_t sp_vocab = int64_t(config.vocab_size) - specials + 1;
  if (sp_vocab < 2)
    return DS_ERR(kInvalidArgument,
                  "vocab_size {} leaves no room for text tokens after {} special tokens",
                  config.vocab_size, specials);
  for (size_t r = 0; r < records.size(); ++r) {
    size_t len = records[r].size() - 1;
    for (const auto& f : records[r]) len += f.size();
    if (len > size_t(config.max_line_len))
      return DS_ERR(
          kInvalidInput,
          "training record {}: {} bytes is longer than max_line_len {} (raise max_line_len or drop "
          "the record)",
          r + 1, len, config.max_line_len);
  }
  return sp_vocab;
}

// Escapes: each character SP must not see gets an unused private-use stand-in.
Status AssignEscapes(const std::vector<char32_t>& chars,
                     std::vector<std::pair<char32_t, char32_t>>* escapes,
                     std::unordered_map<char32_t, char32_t>* escape_of) {
  std::unordered_set<char32_t> present(chars.begin(), chars.end());
  char32_t next = 0xE000;
  auto advance = [&]() {
    while (present.count(next) || !IsPrivateUse(next)) {
      ++next;
      if (next == 0xF900) next = 0xF0000;
      if (next == 0xFFFFE) next = 0x100000;
      if (next > 0x10FFFD)
        DS_THROW(kInvalidInput, "no unused private-use code points left for escapes");
    }
  };
  return Capture([&] {
    for (char32_t cp : chars) {
      if (!NeedsEscape(cp)) continue;
      advance();
      escapes->emplace_back(cp, next);
      (*escape_of)[cp] = next;
      ++next;
    }
  });
}

// The training sentences: the non-empty fields of the selected records,
// escaped; *longest = the longest in bytes, *code_points = their code points.
std::vector<std::string> SpSentences(const TokenizerConfig& config,
                                     const std::vector<std::vector<std::string>>& records,
                                     const std::unordered_map<char32_t, char32_t>& escape_of,
                                     size_t* longest, int64_t* code_points) {
  std::vector<std::string> sentences;
  for (size_t r : SelectRecords(config, records)) {
    for (const auto& f : records[r]) {
      if (f.empty()) continue;
      std::string s;
      s.reserve(f.size());
      size_t pos = 0;
      char32_t cp;
      while (NextCodePointStrict(f, &pos, &cp)) {
        ++*code_points;
        auto it = escape_of.find(cp);
        AppendCodePoint(&s, it == escape_of.end() ? cp : it->second);
      }
      *longest = std::max(*longest, s.size());
      sentences.push_back(std::move(s));
    }
  }
  return sentences;
}

// Runs SentencePiece's trainer for `want` pieces (fewer when the data
// supports fewer: SP's soft limit); returns the model proto.
Result<std::string> RunSpTrainer(const TokenizerConfig& config,
                                 const std::vector<std::string>& sentences, size_t longest,
                                 int64_t want) {
  std::unordered_map<std::string, std::string> kw = {
      {"model_type", config.sp_model_type},
      {"character_coverage", fmt::format("{}", config.character_coverage)},
      {"hard_vocab_limit", "false"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"split_by_whitespace", "true"},
      {"max_sentencepiece_length", "16"},
      {"byte_fallback", "false"},
      {"unk_id", "0"},
      {"bos_id", "-1"},
      {"eos_id", "-1"},
      {"pad_id", "-1"},
      {"num_threads", "2"},
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      {"max_sentence_length",
       fmt::format("{}", std::max<size_t>(config.max_line_len, longest) * 3 + 16)},
      {"minloglevel", "2"},
  };
  std::string proto;
  std::lock_guard<std::mutex> lock(TrainMutex());
  for (int attempt = 0;; ++attempt) {
    kw["vocab_size"] = fmt::format("{}", want);
    sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned>(config.seed % 0xFFFFFFFEull));
    VectorIterator it(sentences);
    proto.clear();
    auto st = sentencepiece::SentencePieceTrainer::Train(kw, &it, &proto);
    if (st.ok()) return proto;
    const std::string msg = st.ToString();
    const int limit = ParseSpVocabLimit(msg);
    if (limit >= 2 && limit < want && attempt < 8) {
      want = limit;  // soft limit: take the largest size the data supports
      continue;
    }
    if (msg.find("smaller than required_chars") != std::string::npos)
      return DS_ERR(kInvalidArgument,
                    "vocab_size {} is too small for the characters of the data: {}",
                    config.vocab_size, msg);
    return DS_ERR(kInvalidInput, "SentencePiece training failed: {}", msg);
  }
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> TrainSentencePiece(
    const TokenizerConfig& config, const std::vector<std::vector<std::string>>& records,
    const std::vector<char32_t>& chars) {
  DS_ASSIGN_OR_RETURN(const int64_t sp_vocab, CheckSpTraining(config, records));
  const int specials = SpecialCount(config);
  std::vector<std::pair<char32_t, char32_t>> escapes;
  std::unordered_map<char32_t, char32_t> escape_of;
  DS_RETURN_IF_ERROR(AssignEscapes(chars, &escapes, &escape_of));
  size_t distinct_chars = chars.size();
  size_t longest = 0;
  int64_t code_points = 0;  // of all sentences
  std::vector<std::string> sentences =
      SpSentences(config, records, escape_of, &longest, &code_points);
  if (sentences.empty())
    return DS_ERR(kInvalidInput,
                  "no field text to train a SentencePiece tokenizer on ({} records, all empty)",
                  records.size());
  if (config.character_coverage >= 1.0 && int64_t(distinct_chars) + 1 > sp_vocab)
    return DS_ERR(kInvalidArgument,
                  "vocab_size {} is too small: the data has {} distinct characters, which need {} "
                  "ids plus {} "
                  "special tokens (raise vocab_size or lower character_coverage)",
                  config.vocab_size, distinct_chars, distinct_chars, specials);

  // No vocabulary can be larger than <unk> + the characters + the distinct
  // substrings of 2..16 characters; SP's run time grows with the requested
  // size, so ask for no more than that (the result is the same).
  const int64_t bound = 1 + int64_t(distinct_chars) + 15 * code_points;
  const int64_t want = std::min<int64_t>({sp_vocab, bound, INT32_MAX});
  DS_ASSIGN_OR_RETURN(std::string proto, RunSpTrainer(config, sentences, longest, want));
  auto tok = std::make_unique<SpTokenizer>(config.column_markers, config.num_columns);
  DS_RETURN_IF_ERROR(tok->Init(std::move(proto), config.sp_model_type, std::move(escapes),
                               "trained SentencePiece model", Code::kInternal));
  tok->set_training({{"vocab_size", config.vocab_size},
                     {"character_coverage", config.character_coverage},
                     {"pretrain_sentence_count", config.pretrain_sentence_count},
                     {"max_line_len", config.max_line_len},
                     {"sp_model_type", config.sp_model_type},
                     {"seed", config.seed},
                     {"records", records.size()},
                     {"sentences", sentences.size()}});
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

Result<std::vector<std::string>> TrainTextPieces(const std::vector<std::string>& values, int want) {
  std::vector<std::vector<std::string>> records;
  std::set<char32_t> distinct;
  size_t longest = 0;
  for (const auto& v : values) {
    if (v.empty()) continue;
    records.push_back({v});
    longest = std::max(longest, v.size());
    size_t pos = 0;
    char32_t cp;
    while (NextCodePointStrict(v, &pos, &cp)) distinct.insert(cp);
  }
  std::vector<std::string> out;
  if (records.empty()) return out;
  TokenizerConfig config;
  config.sp_model_type = "unigram";
  config.max_line_len = int(std::min<size_t>(longest + 1, INT32_MAX / 4));
  config.pretrain_sentence_count = 100000;
  config.seed = 0;
  // <n> and <d>, the characters (with character_coverage 1), then the pieces.
  config.vocab_size = int(std::min<int64_t>(2 + int64_t(distinct.size()) + want, INT32_MAX / 2));
  std::vector<char32_t> chars(distinct.begin(), distinct.end());
  DS_ASSIGN_OR_RETURN(auto tok, TrainSentencePiece(config, records, chars));
  for (int id = 2; id < tok->vocab_size(); ++id) {
    if (tok->kind(id) != TokenKind::kText) continue;
    const std::string& p = tok->text(id);
    size_t pos = 0, n = 0;
    char32_t cp;
    while (NextCodePointStrict(p, &pos, &cp)) ++n;
    if (n >= 2 && n <= 16) out.push_back(p);
  }
  return out;
}

Result<std::unique_ptr<Tokenizer>> LoadSentencePiece(const nlohmann::json& j, bool column_markers,
                                                     int num_columns, const std::string& dir) {
  const std::filesystem::path d(dir);
  const std::string json_path = (d / kJsonFile).string();
  const std::string model_path = (d / kModelFile).string();
  const auto& sec = JsonField(j, "sentencepiece", json_path);
  if (JsonString(sec, "model_file", json_path) != kModelFile)
    return DS_ERR(kCorrupt, "{}: model_file must be '{}'", json_path, kModelFile);
  const int64_t bytes = JsonInt(sec, "model_bytes", 1, int64_t(1) << 30, json_path);
  const int64_t crc = JsonInt(sec, "model_crc32", 0, UINT32_MAX, json_path);
  const std::string model_type = JsonString(sec, "model_type", json_path);
  if (model_type != "unigram" && model_type != "bpe")
    return DS_ERR(kCorrupt, "{}: model_type '{}' is not 'unigram' or 'bpe'", json_path, model_type);
  const int64_t pieces = JsonInt(sec, "num_pieces", 1, INT32_MAX, json_path);
  const auto& esc = JsonArray(sec, "escapes", 4096, json_path);
  std::vector<std::pair<char32_t, char32_t>> escapes;
  for (size_t i = 0; i < esc.size(); ++i) {
    const auto& e = esc[i];
    if (!e.is_array() || e.size() != 2 || !e[0].is_number_unsigned() ||
        !e[1].is_number_unsigned() ||
        !IsScalarValue(int64_t(std::min<uint64_t>(e[0].get<uint64_t>(), 0x7FFFFFFF))) ||
        !IsScalarValue(int64_t(std::min<uint64_t>(e[1].get<uint64_t>(), 0x7FFFFFFF))))
      return DS_ERR(kCorrupt, "{}: escapes[{}] is not a pair of code points", json_path, i);
    escapes.emplace_back(char32_t(e[0].get<uint64_t>()), char32_t(e[1].get<uint64_t>()));
  }
  DS_ASSIGN_OR_RETURN(std::string proto, ReadFile(model_path, size_t(1) << 30));
  if (int64_t(proto.size()) != bytes || Crc32(proto) != uint32_t(crc))
    return DS_ERR(
        kCorrupt,
        "{}: does not match {} (size {} vs {}, crc32 {:08x} vs {:08x}): not the model saved "
        "with this tokenizer",
        model_path, kJsonFile, proto.size(), bytes, Crc32(proto), uint32_t(crc));
  auto tok = std::make_unique<SpTokenizer>(column_markers, num_columns);
  DS_RETURN_IF_ERROR(
      tok->Init(std::move(proto), model_type, std::move(escapes), model_path, Code::kCorrupt));
  if (tok->vocab_size() - tok->num_specials() + 1 != pieces)
    return DS_ERR(kCorrupt, "{}: {} pieces, but {} says {}", model_path,
                  tok->vocab_size() - tok->num_specials() + 1, kJsonFile, pieces);
  if (auto it = j.find("training"); it != j.end() && it->is_object()) tok->set_training(*it);
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace ds::tok_internal
