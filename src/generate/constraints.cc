#include "generate/constraints.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <unordered_map>

namespace ds {

namespace {

using i128 = __int128;

constexpr int kMaxIntDigits = 18;   // ParseRuleInteger's limit, used for decimals too
constexpr int kMaxFracDigits = 18;  // fraction digits when max_decimals = -1
constexpr int kMaxExpDigits = 2;    // |exponent| <= 99: strtod stays finite
constexpr int kLiveBudget = 4096;   // digit-by-digit completion search (sparse digit sets)

i128 Pow10(int k) {
  i128 p = 1;
  for (int i = 0; i < k; ++i) p *= 10;
  return p;
}

// ---------------------------------------------------------------------------
// Exact decimal scaling of a double's shortest representation.

// Sets *out = floor(x 10^m) (or ceil). False when it does not fit in ~1e36.
bool ScaleDecimal(double x, int m, bool ceil, i128* out) {
  if (!std::isfinite(x)) return false;
  std::string s = fmt::format("{}", x);  // shortest round-trip form: "-18.8", "1e+20"
  bool neg = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
  i128 digits = 0;
  int ndig = 0, exp10 = 0;
  bool dot = false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c >= '0' && c <= '9') {
      if (ndig > 30) return false;
      digits = digits * 10 + (c - '0');
      if (digits != 0) ++ndig;
      if (dot) --exp10;
    } else if (c == '.') {
      dot = true;
    } else if (c == 'e' || c == 'E') {
      exp10 += std::atoi(s.c_str() + i + 1);
      break;
    } else {
      return false;
    }
  }
  int shift = exp10 + m;  // value * 10^m = digits * 10^shift
  i128 q;
  bool exact = true;
  if (shift >= 0) {
    if (ndig + shift > 36) return false;
    q = digits * Pow10(shift);
  } else if (-shift > 36) {
    q = 0;
    exact = digits == 0;
  } else {
    i128 p = Pow10(-shift);
    q = digits / p;
    exact = digits % p == 0;
  }
  // q = floor(|x| 10^m); adjust for sign and rounding direction.
  if (neg) {
    q = -q;
    if (!exact && !ceil) q -= 1;
  } else if (!exact && ceil) {
    q += 1;
  }
  *out = q;
  return true;
}

// ---------------------------------------------------------------------------
// Number grammar.

struct NumberForm {
  bool minus = true, plus = true;
  int max_frac = 0;  // 0 = integer (no point); > 0 = at most that many fraction digits
  bool exponent = false;
  bool range = false;
  int scale = 0;  // m: values scaled by S = 10^m
  i128 S = 1;
  i128 lo = 0, hi = 0;           // scaled bounds [A, B]
  std::array<bool, 10> digit{};  // digit d is a text token of the vocabulary
  bool all_digits = false, any_digit = false;
};

enum Phase : uint8_t { kStart, kSign, kInt, kDot, kFrac, kExpMark, kExpSign, kExp };

struct NumState {
  uint8_t phase = kStart;
  bool neg = false;
  int8_t ni = 0, nf = 0, ne = 0;  // digits of the int part, fraction, exponent
  uint64_t iv = 0, fv = 0;        // int part value, fraction digits as an integer
};

bool IsDigit(unsigned char c) { return c >= '0' && c <= '9'; }

