// Constrained decoding (generate/constraints.h): the record automaton with
// hand-made rules on real char / SentencePiece tokenizers (category trie,
// numbers with sign / decimals / range, empty fields, missing spellings,
// structure only), exhaustive agreement with ColumnRules::Validate on short
// strings, and generation with random logits: every record valid, with start
// strings, in-process and in worker processes alike.
#include "generate/constraints.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "generate/generator.h"
#include "generate/workers.h"
#include "util/rng.h"

namespace ds {
namespace {

// ---- helpers ----------------------------------------------------------------

std::unique_ptr<Tokenizer> Train(const std::vector<std::vector<std::string>>& records,
                                 const std::string& type, bool markers, int vocab = 0) {
  TokenizerConfig c;
  c.type = type;
  c.column_markers = markers;
  c.num_columns = markers ? int(records.at(0).size()) : 0;
  if (vocab > 0) c.vocab_size = vocab;
  c.seed = 3;
  auto t = TrainTokenizer(c, records);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(t).value() : nullptr;
}

ColumnRule Category(std::string name, std::vector<std::string> cats, bool empty = false) {
  ColumnRule r;
  r.name = std::move(name);
  r.type = ColumnType::kCategory;
  std::sort(cats.begin(), cats.end());
  r.categories = std::move(cats);
  r.empty_allowed = empty;
  return r;
}
ColumnRule Integer(std::string name, int64_t lo, int64_t hi, bool empty = false) {
  ColumnRule r;
  r.name = std::move(name);
  r.type = ColumnType::kInteger;
  r.int_min = lo;
  r.int_max = hi;
  r.empty_allowed = empty;
  return r;
}
ColumnRule Decimal(std::string name, double lo, double hi, int decimals, bool empty = false) {
  ColumnRule r;
  r.name = std::move(name);
  r.type = ColumnType::kDecimal;
  r.min = lo;
  r.max = hi;
  r.max_decimals = decimals;
  r.empty_allowed = empty;
  return r;
}
ColumnRule Text(std::string name, bool empty) {
  ColumnRule r;
  r.name = std::move(name);
  r.empty_allowed = empty;
  return r;
}
ColumnRules Rules(std::vector<ColumnRule> cols) {
  ColumnRules r;
  r.mutable_columns() = std::move(cols);
  return r;
}

// Drives one slot of a filter and reads back what it allows.
struct Driver {
  const Tokenizer& tok;
  std::unique_ptr<TokenFilter> f;
  std::vector<float> logits;

