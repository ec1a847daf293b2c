#include "generate/field_filter.h"

#include <vector>

namespace ds {
namespace {

class FieldFilter final : public TokenFilter {
 public:
  FieldFilter(const FieldTokenizer& tok, int slots, std::shared_ptr<const PairTables> pairs,
              bool ranges_only)
      : tok_(tok), cur_(size_t(slots)), pairs_(std::move(pairs)), ranges_only_(ranges_only) {
    if (!pairs_ || pairs_->tables.empty()) return;
    const size_t ncols = tok_.columns().size();
    by_child_.resize(ncols);
    for (const PairTable& t : pairs_->tables) by_child_[size_t(t.child)].push_back(&t);
    first_.assign(size_t(slots), std::vector<int32_t>(ncols, -1));
  }

  void Begin(int slot) override {
    tok_.Begin(&cur_[size_t(slot)], nullptr);
    if (!first_.empty()) std::fill(first_[size_t(slot)].begin(), first_[size_t(slot)].end(), -1);
  }
  void Accept(int slot, int32_t token) override {
    if (token == tok_.end_id()) return;  // the record's end (or the <n> fed first)
    FieldTokenizer::Cursor& c = cur_[size_t(slot)];
    if (!first_.empty() && !c.broken && c.part == 0 && c.col < int(by_child_.size()))
      first_[size_t(slot)][size_t(c.col)] = token;
    tok_.Advance(&c, token, nullptr);
  }
  void Mask(int slot, float* logits) override {
    if (ranges_only_) return;  // the sampler samples inside Range() only
    const FieldTokenizer::Cursor& c = cur_[size_t(slot)];
    tok_.Mask(c, logits);
    if (first_.empty() || c.broken || c.part != 0 || c.col >= int(by_child_.size())) return;
    for (const PairTable* t : by_child_[size_t(c.col)]) {
      const int32_t pid = first_[size_t(slot)][size_t(t->parent)];
      if (pid < t->plo || pid >= t->phi) continue;  // no parent value: no correction
      const float* w = t->w.data() + size_t(t->Row(pid)) * size_t(t->cols);
      for (int id = t->lo; id < t->hi; ++id) logits[id] += w[t->Col(id)];
    }
  }
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
  std::shared_ptr<const PairTables> pairs_;
  bool ranges_only_;
  std::vector<std::vector<const PairTable*>> by_child_;  // [column] tables of that child
  std::vector<std::vector<int32_t>> first_;               // [slot][column] first token id, -1
};

}  // namespace

std::unique_ptr<TokenFilter> NewFieldFilter(const FieldTokenizer& tok, int slots,
                                            std::shared_ptr<const PairTables> pairs,
                                            bool ranges_only) {
  return std::make_unique<FieldFilter>(tok, slots, std::move(pairs), ranges_only);
}

}  // namespace ds