// One byte of the grammar; false = the byte cannot follow.
bool NumStep(const NumberForm& f, NumState* s, unsigned char c) {
  switch (s->phase) {
    case kStart:
      if (c == '-' && f.minus) {
        s->neg = true;
        s->phase = kSign;
        return true;
      }
      if (c == '+' && f.plus) {
        s->phase = kSign;
        return true;
      }
      [[fallthrough]];
    case kSign:
      if (IsDigit(c)) {
        s->phase = kInt;
        s->ni = 1;
        s->iv = c - '0';
        return true;
      }
      if (c == '.' && f.max_frac != 0) {
        s->phase = kDot;
        return true;
      }
      return false;
    case kInt:
      if (IsDigit(c)) {
        if (s->iv == 0 || s->ni >= kMaxIntDigits) return false;  // leading zero / too long
        ++s->ni;
        s->iv = s->iv * 10 + uint64_t(c - '0');
        return true;
      }
      if (c == '.' && f.max_frac != 0) {
        s->phase = kDot;
        return true;
      }
      if ((c == 'e' || c == 'E') && f.exponent) {
        s->phase = kExpMark;
        return true;
      }
      return false;
    case kDot:
    case kFrac:
      if (IsDigit(c)) {
        if (s->nf >= f.max_frac) return false;
        ++s->nf;
        s->fv = s->fv * 10 + uint64_t(c - '0');
        s->phase = kFrac;
        return true;
      }
      if ((c == 'e' || c == 'E') && f.exponent && s->phase == kFrac) {
        s->phase = kExpMark;
        return true;
      }
      return false;
    case kExpMark:
      if (c == '+' || c == '-') {
        s->phase = kExpSign;
        return true;
      }
      [[fallthrough]];
    case kExpSign:
    case kExp:
      if (IsDigit(c) && s->ne < kMaxExpDigits) {
        ++s->ne;
        s->phase = kExp;
        return true;
      }
      return false;
  }
  return false;
}

bool Complete(const NumState& s) { return s.phase == kInt || s.phase == kFrac || s.phase == kExp; }

// Magnitude interval [L, H] (scaled) for the sign of `s`.
bool Magnitude(const NumberForm& f, bool neg, i128* L, i128* H) {
  if (!neg) {
    *L = std::max<i128>(f.lo, 0);
    *H = f.hi;
  } else {
    *L = std::max<i128>(-f.hi, 0);
    *H = -f.lo;
  }
  return *L <= *H;
}

// Scaled value of a complete, exponent-free state.
i128 Value(const NumberForm& f, const NumState& s) {
  i128 v = i128(s.iv) * f.S;
  if (s.phase == kFrac) v += i128(s.fv) * Pow10(f.scale - s.nf);
  return v;
}

// Some completion of `s` (any digits) has a magnitude in [L, H] (range on).
bool Reachable(const NumberForm& f, const NumState& s, i128 L, i128 H) {
  const i128 frac_fill = f.max_frac != 0 ? f.S - 1 : 0;
  switch (s.phase) {
    case kStart:
    case kSign:
      return L <= Pow10(kMaxIntDigits) * f.S - 1;
    case kInt: {
      if (s.iv == 0) return L <= frac_fill;  // "0" or "0.xxx"
      for (int k = 0; s.ni + k <= kMaxIntDigits; ++k) {
        i128 p = Pow10(k);
        i128 lo = i128(s.iv) * p * f.S;
        if (lo > H) break;
        i128 hi = (i128(s.iv) * p + p - 1) * f.S + frac_fill;
        if (hi >= L) return true;
      }
      return false;
    }
    case kDot: {
      i128 base = i128(s.iv) * f.S;
      return base <= H && base + f.S - 1 >= L;
    }
    case kFrac: {
      i128 u = Pow10(f.scale - s.nf);
      i128 base = i128(s.iv) * f.S + i128(s.fv) * u;
      return base <= H && base + u - 1 >= L;
    }
    default:
      return true;  // exponent part: the range is not enforced (f.range is off)
  }
}

// The field may end here: syntactically complete and, with a range, inside it.
bool NumAccepting(const NumberForm& f, const NumState& s) {
  if (!Complete(s)) return false;
  if (!f.range) return true;
  i128 L, H;
  if (!Magnitude(f, s.neg, &L, &H)) return false;
  i128 v = Value(f, s);
  return v >= L && v <= H;
}

bool ReachableAny(const NumberForm& f, const NumState& s) {
  i128 L, H;
  if (s.phase == kStart) {
    if (Magnitude(f, false, &L, &H) && Reachable(f, s, L, H)) return true;
    return f.minus && Magnitude(f, true, &L, &H) && Reachable(f, s, L, H);
  }
  return Magnitude(f, s.neg, &L, &H) && Reachable(f, s, L, H);
}