  Driver(const Tokenizer& t, const ColumnRules& rules, ConstraintLevel level) : tok(t) {
    auto m = MakeRecordConstraints(t, rules, level, 2);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (m.ok()) f = std::move(m).value();
    logits.resize(size_t(t.vocab_size()));
  }
  void Begin() { f->Begin(1); }
  void Feed(int32_t id) { f->Accept(1, id); }
  void FeedText(const std::string& s) {
    std::vector<int32_t> ids;
    ASSERT_TRUE(tok.EncodeField(s, &ids).ok()) << s;
    for (int32_t id : ids) Feed(id);
  }
  // Opens field k (after Begin): <col0>..<colk> or k delimiters, no text.
  std::vector<bool> Mask() {
    std::fill(logits.begin(), logits.end(), 0.0f);
    f->Mask(1, logits.data());
    std::vector<bool> ok(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) ok[i] = std::isfinite(logits[i]);
    return ok;
  }
  // Allowed tokens as text; specials as <n>, <d>, <colK>.
  std::set<std::string> Allowed() {
    std::set<std::string> out;
    auto ok = Mask();
    for (int id = 0; id < int(ok.size()); ++id) {
      if (!ok[size_t(id)]) continue;
      switch (tok.kind(id)) {
        case TokenKind::kText:
          out.insert(tok.text(id));
          break;
        case TokenKind::kEndOfRecord:
          out.insert("<n>");
          break;
        case TokenKind::kDelimiter:
          out.insert("<d>");
          break;
        case TokenKind::kColumn:
          out.insert(fmt::format("<col{}>", tok.column(id)));
          break;
        default:
          out.insert("<unused>");
      }
    }
    return out;
  }
  bool Allows(int32_t id) { return Mask()[size_t(id)]; }
  bool AllowsText(const std::string& s) {
    std::vector<int32_t> ids;
    if (!tok.EncodeField(s, &ids).ok() || ids.size() != 1) return false;
    return Allows(ids[0]);
  }
};

std::set<std::string> S(std::initializer_list<const char*> l) {
  std::set<std::string> s;
  for (const char* x : l) s.insert(x);
  return s;
}

std::set<std::string> Digits(const std::string& ds) {
  std::set<std::string> s;
  for (char c : ds) s.insert(std::string(1, c));
  return s;
}

std::set<std::string> Union(std::set<std::string> a, const std::set<std::string>& b) {
  a.insert(b.begin(), b.end());
  return a;
}

// Every character a test needs, in one two-column training set.
std::vector<std::vector<std::string>> CharRecords() {
  return {
      {"DSL", "0123456789"}, {"Fiber optic", "-.+eE"}, {"No phone service", "NA x"}, {"No", "1"}};
}

// ---- levels -------------------------------------------------------------------

TEST(ConstraintLevel, ParseAndResolve) {
  EXPECT_EQ(ParseConstraintLevel("structure").value(), ConstraintLevel::kStructure);
  EXPECT_EQ(ParseConstraintLevel("values").value(), ConstraintLevel::kValues);
  EXPECT_EQ(ParseConstraintLevel("none").value(), ConstraintLevel::kNone);
  EXPECT_EQ(ParseConstraintLevel("auto").value(), ConstraintLevel::kAuto);
  auto bad = ParseConstraintLevel("strict");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'strict'"), std::string::npos);
  EXPECT_STREQ(ConstraintLevelName(ConstraintLevel::kValues), "values");

  ColumnRules with = Rules({Category("a", {"x", "y"}), Text("b", true)});
  ColumnRule no_range = Integer("n", 0, 9);
  no_range.has_range = false;
  ColumnRules without = Rules({no_range, Text("b", true)});  // what --dp stores
  EXPECT_TRUE(RulesHoldValues(with));
  EXPECT_FALSE(RulesHoldValues(without));
  EXPECT_EQ(ResolveConstraintLevel(ConstraintLevel::kAuto, with), ConstraintLevel::kValues);
  EXPECT_EQ(ResolveConstraintLevel(ConstraintLevel::kAuto, without), ConstraintLevel::kStructure);
  EXPECT_EQ(ResolveConstraintLevel(ConstraintLevel::kNone, with), ConstraintLevel::kNone);
}

TEST(Constraints, NoneGivesNoFilterAndMismatchIsAnError) {
  auto tok = Train(CharRecords(), "char", true);
  ColumnRules two = Rules({Text("a", true), Text("b", true)});
  auto none = MakeRecordConstraints(*tok, two, ConstraintLevel::kNone, 4);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none.value(), nullptr);
  ColumnRules three = Rules({Text("a", true), Text("b", true), Text("c", true)});
  auto bad = MakeRecordConstraints(*tok, three, ConstraintLevel::kStructure, 4);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("3"), std::string::npos);
}

// ---- automaton --------------------------------------------------------------

TEST(Constraints, CategoryTrieWithMarkers) {
  auto tok = Train(CharRecords(), "char", true);
  ColumnRules rules = Rules(
      {Category("internet", {"DSL", "Fiber optic", "No", "No phone service"}), Integer("n", 0, 9)});
  Driver d(*tok, rules, ConstraintLevel::kValues);
  d.Begin();
  EXPECT_EQ(d.Allowed(), S({"<col0>"}));
  d.Feed(tok->column_id(0));
  EXPECT_EQ(d.Allowed(), S({"D", "F", "N"}));  // not empty, no separator
  d.FeedText("N");
  EXPECT_EQ(d.Allowed(), S({"o"}));
  d.FeedText("o");
  EXPECT_EQ(d.Allowed(), S({" ", "<col1>"}));  // "No" is complete, "No phone service" goes on
  d.FeedText(" phone servic");
  EXPECT_EQ(d.Allowed(), S({"e"}));
  d.FeedText("e");
  EXPECT_EQ(d.Allowed(), S({"<col1>"}));
  d.Feed(tok->column_id(1));
  EXPECT_EQ(d.Allowed(), Digits("0123456789"));
  d.FeedText("7");
  EXPECT_EQ(d.Allowed(), S({"<n>"}));  // last field: <n>, never <col2>
}

