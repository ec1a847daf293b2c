// The ids legal for each target of a token stream: the training loss's
// softmax runs over them (model/network.h, "legal" loss), the same ranges that
// generation samples from.
//
// For a value-token tokenizer (the field tokenizer) a Cursor walks each
// encoded record (Begin, then AllowedRange / Advance per token), so token k of
// a record gets the [lo, hi) of its (column, part): categorical values, a
// numeric column's bins, one digit position, a date part, a text column's
// chars, and [0, 1) for the closing <n>. The ranges are stored compactly: one
// uint16 index per token into a table of distinct ranges (a few per column).
// Char and SentencePiece tokenizers have no ranges (the whole vocabulary
// everywhere: Applies() is false and nothing is stored).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "tokenize/tokenizer.h"
#include "util/status.h"

namespace ds {

class LegalRanges {
 public:
  // True when `tok` narrows the legal ids per position (the field tokenizer).
  static bool Applies(const Tokenizer& tok);

  // A table for `tok` (Applies(tok) must be true).
  explicit LegalRanges(const Tokenizer& tok);

  // Appends one index per token of `record` (one EncodeRecord output, ending
  // with <n>) to `out`. A token outside its cursor's range (never the case
  // for an encoded record) and every token after it get the whole
  // vocabulary. kInvalidArgument beyond 65,536 distinct ranges.
  Status AppendRecord(std::span<const int32_t> record, std::vector<uint16_t>* out);
  // The index of [lo, hi), added to the table when new.
  Result<uint16_t> Intern(int32_t lo, int32_t hi);

  int32_t lo(uint16_t i) const { return table_[i].first; }
  int32_t hi(uint16_t i) const { return table_[i].second; }
  size_t size() const { return table_.size(); }

 private:
  const Tokenizer* tok_;
  std::vector<std::pair<int32_t, int32_t>> table_;
  std::map<std::pair<int32_t, int32_t>, uint16_t> index_;
};

}  // namespace ds
