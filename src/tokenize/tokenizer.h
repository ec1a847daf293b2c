// Tokenizers turn records (a list of field values; a text line is a record of
// one field) into token ids and back.
//
// Record encoding (the "annotated training text" of the reference):
//   without column markers:  f0 <d> f1 <d> ... f{k-1} <n>
//   with column markers:     <col0> f0 <col1> f1 ... <col{k-1}> f{k-1} <n>
// <n> ends a record; <d> separates fields; <colK> starts field K (and so also
// separates fields). Special tokens are never produced from field text: a field
// may contain the delimiter character, newlines, quotes, "<d>" or anything
// else, and it round-trips exactly.
//
// Every id has a kind and, for text tokens, the exact UTF-8 it contributes to
// the current field (text(id)), so that generation can detokenize one token at
// a time (RecordDecoder) and constrained decoding can test a candidate token's
// text against what the current field may still become.
//
// Fixed id layout (every type; tokenizer.json lists the specials in id order):
//   0 = <n>;  1 = <d> without column markers, or 1..K = <col0>..<col{K-1}>;
//   text ids follow. Char: code points of the training text, ascending.
//   SentencePiece: SP piece p >= 1 has id S + p - 1 (S = number of specials);
//   SP's <unk> has no id. No id is kUnused at present.
//
// Policies (details in char_tokenizer.cc / sp_tokenizer.cc):
//  * EncodeField never emits <unk>: a character the vocabulary lacks, or
//    invalid UTF-8, is kInvalidInput naming it ("character U+00E9 'é' at byte
//    3 was not seen in training"); nothing is appended on error.
//  * SentencePiece: vocab_size is a soft limit on the WHOLE vocabulary
//    (specials included); "identity" normalization, no dummy prefix, no
//    whitespace collapsing, so text(id) concatenation is the field byte for
//    byte. \n, \r, \t and other control / SP-reserved characters are mapped
//    to private-use stand-ins before SP (the map is in tokenizer.json).
//    A training record longer than max_line_len bytes (fields + one byte per
//    separator) is a kInvalidInput error naming it. pretrain_sentence_count
//    caps the records SP trains on (seeded sample, plus any record holding a
//    character the sample lacks).
//  * Training is deterministic for the same records and config (seed).
//  * A trained or loaded tokenizer is immutable; all const methods are safe
//    to call from several threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace ds {

enum class TokenKind : uint8_t {
  kText,         // contributes text(id) to the current field
  kEndOfRecord,  // <n>
  kDelimiter,    // <d>
  kColumn,       // <colK>: starts field K
  kUnused,       // padding / unknown: never sampled
};

struct TokenizerConfig {
  std::string type = "sentencepiece";  // "sentencepiece", "char" or "field"
  // SentencePiece options (docs/reference.md §2).
  int vocab_size = 20000;  // soft limit: smaller data gives a smaller vocabulary
  double character_coverage = 1.0;
  int64_t pretrain_sentence_count = 1000000;
  int max_line_len = 2048;
  std::string sp_model_type = "unigram";  // "unigram" or "bpe"
  // Column markers (<colK> before each field); needs num_columns > 0.
  bool column_markers = false;
  int num_columns = 0;
  uint64_t seed = 0;
  // Field tokenizer (delimited data only): the CSV header, the rare-value
  // count and per-column type overrides (tokenize/field_tokenizer.h).
  std::vector<std::string> header;
  int rare_count = 2;
  int text_pieces = 0;  // open free-text columns: sub-word pieces (0: chars)
  std::map<std::string, std::string> field_types;
  bool field_header_order = false;  // field_order "header"
  bool field_relations = true;      // field_relations
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual std::string type() const = 0;  // "char" or "sentencepiece"
  virtual int vocab_size() const = 0;
  virtual TokenKind kind(int id) const = 0;
  // Exact UTF-8 text a kText token adds to the field; empty for special tokens.
  virtual const std::string& text(int id) const = 0;
  // Field index of a kColumn token, else -1.
  virtual int column(int id) const = 0;