// When a field may end, the allowed separator takes the probability of every
// end-of-field token (a wrong marker, <n> too early), summed at the sampling
// temperature; when it may not end, that probability goes nowhere (masked).
TEST(Constraints, SeparatorTakesEveryEndOfFieldProbability) {
  auto tok = Train({{"x", "y", "z"}, {"xy", "z", "x"}}, "char", true);
  ColumnRules rules = Rules({Text("a", false), Text("b", false), Text("c", false)});
  for (double T : {1.0, 0.7}) {
    Driver d(*tok, rules, ConstraintLevel::kStructure);
    d.f->SetTemperature(T);
    d.Begin();
    d.Feed(tok->column_id(0));
    d.FeedText("x");
    std::vector<float>& lg = d.logits;
    std::fill(lg.begin(), lg.end(), 0.0f);
    const int32_t c0 = tok->column_id(0), c1 = tok->column_id(1), c2 = tok->column_id(2);
    const int32_t end = tok->end_id();
    lg[size_t(c0)] = 1.0f;   // wrong: the network lost count
    lg[size_t(c1)] = -1.0f;  // the valid separator
    lg[size_t(c2)] = 2.0f;   // wrong: skips a field
    lg[size_t(end)] = 0.5f;  // wrong: ends the record after field 0
    d.f->Mask(1, lg.data());
    double want = 0;
    for (float v : {1.0f, -1.0f, 2.0f, 0.5f}) want += std::exp(v / T);
    EXPECT_NEAR(std::exp(lg[size_t(c1)] / T), want, 1e-4 * want) << "T=" << T;
    EXPECT_TRUE(std::isinf(lg[size_t(c0)]) && std::isinf(lg[size_t(c2)]) &&
                std::isinf(lg[size_t(end)]));
    // Text tokens keep their logits.
    std::vector<int32_t> x;
    ASSERT_TRUE(tok->EncodeField("x", &x).ok());
    EXPECT_EQ(lg[size_t(x[0])], 0.0f);
  }
  // A field that may not end yet (empty, not allowed): no separator at all.
  Driver d(*tok, rules, ConstraintLevel::kStructure);
  d.Begin();
  d.Feed(tok->column_id(0));
  EXPECT_FALSE(d.Allows(tok->column_id(1)));
  EXPECT_FALSE(d.Allows(tok->end_id()));
}

TEST(Constraints, StructureLevelLeavesCategoriesFree) {
  auto tok = Train(CharRecords(), "char", false);
  ColumnRules rules = Rules({Category("internet", {"DSL", "No"}), Integer("n", 0, 9)});
  Driver d(*tok, rules, ConstraintLevel::kStructure);
  d.Begin();  // no markers: field 0 is open at once
  auto a = d.Allowed();
  EXPECT_TRUE(a.count("x") && a.count("F") && a.count("D"));
  EXPECT_FALSE(a.count("<d>"));  // never empty in training
  EXPECT_FALSE(a.count("<n>"));
  d.FeedText("Fibre");  // not a category: fine at the structure level
  a = d.Allowed();
  EXPECT_TRUE(a.count("<d>") && a.count("x"));
  EXPECT_FALSE(a.count("<n>"));
  d.Feed(tok->delimiter_id());
  // Number syntax without range: any sign, any digit, no point (integer).
  EXPECT_EQ(d.Allowed(), Union(Digits("0123456789"), S({"+", "-"})));
  d.FeedText("-0");
  EXPECT_EQ(d.Allowed(), S({"<n>"}));  // no digit after a leading zero
}

TEST(Constraints, IntegerRange) {
  auto tok = Train(CharRecords(), "char", true);
  Driver d(*tok, Rules({Integer("a", -5, 12), Text("b", true)}), ConstraintLevel::kValues);
  d.Begin();
  d.Feed(tok->column_id(0));
  EXPECT_EQ(d.Allowed(), Union(Digits("0123456789"), S({"-"})));  // no '+', no '.'
  d.FeedText("1");
  EXPECT_EQ(d.Allowed(), Union(Digits("012"), S({"<col1>"})));
  d.FeedText("2");
  EXPECT_EQ(d.Allowed(), S({"<col1>"}));
  d.Begin();
  d.Feed(tok->column_id(0));
  d.FeedText("-");
  EXPECT_EQ(d.Allowed(), Digits("012345"));  // "-0" is 0: inside the range
  d.FeedText("5");
  EXPECT_EQ(d.Allowed(), S({"<col1>"}));
  // Positive-only range: no minus sign at all.
  Driver p(*tok, Rules({Integer("a", 20, 300), Text("b", true)}), ConstraintLevel::kValues);
  p.Begin();
  p.Feed(tok->column_id(0));
  EXPECT_EQ(p.Allowed(), Digits("123456789"));  // "0" cannot reach [20, 300]
  p.FeedText("3");
  EXPECT_EQ(p.Allowed(), Digits("0123456789"));  // "3" < 20: not complete yet
  p.FeedText("0");
  EXPECT_EQ(p.Allowed(), Union(Digits("0"), S({"<col1>"})));
}