// Digit-by-digit search for a completion using only the vocabulary's digits.
bool LiveSearch(const NumberForm& f, const NumState& s, int* budget) {
  if (NumAccepting(f, s)) return true;
  if (--*budget < 0) return true;  // give up: assume live
  static const char kNext[] = "0123456789.-";
  for (const char* p = kNext; *p; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (IsDigit(c) && !f.digit[c - '0']) continue;
    NumState t = s;
    if (!NumStep(f, &t, c) || !ReachableAny(f, t)) continue;
    if (LiveSearch(f, t, budget)) return true;
  }
  return false;
}

// Some completion of `s` can still end the field.
bool NumLive(const NumberForm& f, const NumState& s) {
  if (!f.any_digit) return false;
  if (!f.range) return true;  // every non-dead state completes with any digit
  if (!ReachableAny(f, s)) return false;
  if (f.all_digits) return true;
  int budget = kLiveBudget;
  return LiveSearch(f, s, &budget);
}

// ---------------------------------------------------------------------------
// Byte tries (categories, missing spellings) with token-level moves.

struct Trie {
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> kids;   // sorted by byte
    std::vector<std::pair<int32_t, int32_t>> moves;  // (token, node), sorted by token
    bool terminal = false;
    bool live = false;
  };
  std::vector<Node> nodes;

  Trie() { nodes.emplace_back(); }
  int32_t Kid(int32_t n, uint8_t b) const {
    const auto& k = nodes[size_t(n)].kids;
    auto it = std::lower_bound(k.begin(), k.end(), std::make_pair(b, int32_t(-1)));
    return it != k.end() && it->first == b ? it->second : -1;
  }
  void Insert(std::string_view s) {
    int32_t n = 0;
    for (unsigned char b : s) {
      int32_t k = Kid(n, b);
      if (k < 0) {
        k = int32_t(nodes.size());
        nodes.emplace_back();  // may reallocate: index again below
        auto& kids = nodes[size_t(n)].kids;
        kids.insert(std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, int32_t(-1))),
                    {b, k});
      }
      n = k;
    }
    nodes[size_t(n)].terminal = true;
  }
  // Target of `token` from `n`, -1 when not allowed.
  int32_t Move(int32_t n, int32_t token) const {
    const auto& m = nodes[size_t(n)].moves;
    auto it = std::lower_bound(m.begin(), m.end(), std::make_pair(token, int32_t(-1)));
    return it != m.end() && it->first == token ? it->second : -1;
  }
};

// Byte trie of the vocabulary's text tokens (a node may end several tokens).
struct VocabTrie {
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> kids;
    std::vector<int32_t> tokens;
  };
  std::vector<Node> nodes;
  explicit VocabTrie(const Tokenizer& tok) {
    std::vector<int32_t> ids;
    for (int id = 0; id < tok.vocab_size(); ++id)
      if (tok.kind(id) == TokenKind::kText && !tok.text(id).empty()) ids.push_back(id);
    Build(tok, ids);
  }
  VocabTrie(const Tokenizer& tok, const std::vector<int32_t>& ids) { Build(tok, ids); }
  void Build(const Tokenizer& tok, const std::vector<int32_t>& ids) {
    nodes.emplace_back();
    for (int32_t id : ids) {
      int32_t n = 0;
      for (unsigned char b : tok.text(id)) {
        int32_t k = Kid(n, b);
        if (k < 0) {
          k = int32_t(nodes.size());
          nodes.emplace_back();
          auto& kids = nodes[size_t(n)].kids;
          kids.insert(std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, int32_t(-1))),
                      {b, k});
        }
        n = k;
      }
      nodes[size_t(n)].tokens.push_back(id);
    }
  }
  int32_t Kid(int32_t n, uint8_t b) const {
    const auto& k = nodes[size_t(n)].kids;
    auto it = std::lower_bound(k.begin(), k.end(), std::make_pair(b, int32_t(-1)));
    return it != k.end() && it->first == b ? it->second : -1;
  }
};