  virtual int end_id() const = 0;          // <n>
  virtual int delimiter_id() const = 0;    // <d>, or -1 with column markers
  virtual int column_id(int k) const = 0;  // <colK>, or -1 without markers
  virtual bool column_markers() const = 0;
  virtual int num_columns() const = 0;  // 0 without markers

  // Appends the ids of one field's text (no special tokens). Errors name the
  // offending character (e.g. a character the char tokenizer never saw).
  virtual Status EncodeField(std::string_view field, std::vector<int32_t>* out) const = 0;

  // EncodeField for the field of column `column` (0-based); tokenizers with
  // one vocabulary for every field ignore the column.
  virtual Status EncodeColumnField(int column, std::string_view field,
                                   std::vector<int32_t>* out) const {
    return EncodeField(field, out);
  }
  // Appends a whole record, ending with <n> (see the encoding above).
  virtual Status EncodeRecord(const std::vector<std::string>& fields,
                              std::vector<int32_t>* out) const;
  // Appends a record prefix for generation: the given complete fields, each
  // followed by the separator that opens the next field (a start string
  // "a,b," is fields {a, b}). No <n>.
  virtual Status EncodePrefix(const std::vector<std::string>& fields,
                              std::vector<int32_t>* out) const;

  // Tokenizers whose tokens are values rather than field text (the field
  // tokenizer, tokenize/field_tokenizer.h) decode a whole record at once:
  // RecordDecoder collects the ids and calls DecodeRecord at <n> (ids without
  // the <n>); it returns "" or why the ids are not a record.
  virtual bool decodes_records() const { return false; }
  virtual std::string DecodeRecord(std::span<const int32_t> ids,
                                   std::vector<std::string>* fields) const {
    return "not a record tokenizer";
  }
  // Type check of a decoded record: "" when every field is a value of its
  // column's type, else why not. Tokenizers without a schema accept all.
  virtual std::string CheckFields(const std::vector<std::string>& fields) const { return ""; }

  // Writes the tokenizer's files into `dir` (tokenizer.json plus, for
  // SentencePiece, tokenizer.model). Loading checks them (untrusted input).
  virtual Status Save(const std::string& dir) const = 0;
};

// Trains a tokenizer on `records` (each a list of fields; with column markers
// each must have num_columns fields). Training is in memory: no files.
// Errors: kInvalidArgument (config), kInvalidInput (records).
Result<std::unique_ptr<Tokenizer>> TrainTokenizer(
    const TokenizerConfig& config, const std::vector<std::vector<std::string>>& records);
// Loads a tokenizer saved by Save(); every file is validated (kNotFound for a
// missing file, kCorrupt naming the file for anything inconsistent, including
// a tokenizer.model that is not the one saved with tokenizer.json).
Result<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& dir);

// Incremental detokenizer: push sampled ids one at a time; fields grow in place
// (no re-decoding of the whole line). A text id appends text(id) to the
// current field (opening field 0 if none is open); <d> and <colK> open a new
// field, except that <col0> as the first token opens field 0 (so a leading
// <d> gives an empty field 0 first). The column index of <colK> is not
// enforced: callers that care compare fields().size() with num_columns().
// <n> ends the record (a record with no other token is one empty field).
// Pushing after done() starts a new record (as if Reset() had been called).
class RecordDecoder {
 public:
  explicit RecordDecoder(const Tokenizer& tok) : tok_(&tok) { Reset(); }
  void Reset();
  // Returns true when `id` ended the record (<n>).
  bool Push(int32_t id);
  const std::vector<std::string>& fields() const { return fields_; }
  // Why the finished record does not decode ("" when it does; record
  // tokenizers only).
  const std::string& error() const { return error_; }
  // Characters (UTF-8 code points) of field text so far, for gen_chars.
  size_t chars() const { return chars_; }
  bool done() const { return done_; }

 private:
  const Tokenizer* tok_;
  std::vector<std::string> fields_;
  std::vector<int32_t> ids_;  // record tokenizers: the record's ids so far
  std::string error_;
  size_t chars_ = 0;
  bool done_ = false;
};

}  // namespace ds