TEST(Constraints, DecimalRangeAndPlaces) {
  auto tok = Train(CharRecords(), "char", true);
  Driver d(*tok, Rules({Decimal("a", -2.5, 10.25, 2), Text("b", true)}), ConstraintLevel::kValues);
  d.Begin();
  d.Feed(tok->column_id(0));
  EXPECT_EQ(d.Allowed(), Union(Digits("0123456789"), S({"-", "."})));
  d.FeedText("1");
  EXPECT_EQ(d.Allowed(), S({"0", ".", "<col1>"}));
  d.FeedText("0.");
  EXPECT_EQ(d.Allowed(), Digits("012"));  // a point needs a digit after it
  d.FeedText("2");
  EXPECT_EQ(d.Allowed(), Union(Digits("012345"), S({"<col1>"})));
  d.FeedText("5");
  EXPECT_EQ(d.Allowed(), S({"<col1>"}));  // 2 decimal places at most
  d.Begin();
  d.Feed(tok->column_id(0));
  d.FeedText("-2.");
  EXPECT_EQ(d.Allowed(), Digits("012345"));
}

TEST(Constraints, ExactDecimalBounds) {
  // Telco's total_charges: 18.8 .. 8684.8 with 2 decimal places.
  auto tok = Train(CharRecords(), "char", true);
  Driver d(*tok, Rules({Decimal("t", 18.8, 8684.8, 2), Text("b", true)}), ConstraintLevel::kValues);
  auto accepts = [&](const std::string& v) {
    d.Begin();
    d.Feed(tok->column_id(0));
    for (char c : v) {
      if (!d.AllowsText(std::string(1, c))) return false;
      d.FeedText(std::string(1, c));
    }
    return d.Allows(tok->column_id(1));
  };
  EXPECT_TRUE(accepts("18.8"));
  EXPECT_TRUE(accepts("18.80"));
  EXPECT_FALSE(accepts("18.79"));
  EXPECT_TRUE(accepts("8684.8"));
  EXPECT_FALSE(accepts("8684.81"));
  EXPECT_TRUE(accepts("19"));
  EXPECT_FALSE(accepts("18"));
  EXPECT_FALSE(accepts("9000"));
  EXPECT_FALSE(accepts("018.8"));
}

TEST(Constraints, EmptyFieldsAndMissingSpellings) {
  auto tok = Train(CharRecords(), "char", false);
  ColumnRule n = Integer("n", 1, 3, /*empty=*/true);
  n.missing_values = {"NA"};
  ColumnRules rules = Rules({Text("t", false), n, Text("u", true)});
  Driver d(*tok, rules, ConstraintLevel::kValues);
  d.Begin();
  EXPECT_FALSE(d.Allowed().count("<d>"));  // text never empty in training
  d.FeedText("x");
  EXPECT_TRUE(d.Allowed().count("<d>"));
  d.Feed(tok->delimiter_id());
  EXPECT_EQ(d.Allowed(), Union(Digits("123"), S({"N", "<d>"})));  // empty allowed, "NA"
  d.FeedText("N");
  EXPECT_EQ(d.Allowed(), S({"A"}));
  d.FeedText("A");
  EXPECT_EQ(d.Allowed(), S({"<d>"}));
  d.Feed(tok->delimiter_id());
  auto a = d.Allowed();
  EXPECT_TRUE(a.count("<n>"));  // last field may be empty
  EXPECT_FALSE(a.count("<d>"));
  // With the empty check off, a never-empty column may be empty too.
  rules.set_checks(RuleChecks{.empty = false});
  Driver e(*tok, rules, ConstraintLevel::kValues);
  e.Begin();
  EXPECT_TRUE(e.Allowed().count("<d>"));
}

TEST(Constraints, ChecksSwitchConstraintsOff) {
  auto tok = Train(CharRecords(), "char", true);
  ColumnRules rules = Rules({Category("c", {"DSL", "No"}), Integer("n", 5, 6)});
  rules.set_checks(RuleChecks{.range = false, .category = false});
  Driver d(*tok, rules, ConstraintLevel::kValues);
  d.Begin();
  d.Feed(tok->column_id(0));
  EXPECT_TRUE(d.Allowed().count("x"));  // category check off: free text
  d.FeedText("x");
  d.Feed(tok->column_id(1));
  EXPECT_EQ(d.Allowed(), Union(Digits("0123456789"), S({"+", "-"})));  // range check off
}

