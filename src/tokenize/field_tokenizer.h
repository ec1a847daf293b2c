// Field tokenizer ("field"): a delimited record becomes a short sequence of
// value tokens, with a vocabulary per column (types from schema/column_type.h).
//
// Record:  v(col0) v(col1) ... v(col{K-1}) <n>, where v(c) is:
//   categorical  1 token: the value (each missing spelling is a value); values
//                seen fewer than rare_count times share one <other> token,
//                decoded as an entry of the column's rare list (all rare
//                occurrences, so a value seen twice is twice as likely)
//                chosen by a hash of all the record's tokens and the column
//                (so the record stays a pure function of its tokens, and
//                records that differ anywhere draw independently)
//   integer /    1 token: a missing spelling, or the quantile bin b of the
//   decimal      value scaled to an integer at the column's precision D
//                (value * 10^D); then nd(b) digit tokens of the residual
//                (scaled - edge[b]) in [0, width(b)), most significant first,
//                nd(b) = digits of width(b) - 1 (0 for a one-value bin). Bins:
//                every distinct value its own bin when there are at most
//                kExactBins of them, else kMaxBins quantiles (edges deduplicated;
//                a value holding a bin's share of the rows gets its own bin,
//                and the other values are cut into quantiles among themselves);
//                the last bin ends at max + 1. Digit position k of the
//                column's ND = max nd(b) positions has its own 10 tokens; the
//                residual's digits are aligned right (units share tokens).
//   datetime     a missing spelling, or the year, then the month, day, hour,
//                minute, second tokens that the column's format has (year
//                within the learned years; written back in the format)
//   text / id    one token per code point of the column's text, then <eof>;
//                open free text trained with text_pieces > 0: the fewest
//                tokens of chars and sub-word pieces, then <eof>
//                (at most the longest length seen; empty only if seen); a
//                "closed" text column (inferred text whose values repeat: at
//                most half of them distinct) only spells values seen
//                (kClosedTextShare)
//   constant /   no token: the value is written back
//   empty
// Every (column, part) has its own contiguous id range, so a token's id tells
// the network the column and the part it belongs to. Ids: 0 = <n>, then the
// columns in header order, each part in the order above.
//
// Generation order: a record's values are generated (and encoded) fewest
// distinct values first (ties in header order): broad categories before the
// values they determine (vega_zipcodes: state, county, city, latitude,
// longitude, zip_code), so each relation is carried over few steps; decoded
// fields come back in header order. A start (EncodePrefix) fixes the first
// columns of this order; FieldTokenizerOptions::header_order (config
// field_order "header") keeps the header order (tabular batches use it: they
// start from their conditioning columns). tokenizer.json "order" (absent:
// header order, as in older models).
//
// Masks (Mask): at each position only the ids legal there: the current part's
// range; a digit only when some completion stays inside the bin; a day only
// up to DaysInMonth(year, month); <eof> only at a legal length; <n> only after
// the last column. So every record sampled under the mask decodes to values
// of its column's type (ValueFitsType), known categories and numbers inside
// the learned range.
//
// tokenizer.json (type "field") holds the whole schema and the vocabularies;
// loading checks every entry (untrusted input).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "schema/column_type.h"
#include "tokenize/field_relations.h"
#include "tokenize/tokenizer.h"

namespace ds {

struct PublicSchema;  // schema/public_schema.h

struct FieldTokenizerOptions {
  int rare_count = 2;  // categorical values seen fewer times go to <other>
  bool header_order = false;  // generate the columns in header order (else fewest values first)
  // Open free-text columns: sub-word pieces chosen by SentencePiece (unigram)
  // over the column's values, about this many besides the characters; 0 =
  // characters only (see "Free text" in docs/typed_fields.md).
  int text_pieces = 0;
  std::map<std::string, std::string> field_types;  // overrides by column name
  bool relations = true;  // learn order relations between numeric columns (field_relations.h)
};

class FieldTokenizer final : public Tokenizer {
 public:
  // Numeric bins (see the file comment): a column of n values with at most
  // min(kExactBins, max(2, n / kRowsPerExactBin)) distinct values gets one bin
  // per value, else clamp(n / kRowsPerBin, kMinBins, kMaxBins) quantile bins.
  static constexpr int kMaxBins = 32;
  static constexpr int kMinBins = 8;
  static constexpr int kRowsPerBin = 40;
  static constexpr int kExactBins = 100;
  static constexpr int kRowsPerExactBin = 30;
  // Quantile bins for n values: clamp(n / kRowsPerBin, kMinBins, kMaxBins).
  static int QuantileBins(int64_t n);
  // An inferred text / id column with distinct values <= this share of its
  // rows is closed (its values repeat: names, not free text or ids).
  static constexpr double kClosedTextShare = 0.5;

