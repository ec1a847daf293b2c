// Internals shared by the tokenizer implementations (not a public API; tests
// may use it).
//
// Id layout, the same for every tokenizer type (documented in tokenizer.json
// under "specials"):
//   0                 <n>   end of record
//   1                 <d>   field delimiter           (without column markers)
//   1 .. K            <col0> .. <col{K-1}>            (with K column markers)
//   S .. V-1          text tokens, S = 2 or 1 + K
// Char tokenizer: text token S + i is the i-th distinct code point of the
// training text in ascending code point order. SentencePiece: text token
// S + p - 1 is SentencePiece piece p (p >= 1; SP's <unk>, piece 0, has no id:
// text that would need it is an encoding error instead).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tokenize/tokenizer.h"
#include "util/status.h"

namespace ds::tok_internal {

inline constexpr int kFormatVersion = 1;
inline constexpr const char* kFormatName = "datasynth-tokenizer";
inline constexpr const char* kJsonFile = "tokenizer.json";
inline constexpr const char* kModelFile = "tokenizer.model";
inline constexpr int kMaxColumns = 1 << 20;

// Names of the special tokens in id order ("<n>", then "<d>" or the markers).
std::vector<std::string> SpecialNames(bool column_markers, int num_columns);

// The special-token part of a tokenizer plus a flat table of every id's kind
// and text, so kind()/text() are array lookups.
class TableTokenizer : public Tokenizer {
 public:
  TableTokenizer(bool column_markers, int num_columns);

  int vocab_size() const override { return static_cast<int>(texts_.size()); }
  TokenKind kind(int id) const override {
    return id >= 0 && id < vocab_size() ? kinds_[id] : TokenKind::kUnused;
  }
  const std::string& text(int id) const override;
  int column(int id) const override {
    return column_markers_ && id >= 1 && id <= num_columns_ ? id - 1 : -1;
  }
  int end_id() const override { return 0; }
  int delimiter_id() const override { return column_markers_ ? -1 : 1; }
  int column_id(int k) const override {
    return column_markers_ && k >= 0 && k < num_columns_ ? 1 + k : -1;
  }
  bool column_markers() const override { return column_markers_; }
  int num_columns() const override { return column_markers_ ? num_columns_ : 0; }
  // Number of special ids (the first text id).
  int num_specials() const { return num_specials_; }

 protected:
  void AddText(std::string text) {
    texts_.push_back(std::move(text));
    kinds_.push_back(TokenKind::kText);
  }
  // The fields common to every tokenizer.json.
  nlohmann::json CommonJson() const;

  std::vector<std::string> texts_;  // [V] text of each id; empty for specials
  std::vector<TokenKind> kinds_;    // [V]

 private:
  bool column_markers_;
  int num_columns_;
  int num_specials_;
};

// ---- untrusted JSON access: each throws ds::Error(kCorrupt) naming `file` ----
const nlohmann::json& JsonField(const nlohmann::json& obj, const char* key,
                                const std::string& file);
int64_t JsonInt(const nlohmann::json& obj, const char* key, int64_t lo, int64_t hi,
                const std::string& file);
std::string JsonString(const nlohmann::json& obj, const char* key, const std::string& file);
bool JsonBool(const nlohmann::json& obj, const char* key, const std::string& file);
const nlohmann::json& JsonArray(const nlohmann::json& obj, const char* key, size_t max_size,
                                const std::string& file);

// Whole-file I/O. ReadFile refuses files larger than max_bytes (kCorrupt).
Result<std::string> ReadFile(const std::string& path, size_t max_bytes);
// Writes via a temporary file and rename, so a crash leaves no half file.
Status WriteFile(const std::string& path, std::string_view data);

// Checks the records against the config (field counts with column markers,
// valid UTF-8) and returns their distinct code points, ascending.
Result<std::vector<char32_t>> CheckRecords(const TokenizerConfig& config,
                                           const std::vector<std::vector<std::string>>& records);

// The implementations. `specials` etc. are already validated by the callers.
Result<std::unique_ptr<Tokenizer>> TrainChar(const TokenizerConfig& config,
                                             const std::vector<char32_t>& chars);
Result<std::unique_ptr<Tokenizer>> LoadChar(const nlohmann::json& j, bool column_markers,
                                            int num_columns, const std::string& json_path);
Result<std::unique_ptr<Tokenizer>> TrainSentencePiece(
    const TokenizerConfig& config, const std::vector<std::vector<std::string>>& records,
    const std::vector<char32_t>& chars);
// Sub-word pieces for one free-text column (the field tokenizer's
// text_pieces): SentencePiece unigram trained on `values` for about `want`
// pieces besides the characters; returns the pieces of 2+ code points in
// SentencePiece's order (spaces as ' '). Deterministic for the same values.
Result<std::vector<std::string>> TrainTextPieces(const std::vector<std::string>& values, int want);
Result<std::unique_ptr<Tokenizer>> LoadSentencePiece(const nlohmann::json& j, bool column_markers,
                                                     int num_columns, const std::string& dir);

// From a SentencePiece "Vocabulary size too high (N). Please set it to a value
// <= M." error, M; else -1.
int ParseSpVocabLimit(std::string_view message);

}  // namespace ds::tok_internal