// Fills every node's token moves (walking both tries together) and liveness
// (a category can still be completed). Trie edges go to higher indices, so a
// reverse sweep sees every target before its sources.
void LinkTrie(Trie* t, const VocabTrie& v) {
  std::vector<std::pair<int32_t, int32_t>> stack;  // (vocab node, trie node)
  for (size_t n = 0; n < t->nodes.size(); ++n) {
    auto& moves = t->nodes[n].moves;
    stack.assign(1, {0, int32_t(n)});
    while (!stack.empty()) {
      auto [u, c] = stack.back();
      stack.pop_back();
      for (const auto& [b, c2] : t->nodes[size_t(c)].kids) {
        int32_t u2 = v.Kid(u, b);
        if (u2 < 0) continue;
        for (int32_t tok : v.nodes[size_t(u2)].tokens) moves.push_back({tok, c2});
        stack.push_back({u2, c2});
      }
    }
    std::sort(moves.begin(), moves.end());
  }
  for (size_t n = t->nodes.size(); n-- > 0;) {
    auto& node = t->nodes[n];
    std::erase_if(node.moves, [&](const auto& m) { return !t->nodes[size_t(m.second)].live; });
    node.live = node.terminal || !node.moves.empty();
  }
}

// ---------------------------------------------------------------------------
// Tables.

enum class FieldKind : uint8_t { kText, kTrie, kNumber };

struct ColumnPlan {
  FieldKind kind = FieldKind::kText;
  bool empty_ok = true;
  bool has_trie = false;  // kTrie: categories + missing; kNumber: missing spellings
  Trie trie;
  NumberForm num;
  std::vector<int32_t> num_tokens;      // kNumber: text tokens made only of number bytes
  std::unique_ptr<VocabTrie> num_trie;  // kNumber: byte trie of num_tokens
  std::string describe;
};

class Tables : public RecordConstraints {
 public:
  ConstraintLevel level() const override { return level_; }
  const std::vector<std::string>& unenforced() const override { return unenforced_; }
  std::string Describe() const override {
    std::string out;
    for (size_t k = 0; k < cols_.size(); ++k)
      out += fmt::format("field {} '{}': {}\n", k + 1, names_[k], cols_[k].describe);
    return out;
  }

  const Tokenizer* tok_ = nullptr;
  ConstraintLevel level_ = ConstraintLevel::kStructure;
  bool markers_ = false;
  int K_ = 0, V_ = 0;
  std::vector<ColumnPlan> cols_;
  std::vector<std::string> names_;
  std::vector<int32_t> specials_;  // every non-text id (masked in text fields but the separator)
  std::vector<int32_t> ends_;      // every "end of field" id: <d>, <colK>, <n>
  std::vector<std::string> unenforced_;

  int32_t Separator(int field) const {
    if (field == K_ - 1) return tok_->end_id();
    return markers_ ? tok_->column_id(field + 1) : tok_->delimiter_id();
  }
};

bool NumberByte(const NumberForm& f, unsigned char c) {
  if (IsDigit(c)) return true;
  if (c == '.') return f.max_frac != 0;
  if (c == '-') return f.minus || f.exponent;
  if (c == '+') return f.plus || f.exponent;
  if (c == 'e' || c == 'E') return f.exponent;
  return false;
}

std::string ShowDouble(double v) { return fmt::format("{}", v); }