TEST(Constraints, UnenforceableRangeIsListed) {
  auto tok = Train(CharRecords(), "char", true);
  ColumnRules rules = Rules({Decimal("e", 0.5, 3e5, -1), Text("b", true)});
  auto built = RecordConstraints::Build(*tok, rules, ConstraintLevel::kValues);
  ASSERT_TRUE(built.ok());
  ASSERT_EQ((*built)->unenforced().size(), 1u);
  EXPECT_NE((*built)->unenforced()[0].find("field 1 'e'"), std::string::npos);
  EXPECT_NE((*built)->Describe().find("exponent"), std::string::npos);
  Driver d(*tok, rules, ConstraintLevel::kValues);
  d.Begin();
  d.Feed(tok->column_id(0));
  d.FeedText("1.5");
  EXPECT_EQ(d.Allowed(), Union(Digits("0123456789"), S({"e", "E", "<col1>"})));
  d.FeedText("e");
  EXPECT_EQ(d.Allowed(), Union(Digits("0123456789"), S({"+", "-"})));
  d.FeedText("-12");
  EXPECT_EQ(d.Allowed(), S({"<col1>"}));  // two exponent digits at most
}

TEST(Constraints, SparseDigitVocabulary) {
  // The vocabulary has only the digits 1 and 5. For [16, 51], "1" could
  // reach the range by its interval ([10, 19]), but no completion spelled
  // with 1 and 5 lies in it ("11", "15" < 16; "1xx" > 51): only "5" may start.
  auto tok = Train({{"15", "a"}, {"51", "b"}}, "char", true);
  Driver d(*tok, Rules({Integer("n", 16, 51), Text("t", true)}), ConstraintLevel::kValues);
  d.Begin();
  d.Feed(tok->column_id(0));
  EXPECT_EQ(d.Allowed(), Digits("5"));
  d.FeedText("5");
  EXPECT_EQ(d.Allowed(), Digits("1"));
  d.FeedText("1");
  EXPECT_EQ(d.Allowed(), S({"<col1>"}));
  // [16, 18] cannot be spelled at all: the column falls back to text, and
  // the range is left to Validate (and listed).
  ColumnRules none = Rules({Integer("n", 16, 18), Text("t", true)});
  auto built = RecordConstraints::Build(*tok, none, ConstraintLevel::kValues);
  ASSERT_TRUE(built.ok());
  ASSERT_EQ((*built)->unenforced().size(), 1u);
  EXPECT_NE((*built)->unenforced()[0].find("cannot be spelled"), std::string::npos);
  Driver e(*tok, none, ConstraintLevel::kValues);
  e.Begin();
  e.Feed(tok->column_id(0));
  EXPECT_TRUE(e.Allowed().count("a"));
}

// The automaton accepts exactly the strings Validate accepts (no '+' at the
// values level), for every string up to `len` characters over `alphabet`.
void ExhaustiveAgreement(const ColumnRule& rule, const std::string& alphabet, int len) {
  auto tok = Train(CharRecords(), "char", true);
  ColumnRules rules = Rules({rule, Text("b", true)});
  Driver d(*tok, rules, ConstraintLevel::kValues);
  std::vector<int32_t> ids;
  for (char c : alphabet) ASSERT_TRUE(tok->EncodeField(std::string(1, c), &ids).ok());
  int64_t accepted = 0;
  std::string s;
  std::function<void()> walk = [&]() {
    // The prefix s was fed; its allowed set decides the children.
    auto ok = d.Mask();
    bool end = ok[size_t(tok->column_id(1))];
    std::string why = rules.Validate({s, ""});
    EXPECT_EQ(end, why.empty()) << "'" << s << "': " << why;
    accepted += end;
    if (int(s.size()) == len) return;
    for (size_t i = 0; i < ids.size(); ++i) {
      s.push_back(alphabet[i]);
      if (ok[size_t(ids[i])]) {
        d.Begin();
        d.Feed(tok->column_id(0));
        for (char c : s) d.FeedText(std::string(1, c));
        walk();
      } else {
        // Not allowed: s itself must not pass Validate either.
        EXPECT_FALSE(rules.Validate({s, ""}).empty()) << "'" << s << "' was masked";
      }
      s.pop_back();
    }
  };
  d.Begin();
  d.Feed(tok->column_id(0));
  walk();
  EXPECT_GT(accepted, 0);
}