  struct Column {
    std::string name;
    ColumnSchema type;
    int base = 0, size = 0;  // ids [base, base + size)
    // categorical
    std::vector<std::string> values;
    std::vector<std::string> rare;  // with multiplicity, in row order
    // numeric / datetime
    std::vector<std::string> missing;  // missing spellings (first tokens)
    std::vector<int64_t> edges;        // numeric: [nb + 1] bin edges, increasing
    int nd = 0;                        // numeric: digit positions
    int year_lo = 0, year_hi = -1;     // datetime
    // text / id
    std::vector<std::string> chars;
    // Open free text with sub-words: pieces of 2+ characters after the chars
    // (ids: chars, pieces, <eof>); a value is encoded in the fewest tokens.
    std::vector<std::string> pieces;
    std::vector<int> piece_len;  // derived: code points of each piece
    int max_piece_len = 1;       // derived: longest piece (1 without pieces)
    int max_len = 0;             // code points
    bool empty_ok = false;
    // Closed text: a column of repeated values with too many distinct ones
    // for a token each (city names): spelled by chars, but only the values
    // seen (sorted, unique); empty = open text.
    std::vector<std::string> closed;
    // derived
    std::unordered_map<std::string, int> index;  // categorical value / missing / char -> offset
    std::vector<int> part_base;                  // datetime: id of each part's first token
    std::unique_ptr<DateFormat> format;
    // closed text: a trie over `closed`; node 0 is the root; edges by char offset
    std::vector<std::vector<std::pair<int, int>>> trie;  // [node] -> sorted (char, child)
    std::vector<bool> terminal;                          // [node]: a value ends here
  };

  // Decoding / masking position in a record.
  struct Cursor {
    int col = 0;      // current position in the generation order (== columns: only <n>)
    int part = 0;     // token index inside the field
    int bin = -1;     // numeric: chosen bin
    int64_t acc = 0;  // numeric residual digits so far / datetime year
    int month = 0;
    int len = 0;     // text code points so far
    int node = 0;    // closed text: trie node of the text so far
    uint64_t hash = 1469598103934665603ull;  // decoding: hash of the record's ids
    bool broken = false;
    DateTime dt;       // datetime parts so far
    std::string text;  // text field so far
    // With relations: [columns] each numeric column's scaled value once written
    // (kNoValue: not yet, or missing).
    std::vector<int64_t> num;
  };
  static constexpr int64_t kNoValue = INT64_MIN;

  static Result<std::unique_ptr<FieldTokenizer>> Train(
      const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& records,
      const FieldTokenizerOptions& opts);
  static Result<std::unique_ptr<Tokenizer>> Load(const nlohmann::json& j, const std::string& path);
  // Built from a public schema alone, never from data (tokenize/field_schema.cc):
  // categories = the listed values (no <other>), numeric bins uniform over
  // [min, max] (or one per value), the listed years, missing spellings and
  // alphabet. Used under --dp (docs/privacy.md).
  // `edges` (optional, one entry per schema column; empty = the schema's
  // uniform bins): a numeric column's scaled bin edges, lo .. hi + 1 strictly
  // increasing (train/dp_bins.h chooses them under dp).
  static Result<std::unique_ptr<FieldTokenizer>> FromSchema(
      const PublicSchema& schema, const std::vector<std::vector<int64_t>>* edges = nullptr);

  std::string type() const override { return "field"; }
  int vocab_size() const override { return vocab_; }
  TokenKind kind(int id) const override {
    return id == 0 ? TokenKind::kEndOfRecord
                   : (id > 0 && id < vocab_ ? TokenKind::kText : TokenKind::kUnused);
  }
  const std::string& text(int id) const override;
  int column(int id) const override { return -1; }
  int end_id() const override { return 0; }
  int delimiter_id() const override { return -1; }
  int column_id(int k) const override { return -1; }
  bool column_markers() const override { return false; }
  int num_columns() const override { return 0; }
  // A single field cannot be encoded without its column: use EncodeRecord.
  Status EncodeField(std::string_view field, std::vector<int32_t>* out) const override;
  Status EncodeColumnField(int column, std::string_view field,
                           std::vector<int32_t>* out) const override;
  Status EncodeRecord(const std::vector<std::string>& fields,
                      std::vector<int32_t>* out) const override;
  Status EncodePrefix(const std::vector<std::string>& fields,
                      std::vector<int32_t>* out) const override;
  bool decodes_records() const override { return true; }
  std::string DecodeRecord(std::span<const int32_t> ids,
                           std::vector<std::string>* fields) const override;
  std::string CheckFields(const std::vector<std::string>& fields) const override;
  // `v` (a training value of `column`) as generation writes it back: a
  // normalized numeric column's numbers by value at its precision and style
  // (`3e+05` -> `300000`, `1.50` -> `1.5`); every other value as given.
  std::string CanonicalValue(int column, std::string_view v) const;
  Status Save(const std::string& dir) const override;