// Number form of an integer / decimal column.
void PlanNumber(const Tokenizer& tok, const ColumnRule& r, bool values, bool check_range,
                const std::string& where, ColumnPlan* p, std::vector<std::string>* unenforced) {
  NumberForm& f = p->num;
  const bool dec = r.type == ColumnType::kDecimal;
  f.max_frac = !dec ? 0 : r.max_decimals < 0 ? kMaxFracDigits : r.max_decimals;
  f.exponent = dec && r.max_decimals < 0;
  const bool want_range = values && check_range && r.has_range;
  if (want_range) {
    bool ok = !f.exponent && f.max_frac <= kMaxFracDigits;
    if (ok) {
      f.scale = f.max_frac;
      f.S = Pow10(f.scale);
      if (!dec) {
        f.lo = r.int_min;
        f.hi = r.int_max;
      } else {
        ok = ScaleDecimal(r.min, f.scale, true, &f.lo) &&
             ScaleDecimal(r.max, f.scale, false, &f.hi) && f.lo <= f.hi;
      }
    }
    if (ok) {
      f.range = true;
      f.minus = f.lo < 0;
      f.plus = false;
    } else {
      unenforced->push_back(
          fmt::format("{}: range [{}, {}] is checked after sampling only ({})", where,
                      dec ? ShowDouble(r.min) : std::to_string(r.int_min),
                      dec ? ShowDouble(r.max) : std::to_string(r.int_max),
                      f.exponent ? "exponent notation" : "too many decimal places"));
    }
  }
  for (int d = 0; d < 10; ++d) f.digit[d] = false;
  for (int id = 0; id < tok.vocab_size(); ++id) {
    if (tok.kind(id) != TokenKind::kText) continue;
    const std::string& t = tok.text(id);
    if (t.empty()) continue;
    bool all = true;
    for (unsigned char c : t) all = all && NumberByte(f, c);
    if (all) p->num_tokens.push_back(id);
    if (t.size() == 1 && IsDigit(static_cast<unsigned char>(t[0]))) f.digit[t[0] - '0'] = true;
  }
  p->num_trie = std::make_unique<VocabTrie>(tok, p->num_tokens);
  f.all_digits = std::all_of(f.digit.begin(), f.digit.end(), [](bool b) { return b; });
  f.any_digit = std::any_of(f.digit.begin(), f.digit.end(), [](bool b) { return b; });
  std::string form = !dec         ? "integer"
                     : f.exponent ? "decimal with exponent"
                                  : fmt::format("decimal, at most {} decimal places", f.max_frac);
  if (f.range)
    p->describe =
        fmt::format("{} in [{}, {}]", form, dec ? ShowDouble(r.min) : std::to_string(r.int_min),
                    dec ? ShowDouble(r.max) : std::to_string(r.int_max));
  else
    p->describe = form;
}

// Text tokens allowed from number state `s0`: a walk of the column's
// number-token trie, pruned at the first byte that breaks the grammar or
// leaves the range out of reach (no longer token can repair either).
void NumAllowed(const ColumnPlan& c, const NumState& s0, std::vector<int32_t>* out) {
  const VocabTrie& v = *c.num_trie;
  std::vector<std::pair<int32_t, NumState>> stack = {{0, s0}};
  while (!stack.empty()) {
    auto [u, s] = stack.back();
    stack.pop_back();
    for (const auto& [b, u2] : v.nodes[size_t(u)].kids) {
      NumState t = s;
      if (!NumStep(c.num, &t, b)) continue;
      if (c.num.range && !ReachableAny(c.num, t)) continue;
      const auto& node = v.nodes[size_t(u2)];
      if (!node.tokens.empty() && NumLive(c.num, t))
        out->insert(out->end(), node.tokens.begin(), node.tokens.end());
      if (!node.kids.empty()) stack.push_back({u2, t});
    }
  }
}

// Cache key of a number state: what the allowed set depends on (the digit
// values only matter with a range).
struct NumKey {
  uint32_t shape;
  uint64_t iv, fv;
  bool operator==(const NumKey&) const = default;
};
struct NumKeyHash {
  size_t operator()(const NumKey& k) const {
    uint64_t h = k.shape * 0x9E3779B97F4A7C15ull;
    h ^= k.iv + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h ^= k.fv + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return size_t(h);
  }
};
NumKey KeyOf(const NumberForm& f, const NumState& s) {
  uint32_t shape = uint32_t(s.phase) | uint32_t(s.neg) << 3 | uint32_t(s.ni) << 4 |
                   uint32_t(s.nf) << 9 | uint32_t(s.ne) << 14 | uint32_t(s.iv == 0) << 17;
  return f.range ? NumKey{shape, s.iv, s.fv} : NumKey{shape, 0, 0};
}
constexpr size_t kMaxCachedStates = 16384;  // per column and filter

// ---------------------------------------------------------------------------
// The filter: one automaton state per slot.

class ConstraintFilter : public TokenFilter {
 public:
  ConstraintFilter(std::shared_ptr<const Tables> t, int slots)
      : t_(std::move(t)), slots_(size_t(std::max(slots, 0))), cache_(t_->cols_.size()) {
    keep_.reserve(256);
  }