TEST(Constraints, ExhaustiveIntegerAgreesWithValidate) {
  ExhaustiveAgreement(Integer("i", -5, 12), "0123456789-.", 4);
}
TEST(Constraints, ExhaustiveDecimalAgreesWithValidate) {
  ExhaustiveAgreement(Decimal("d", -1.5, 2.25, 2), "0123456789-.", 5);
}
TEST(Constraints, ExhaustiveWideDecimalAgreesWithValidate) {
  ExhaustiveAgreement(Decimal("t", 18.8, 8684.8, 2), "0123456789.", 5);
}

// ---- generation with random logits ------------------------------------------

// logits[v] = table[input][v]: a random bigram model (entries uniform in
// [-3, 3], +3 for special tokens so that free text fields end soon) whose
// rows depend only on the slot's own input (reproducible across batching).
class RandomBackend : public InferBackend {
 public:
  RandomBackend(const Tokenizer& tok, int slots, uint64_t seed) : pos_(size_t(slots), -1) {
    const int V = tok.vocab_size();
    spec_.vocab_size = V;
    table_.resize(size_t(V) * V);
    Philox rng(seed, 0);
    for (size_t i = 0; i < table_.size(); ++i)
      table_[i] = float(rng.Uniform() * 6 - 3) +
                  (tok.kind(int(i % size_t(V))) == TokenKind::kText ? 0.0f : 3.0f);
  }
  const NetworkSpec& spec() const override { return spec_; }
  int slots() const override { return int(pos_.size()); }
  void ResetSlot(int s) override { pos_[size_t(s)] = 0; }
  void Step(const int* ids, const int32_t* tokens, int n, float* logits) override {
    const int V = spec_.vocab_size;
    for (int r = 0; r < n; ++r) {
      float* out = logits + size_t(r) * V;
      for (int v = 0; v < V; ++v) out[v] = table_[size_t(tokens[r]) * V + v];
      ++pos_[size_t(ids[r])];
    }
  }

 private:
  NetworkSpec spec_;
  std::vector<float> table_;  // [V, V]
  std::vector<int> pos_;      // [slots]
};

std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> f(1);
  for (char c : line) {
    if (c == ',')
      f.emplace_back();
    else if (c != '"')
      f.back() += c;
  }
  return f;
}

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

Table Penguins() {
  Table t;
  std::ifstream in(std::string(DS_TEST_DATA) + "/datasets/penguins.csv");
  std::string line;
  EXPECT_TRUE(bool(std::getline(in, line)));
  t.header = SplitCsvLine(line);
  while (std::getline(in, line)) t.rows.push_back(SplitCsvLine(line));
  EXPECT_EQ(t.rows.size(), 344u);
  return t;
}