  const std::vector<Column>& columns() const { return cols_; }
  const std::vector<FieldRelation>& relations() const { return relations_; }
  // The header columns in the order a record's values are generated (see
  // "Generation order" in the file comment).
  std::vector<int> generation_order() const;
  // Starts a record: skips leading token-less columns (their values go to
  // `fields` when not null).
  void Begin(Cursor* c, std::vector<std::string>* fields) const;
  // Consumes `id`; completed fields are appended to `fields` (may be null).
  // An illegal id sets c->broken (and the record stops there).
  void Advance(Cursor* c, int32_t id, std::vector<std::string>* fields) const;
  // Sets every logit that is illegal at `c` to -inf.
  void Mask(const Cursor& c, float* logits) const;
  // [lo, hi): the ids outside it are all illegal at `c` (Mask sets them to
  // -inf); the whole vocabulary when nothing is masked (c.broken).
  void AllowedRange(const Cursor& c, int* lo, int* hi) const {
    if (c.broken) {
      *lo = 0;
      *hi = vocab_;
    } else {
      PartRange(c, lo, hi);
    }
  }
  // Longest record in tokens (<n> included).
  int max_record_tokens() const;
  // One line per column: "name: integer (D=0, 12 bins, 2 digits) ids 5..34".
  std::string Describe() const;
  nlohmann::json SchemaJson() const;  // per column: name, type, decimals, format

 private:
  // by_chars: open text with pieces spelled by its chars (a valid encoding, not
  // the fewest tokens: enough to check a value, CheckFields).
  Status EncodeValue(int col, std::string_view v, std::vector<int32_t>* out,
                     bool by_chars = false) const;
  Status EncodeLeading(const std::vector<std::string>& fields, std::vector<int32_t>* out) const;
  Status Finalize();  // ids, indexes, names; checks
  Status CheckOrder() const;  // order_: empty or a permutation of the columns
  static Status BuildTrie(Column* c);
  static int TrieChild(const Column& c, int node, int off);  // -1: none
  static Status CheckPieces(Column* c);  // pieces: unique, known chars; piece_len
  static int TextEof(const Column& c) { return int(c.chars.size() + c.pieces.size()); }
  // The text of offset `off` (a char or a piece) and its length in code points.
  static const std::string& TextOf(const Column& c, int off) {
    return off < int(c.chars.size()) ? c.chars[size_t(off)] : c.pieces[size_t(off) - c.chars.size()];
  }
  static int TextLen(const Column& c, int off) {
    return off < int(c.chars.size()) ? 1 : c.piece_len[size_t(off) - c.chars.size()];
  }
  Status EncodeText(const Column& c, const std::vector<std::string>& cs,
                    std::vector<int32_t>* out) const;
  void Complete(Cursor* c, std::string value, std::vector<std::string>* fields) const;
  void SkipEmpty(Cursor* c, std::vector<std::string>* fields) const;
  // [lo, hi) of the current part's ids.
  void PartRange(const Cursor& c, int* lo, int* hi) const;
  std::string OrderText() const;  // "state, county, ..." (generation order)
  // Relations: learned in Train, checked in Finalize; the scaled bounds [*lo, *hi] that
  // the values already written put on column ci (false: none).
  void LearnColumnRelations(const std::vector<std::vector<std::string>>& records);
  Status CheckRelations();  // and indexes them (rel_of_col_)
  bool RelationBounds(const Cursor& c, int ci, int64_t* lo, int64_t* hi) const;
  void MaskNumeric(const Cursor& c, const Column& col, int lo, float* logits) const;
  void MaskDate(const Cursor& c, const Column& col, float* logits) const;
  bool RelationKey(int ci, std::string_view v, int64_t* key) const;  // false: missing
  bool Related(int a, int b) const;  // both numeric, or datetimes with the same parts
  std::string CheckRelationFields(const std::vector<std::string>& fields) const;

  // The header column at generation position `pos` (Cursor::col).
  int ColAt(int pos) const { return order_.empty() ? pos : order_[size_t(pos)]; }

  std::vector<Column> cols_;
  // Generation order: order_[pos] = the header column written at position
  // pos; empty = header order (older models, schemas, field_order "header").
  std::vector<int> order_;
  std::vector<FieldRelation> relations_;       // sorted by (lo, hi)
  std::vector<std::vector<int>> rel_of_col_;   // [column] indices into relations_
  int rare_count_ = 2;
  int vocab_ = 1;
  std::vector<std::string> names_;  // [V] token display names
};

}  // namespace ds