  void Begin(int slot) override {
    Slot& s = slots_.at(size_t(slot));
    s = Slot{};
    if (t_->markers_) {
      s.field = -1;
    } else {
      StartField(&s, 0);
    }
  }

  void Accept(int slot, int32_t token) override {
    Slot& s = slots_[size_t(slot)];
    if (s.off) return;
    const Tokenizer& tok = *t_->tok_;
    switch (tok.kind(token)) {
      case TokenKind::kText:
        if (s.field < 0) {
          s.off = true;
        } else {
          AcceptText(&s, token);
        }
        return;
      case TokenKind::kColumn: {
        int k = tok.column(token);
        if (k == s.field + 1 && k < t_->K_)
          StartField(&s, k);
        else
          s.off = true;
        return;
      }
      case TokenKind::kDelimiter:
        if (!t_->markers_ && s.field + 1 < t_->K_)
          StartField(&s, s.field + 1);
        else
          s.off = true;
        return;
      default:  // <n> (the record ended) or an unused id
        s.off = true;
        return;
    }
  }

  void Mask(int slot, float* logits) override {
    const Slot& s = slots_[size_t(slot)];
    if (s.off) return;
    const Tables& t = *t_;
    if (s.field < 0) {  // only <col0>
      KeepOnly(logits, {}, t.tok_->column_id(0));
      return;
    }
    const ColumnPlan& c = t.cols_[size_t(s.field)];
    const int32_t sep = Accepting(s, c) ? t.Separator(s.field) : -1;
    // The separator takes the probability of every end-of-field token.
    const float sep_logit = sep >= 0 ? EndOfFieldLogit(logits) : 0.0f;
    if (s.free || c.kind == FieldKind::kText) {
      for (int32_t id : t.specials_)
        if (id != sep) logits[id] = -INFINITY;
      if (sep >= 0) logits[sep] = sep_logit;
      return;
    }
    allowed_.clear();
    if (s.node >= 0)
      for (const auto& m : c.trie.nodes[size_t(s.node)].moves) allowed_.push_back(m.first);
    if (s.num_on) {
      auto& cache = cache_[size_t(s.field)];
      const NumKey key = KeyOf(c.num, s.num);
      auto it = cache.find(key);
      if (it != cache.end()) {
        allowed_.insert(allowed_.end(), it->second.begin(), it->second.end());
      } else {
        const size_t from = allowed_.size();
        NumAllowed(c, s.num, &allowed_);
        if (cache.size() < kMaxCachedStates)
          cache.emplace(key, std::vector<int32_t>(allowed_.begin() + from, allowed_.end()));
      }
    }
    KeepOnly(logits, allowed_, sep);
    if (sep >= 0) logits[sep] = sep_logit;
  }

  void SetTemperature(double temperature) override {
    temperature_ = temperature > 1e-6 ? temperature : 1e-6;
  }

 private:
  struct Slot {
    int field = -1;
    bool off = false;       // no constraint for the rest of the record
    bool free = false;      // current field unconstrained (a forced token broke it)
    bool nonempty = false;  // the current field has text
    int32_t node = -1;      // trie position, -1 = none
    bool num_on = false;    // the number grammar is still possible
    NumState num;
  };

  void StartField(Slot* s, int k) {
    const ColumnPlan& c = t_->cols_[size_t(k)];
    s->field = k;
    s->free = false;
    s->nonempty = false;
    s->node = c.has_trie && c.trie.nodes[0].live ? 0 : -1;
    s->num_on = c.kind == FieldKind::kNumber && NumLive(c.num, NumState{});
    s->num = NumState{};
  }

  void AcceptText(Slot* s, int32_t token) {
    s->nonempty = true;
    if (s->free) return;
    const ColumnPlan& c = t_->cols_[size_t(s->field)];
    if (c.kind == FieldKind::kText) return;
    if (s->node >= 0) s->node = c.trie.Move(s->node, token);
    if (s->num_on) {
      bool ok = true;
      for (unsigned char b : t_->tok_->text(token))
        if (!(ok = NumStep(c.num, &s->num, b))) break;
      s->num_on = ok && NumLive(c.num, s->num);
    }
    if (s->node < 0 && !s->num_on) s->free = true;
  }