// SentencePiece pieces span several characters ("39.", "18"): from every
// prefix p of a valid value, the allowed number tokens must be exactly the
// pieces t with p + t still a prefix of some valid value (brute force over
// every value of the range), and the separator exactly when p is valid.
void PiecesMatchBruteForce(const Tokenizer& tok, const ColumnRule& rule,
                           const std::vector<std::string>& valid) {
  ColumnRules rules = Rules({rule, Text("b", true)});
  Driver d(tok, rules, ConstraintLevel::kValues);
  std::set<std::string> values(valid.begin(), valid.end()), prefixes;
  for (const auto& v : valid)
    for (size_t n = 0; n <= v.size(); ++n) prefixes.insert(v.substr(0, n));
  std::vector<int32_t> number_tokens;
  for (int id = 0; id < tok.vocab_size(); ++id) {
    if (tok.kind(id) != TokenKind::kText) continue;
    const std::string& t = tok.text(id);
    if (!t.empty() && t.find_first_not_of("0123456789.-+eE") == std::string::npos)
      number_tokens.push_back(id);
  }
  int multi = 0;
  for (int id : number_tokens) multi += tok.text(id).size() > 1;
  EXPECT_GT(multi, 5);  // the test is about multi-character pieces
  int64_t checked = 0;
  for (const auto& p : prefixes) {
    d.Begin();
    d.FeedText(p);
    auto ok = d.Mask();
    ASSERT_EQ(ok[size_t(tok.delimiter_id())], values.count(p) > 0) << "'" << p << "'";
    for (int id : number_tokens) {
      bool want = prefixes.count(p + tok.text(id)) > 0;
      ASSERT_EQ(ok[size_t(id)], want) << "'" << p << "' + '" << tok.text(id) << "'";
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000);
}

TEST(Constraints, SentencePieceNumbersMatchBruteForce) {
  Table t = Penguins();
  auto tok = Train(t.rows, "sentencepiece", false, 300);
  ASSERT_TRUE(tok);
  // bill_length_mm: 32.1 .. 59.6, one decimal place.
  std::vector<std::string> dec;
  for (int v = 321; v <= 596; ++v) {
    dec.push_back(fmt::format("{}.{}", v / 10, v % 10));
    if (v % 10 == 0) dec.push_back(std::to_string(v / 10));
  }
  PiecesMatchBruteForce(*tok, Decimal("bill", 32.1, 59.6, 1), dec);
  // body_mass_g: 2700 .. 6300.
  std::vector<std::string> ints;
  for (int v = 2700; v <= 6300; ++v) ints.push_back(std::to_string(v));
  PiecesMatchBruteForce(*tok, Integer("mass", 2700, 6300), ints);
}

GenerationModel MakeModel(const Tokenizer& tok, const Table& t, ConstraintLevel level,
                          uint64_t table_seed) {
  GenerationModel g;
  g.tokenizer = &tok;
  g.header = t.header;
  g.delimiter = ',';
  g.rules = LearnColumnRules(t.header, t.rows);
  const Tokenizer* tp = &tok;
  g.make_backend = [tp, table_seed](int slots) -> Result<std::unique_ptr<InferBackend>> {
    return std::unique_ptr<InferBackend>(new RandomBackend(*tp, slots, table_seed));
  };
  if (level != ConstraintLevel::kNone) {
    auto tables = RecordConstraints::Build(tok, *g.rules, level);
    EXPECT_TRUE(tables.ok()) << tables.status().ToString();
    auto shared = tables.value();
    g.make_filter = [shared](int slots) -> Result<std::unique_ptr<TokenFilter>> {
      return NewConstraintFilter(shared, slots);
    };
    g.constraints = shared;
  }
  return g;
}

std::vector<GeneratedRecord> Generate(const GenerationModel& g, GenerateOptions o) {
  std::vector<GeneratedRecord> out;
  auto gen = RecordGenerator::Create(g, o);
  EXPECT_TRUE(gen.ok()) << gen.status().ToString();
  if (!gen.ok()) return out;
  GeneratedRecord r;
  while (true) {
    auto more = (*gen)->Next(&r);
    EXPECT_TRUE(more.ok()) << more.status().ToString();
    if (!more.ok() || !*more) break;
    out.push_back(r);
  }
  return out;
}

struct TokCase {
  std::string type;
  bool markers;
};

class RandomLogits : public ::testing::TestWithParam<TokCase> {};

TEST_P(RandomLogits, EveryRecordValidAtValuesLevel) {
  const TokCase tc = GetParam();
  Table t = Penguins();
  auto tok = Train(t.rows, tc.type, tc.markers, 200);
  ASSERT_TRUE(tok);
  GenerationModel g = MakeModel(*tok, t, ConstraintLevel::kValues, 5);
  ASSERT_TRUE(g.constraints->unenforced().empty());
  GenerateOptions o;
  o.num_lines = 300;
  o.seed = 9;
  o.predict_batch_size = 16;
  o.max_invalid = 0;  // a single invalid record fails the run
  auto recs = Generate(g, o);
  ASSERT_EQ(recs.size(), 300u);
  std::set<std::string> species, islands;
  for (const auto& r : recs) {
    ASSERT_TRUE(r.valid) << r.text << ": " << r.explain;
    ASSERT_EQ(g.rules->Validate(r.fields), "") << r.text;
    species.insert(r.fields[0]);
    islands.insert(r.fields[1]);
  }
  // The random model spreads over the categories (not stuck on one path).
  EXPECT_EQ(species, (std::set<std::string>{"Adelie", "Chinstrap", "Gentoo"}));
  EXPECT_EQ(islands, (std::set<std::string>{"Biscoe", "Dream", "Torgersen"}));

  // Without constraints the same random model breaks the rules.
  GenerationModel free = MakeModel(*tok, t, ConstraintLevel::kNone, 5);
  o.max_invalid = 20;
  o.max_tokens = 200;
  auto gen = RecordGenerator::Create(free, o);
  ASSERT_TRUE(gen.ok());
  GeneratedRecord r;
  int invalid = 0;
  for (int i = 0; i < 20; ++i) {
    auto more = (*gen)->Next(&r);
    if (!more.ok() || !*more) break;
    invalid += !r.valid;
  }
  EXPECT_GT(invalid, 10);
}

TEST_P(RandomLogits, StructureLevelKeepsShapeAndNumberSyntax) {
  const TokCase tc = GetParam();
  Table t = Penguins();
  auto tok = Train(t.rows, tc.type, tc.markers, 200);
  ASSERT_TRUE(tok);
  GenerationModel g = MakeModel(*tok, t, ConstraintLevel::kStructure, 6);
  ColumnRules full = *g.rules;
  g.rules->set_checks(RuleChecks{.range = false, .category = false});  // validate the shape only
  GenerateOptions o;
  o.num_lines = 100;
  o.seed = 4;
  o.predict_batch_size = 8;
  o.max_invalid = 0;
  auto recs = Generate(g, o);
  ASSERT_EQ(recs.size(), 100u);
  int64_t off_category = 0;
  for (const auto& r : recs) {
    ASSERT_TRUE(r.valid) << r.text << ": " << r.explain;
    ASSERT_EQ(r.fields.size(), 8u);
    off_category += full.Validate(r.fields).find("categories") != std::string::npos;
  }
  EXPECT_GT(off_category, 0);  // categories are not enforced at this level
}

TEST_P(RandomLogits, StartStrings) {
  const TokCase tc = GetParam();
  Table t = Penguins();
  auto tok = Train(t.rows, tc.type, tc.markers, 200);
  ASSERT_TRUE(tok);
  GenerationModel g = MakeModel(*tok, t, ConstraintLevel::kValues, 7);
  GenerateOptions o;
  o.seed = 2;
  o.predict_batch_size = 4;
  o.prefixes = {"Gentoo,Biscoe,", "Adelie,", "Chinstrap,Dream,45.5,"};
  auto recs = Generate(g, o);
  ASSERT_EQ(recs.size(), 3u);
  for (const auto& r : recs) ASSERT_TRUE(r.valid) << r.text << ": " << r.explain;
  EXPECT_EQ(recs[0].fields[0], "Gentoo");
  EXPECT_EQ(recs[0].fields[1], "Biscoe");
  EXPECT_EQ(recs[1].fields[0], "Adelie");
  EXPECT_EQ(recs[2].fields[2], "45.5");

  // A seed field that breaks its rule is kept as given, the rest of the
  // record stays constrained, and Validate explains the broken field.
  o.prefixes = {"Adeli,Dream,"};
  o.max_invalid = 10;
  auto gen = RecordGenerator::Create(g, o);
  ASSERT_TRUE(gen.ok());
  GeneratedRecord r;
  ASSERT_TRUE((*gen)->Next(&r).ok());
  EXPECT_FALSE(r.valid);
  EXPECT_NE(r.explain.find("'Adeli' is not one of the 3 categories"), std::string::npos)
      << r.explain;
  ASSERT_EQ(r.fields.size(), 8u);
  std::vector<std::string> rest = r.fields;
  rest[0] = "Adelie";
  EXPECT_EQ(g.rules->Validate(rest), "") << r.text;
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, RandomLogits,
                         ::testing::Values(TokCase{"char", true}, TokCase{"char", false},
                                           TokCase{"sentencepiece", true},
                                           TokCase{"sentencepiece", false}),
                         [](const auto& info) {
                           return fmt::format("{}_{}",
                                              info.param.type == "char" ? "Char" : "SentencePiece",
                                              info.param.markers ? "Markers" : "NoMarkers");
                         });

TEST(Constraints, WorkerProcessesMatchInProcess) {
  Table t = Penguins();
  auto tok = Train(t.rows, "sentencepiece", true, 200);
  ASSERT_TRUE(tok);
  GenerationModel g = MakeModel(*tok, t, ConstraintLevel::kValues, 8);
  RunOptions run;
  run.gen.num_lines = 120;
  run.gen.seed = 11;
  run.gen.predict_batch_size = 8;
  run.gen.max_invalid = 0;
  run.parallelism = 2;
  run.format = OutputFormat::kText;
  run.output = fmt::format("{}/constraints_{}.txt", ::testing::TempDir(), getpid());
  GenerateSummary sum;
  Status st = RunGeneration(g, run, {}, &sum);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(sum.valid, 120);
  EXPECT_EQ(sum.invalid, 0);
  std::ifstream in(run.output);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::remove(run.output.c_str());
  auto recs = Generate(g, run.gen);
  ASSERT_EQ(recs.size(), lines.size());
  for (size_t i = 0; i < recs.size(); ++i) EXPECT_EQ(recs[i].text, lines[i]) << i;
}

}  // namespace
}  // namespace ds
