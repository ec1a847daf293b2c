#include "generate/field_filter.h"

#include <vector>

namespace ds {
namespace {

class FieldFilter final : public TokenFilter {
 public:
  FieldFilter(const FieldTokenizer& tok, int slots) : tok_(tok), cur_(size_t(slots)) {}

  void Begin(int slot) override { tok_.Begin(&cur_[size_t(slot)], nullptr); }
  void Accept(int slot, int32_t token) override {
    if (token == tok_.end_id()) return;  // the record's end (or the <n> fed first)
    tok_.Advance(&cur_[size_t(slot)], token, nullptr);
  }
  void Mask(int slot, float* logits) override { tok_.Mask(cur_[size_t(slot)], logits); }
  bool Range(int slot, int32_t* lo, int32_t* hi) override {
    int a, b;
    tok_.AllowedRange(cur_[size_t(slot)], &a, &b);
    *lo = a;
    *hi = b;
    return true;
  }

 private:
  const FieldTokenizer& tok_;
  std::vector<FieldTokenizer::Cursor> cur_;
};

}  // namespace

std::unique_ptr<TokenFilter> NewFieldFilter(const FieldTokenizer& tok, int slots) {
  return std::make_unique<FieldFilter>(tok, slots);
}

}  // namespace ds