  bool Accepting(const Slot& s, const ColumnPlan& c) const {
    if (!s.nonempty) return c.empty_ok;
    if (s.free || c.kind == FieldKind::kText) return true;
    if (s.node >= 0 && c.trie.nodes[size_t(s.node)].terminal) return true;
    return s.num_on && NumAccepting(c.num, s.num);
  }

  // The logit whose probability at the sampling temperature T is the sum of
  // the end-of-field tokens' probabilities:
  //   T * log sum_{e in ends} exp(logit_e / T).
  // When a field may end, the network's wish to end it is honoured whichever
  // separator it spelled: a wrong column marker (it lost count of the fields)
  // or <n> in the middle of a record become the one valid separator, instead
  // of being masked out and leaving the field to run on.
  float EndOfFieldLogit(const float* logits) const {
    const double inv_t = 1.0 / temperature_;
    float mx = -INFINITY;
    for (int32_t id : t_->ends_) mx = std::max(mx, logits[id]);
    if (!std::isfinite(mx)) return mx;
    double sum = 0;
    for (int32_t id : t_->ends_) sum += std::exp(double(logits[id] - mx) * inv_t);
    return float(double(mx) + temperature_ * std::log(sum));
  }

  // logits[v] = -inf for every v but `ids` and `extra` (-1 = none).
  void KeepOnly(float* logits, const std::vector<int32_t>& ids, int32_t extra) {
    keep_.clear();
    for (int32_t id : ids) keep_.push_back({id, logits[id]});
    if (extra >= 0) keep_.push_back({extra, logits[extra]});
    std::fill(logits, logits + t_->V_, -INFINITY);
    for (const auto& [id, v] : keep_) logits[id] = v;
  }

  std::shared_ptr<const Tables> t_;
  std::vector<Slot> slots_;
  std::vector<int32_t> allowed_;  // scratch: allowed text ids
  // Per column: number state -> allowed text ids (this filter's memo).
  std::vector<std::unordered_map<NumKey, std::vector<int32_t>, NumKeyHash>> cache_;
  std::vector<std::pair<int32_t, float>> keep_;  // scratch: kept logits
  double temperature_ = 1.0;
};

}  // namespace

// ---------------------------------------------------------------------------

Result<ConstraintLevel> ParseConstraintLevel(std::string_view name) {
  if (name == "auto") return ConstraintLevel::kAuto;
  if (name == "none") return ConstraintLevel::kNone;
  if (name == "structure") return ConstraintLevel::kStructure;
  if (name == "values") return ConstraintLevel::kValues;
  return DS_ERR(kInvalidArgument,
                "unknown constraint level '{}' (expected structure, values, none or auto)", name);
}

const char* ConstraintLevelName(ConstraintLevel level) {
  switch (level) {
    case ConstraintLevel::kAuto:
      return "auto";
    case ConstraintLevel::kNone:
      return "none";
    case ConstraintLevel::kStructure:
      return "structure";
    case ConstraintLevel::kValues:
      return "values";
  }
  return "auto";
}

bool RulesHoldValues(const ColumnRules& rules) {
  for (const auto& c : rules.columns()) {
    if (c.type == ColumnType::kCategory && !c.categories.empty()) return true;
    if ((c.type == ColumnType::kInteger || c.type == ColumnType::kDecimal) && c.has_range)
      return true;
  }
  return false;
}

ConstraintLevel ResolveConstraintLevel(ConstraintLevel level, const ColumnRules& rules) {
  if (level != ConstraintLevel::kAuto) return level;
  return RulesHoldValues(rules) ? ConstraintLevel::kValues : ConstraintLevel::kStructure;
}

