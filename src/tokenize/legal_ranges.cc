#include "tokenize/legal_ranges.h"

#include "tokenize/field_tokenizer.h"

namespace ds {

bool LegalRanges::Applies(const Tokenizer& tok) {
  return dynamic_cast<const FieldTokenizer*>(&tok) != nullptr;
}

LegalRanges::LegalRanges(const Tokenizer& tok) : tok_(&tok) {}

Result<uint16_t> LegalRanges::Intern(int32_t lo, int32_t hi) {
  auto it = index_.find({lo, hi});
  if (it != index_.end()) return it->second;
  if (table_.size() > 0xffff)
    return DS_ERR(kInvalidArgument, "more than 65536 distinct legal id ranges (vocabulary {})",
                  tok_->vocab_size());
  const uint16_t i = uint16_t(table_.size());
  table_.push_back({lo, hi});
  index_.emplace(std::make_pair(lo, hi), i);
  return i;
}

Status LegalRanges::AppendRecord(std::span<const int32_t> record, std::vector<uint16_t>* out) {
  const auto& f = static_cast<const FieldTokenizer&>(*tok_);
  FieldTokenizer::Cursor c;
  f.Begin(&c, nullptr);
  for (int32_t id : record) {
    int lo = 0, hi = f.vocab_size();
    f.AllowedRange(c, &lo, &hi);
    if (id < lo || id >= hi) {
      c.broken = true;  // whole vocabulary from here on
      lo = 0;
      hi = f.vocab_size();
    }
    DS_ASSIGN_OR_RETURN(uint16_t i, Intern(lo, hi));
    out->push_back(i);
    f.Advance(&c, id, nullptr);
  }
  return Status::Ok();
}

}  // namespace ds