Result<std::shared_ptr<const RecordConstraints>> RecordConstraints::Build(const Tokenizer& tok,
                                                                          const ColumnRules& rules,
                                                                          ConstraintLevel level) {
  level = ResolveConstraintLevel(level, rules);
  if (level == ConstraintLevel::kNone)
    return DS_ERR(kInvalidArgument, "constraint level 'none' has no tables");
  const int K = int(rules.field_count());
  if (K == 0) return DS_ERR(kInvalidArgument, "constrained decoding needs at least one column");
  auto t = std::make_shared<Tables>();
  t->tok_ = &tok;
  t->level_ = level;
  t->markers_ = tok.column_markers();
  t->K_ = K;
  t->V_ = tok.vocab_size();
  if (t->markers_) {
    if (tok.num_columns() != K)
      return DS_ERR(kInvalidArgument,
                    "the tokenizer has column markers for {} columns, the rules have {}",
                    tok.num_columns(), K);
  } else if (tok.delimiter_id() < 0) {
    return DS_ERR(kInvalidArgument,
                  "the tokenizer has neither a field delimiter nor column markers");
  }
  for (int id = 0; id < t->V_; ++id) {
    const TokenKind kind = tok.kind(id);
    if (kind != TokenKind::kText) t->specials_.push_back(id);
    if (kind == TokenKind::kDelimiter || kind == TokenKind::kColumn ||
        kind == TokenKind::kEndOfRecord)
      t->ends_.push_back(id);
  }

  const RuleChecks& chk = rules.checks();
  const bool values = level == ConstraintLevel::kValues;
  std::unique_ptr<VocabTrie> vocab;  // built on first use
  for (int k = 0; k < K; ++k) {
    const ColumnRule& r = rules.columns()[size_t(k)];
    const std::string where = fmt::format("field {} '{}'", k + 1, r.name);
    ColumnPlan p;
    p.empty_ok = r.empty_allowed || !chk.empty;
    const bool number =
        chk.type && (r.type == ColumnType::kInteger || r.type == ColumnType::kDecimal);
    const bool category = values && chk.category && r.type == ColumnType::kCategory;
    if (number || category) {
      p.kind = number ? FieldKind::kNumber : FieldKind::kTrie;
      if (category)
        for (const auto& v : r.categories)
          if (!v.empty()) p.trie.Insert(v);
      for (const auto& v : r.missing_values) p.trie.Insert(v);
      p.has_trie = category || !r.missing_values.empty();
      if (p.has_trie) {
        if (!vocab) vocab = std::make_unique<VocabTrie>(tok);
        LinkTrie(&p.trie, *vocab);
      }
      if (number) PlanNumber(tok, r, values, chk.range, where, &p, &t->unenforced_);
      if (category) p.describe = fmt::format("one of {} categories", r.categories.size());
      if (!r.missing_values.empty())
        p.describe += fmt::format(" or a missing value ({})", fmt::join(r.missing_values, ", "));
      const bool can_start = (p.has_trie && p.trie.nodes[0].live) ||
                             (number && NumLive(p.num, NumState{})) || p.empty_ok;
      if (!can_start) {
        t->unenforced_.push_back(
            fmt::format("{}: its values cannot be spelled with the vocabulary's tokens; the "
                        "field is sampled as text and checked after sampling",
                        where));
        p = ColumnPlan{};
        p.empty_ok = r.empty_allowed || !chk.empty;
      }
    }
    if (p.kind == FieldKind::kText) p.describe = "text";
    p.describe += p.empty_ok ? ", may be empty" : ", never empty";
    t->cols_.push_back(std::move(p));
    t->names_.push_back(r.name);
  }
  return std::shared_ptr<const RecordConstraints>(std::move(t));
}

std::unique_ptr<TokenFilter> NewConstraintFilter(std::shared_ptr<const RecordConstraints> tables,
                                                 int slots) {
  auto t = std::dynamic_pointer_cast<const Tables>(tables);
  DS_CHECK(t != nullptr);
  return std::make_unique<ConstraintFilter>(std::move(t), slots);
}

Result<std::unique_ptr<TokenFilter>> MakeRecordConstraints(const Tokenizer& tok,
                                                           const ColumnRules& rules,
                                                           ConstraintLevel level, int slots) {
  level = ResolveConstraintLevel(level, rules);
  if (level == ConstraintLevel::kNone || rules.field_count() == 0)
    return std::unique_ptr<TokenFilter>();
  DS_ASSIGN_OR_RETURN(auto tables, RecordConstraints::Build(tok, rules, level));
  return NewConstraintFilter(std::move(tables), slots);
}

}  // namespace ds
