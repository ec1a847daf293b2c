#include "tokenize/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenize/internal.h"
#include "util/utf8.h"

namespace ds {
namespace {

namespace fs = std::filesystem;
using Records = std::vector<std::vector<std::string>>;

// Three-field records with the awkward cases, then repetitive filler so that
// SentencePiece learns multi-character pieces.
Records TrickyRecords() {
  Records r = {
      {"a,b", "<d>", "<n>"},
      {"\"quoted\"", "line1\nline2", "cr\r\nlf"},
      {"tab\there", "h\xc3\xa9llo w\xc3\xb6rld", "emoji \xf0\x9f\x98\x80\xf0\x9f\x8e\x89"},
      {"", "  lead", "trail  "},
      {"double  space", "", ""},
      {"<col0>", "<col1>x", " "},
      {"\xe2\x96\x81meta", "\xe2\x96\x85 unk", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e"},
      {"\xef\xbb\xbf bom", "nbsp\xc2\xa0x", "ideo\xe3\x80\x80sp"},
      {"\xef\xbf\xbd repl", "zwsp\xe2\x80\x8bx", "pua\xee\x80\x80x"},  // U+E000 in the data itself
      {"nul?x\x7f", "  ", "a\u2028b"},
  };
  r[9][0][3] = '\0';  // a NUL byte inside a field
  const char* pay[] = {"Electronic check", "Mailed check", "Bank transfer (automatic)",
                       "Credit card"};
  const char* con[] = {"Month-to-month", "One year", "Two year"};
  for (int i = 0; i < 300; ++i) {
    r.push_back({con[i % 3], pay[(i * 7) % 4],
                 std::to_string(20 + (i * 37) % 80) + "." + std::to_string(i % 100)});
  }
  return r;
}

Records ReadTelco(size_t max_rows);

std::vector<std::string> Texts(const Tokenizer& t) {
  std::vector<std::string> v;
  for (int i = 0; i < t.vocab_size(); ++i) v.push_back(t.text(i));
  return v;
}

std::unique_ptr<Tokenizer> Train(const TokenizerConfig& c, const Records& r) {
  auto res = TrainTokenizer(c, r);
  EXPECT_TRUE(res.ok()) << res.status().ToString(true);
  if (!res.ok()) return nullptr;
  return std::move(res).value();
}

// Encodes every record, decodes it with RecordDecoder (incrementally) and by
// concatenating text(id) between separators (batch), and checks both against
// the input. Returns the total number of tokens.
size_t ExpectRoundTrip(const Tokenizer& tok, const Records& records) {
  size_t total = 0;
  RecordDecoder dec(tok);
  for (size_t r = 0; r < records.size(); ++r) {
    std::vector<int32_t> ids;
    Status s = tok.EncodeRecord(records[r], &ids);
    EXPECT_TRUE(s.ok()) << "record " << r << ": " << s.ToString(true);
    if (!s.ok()) continue;
    total += ids.size();
    if (ids.empty()) {
      ADD_FAILURE() << "no ids";
      continue;
    }
    EXPECT_EQ(ids.back(), tok.end_id());
    // Batch decode.
    std::vector<std::string> batch(1);
    size_t text_chars = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const int id = ids[i];
      if (id < 0 || id >= tok.vocab_size()) {
        ADD_FAILURE() << "id " << id << " out of range";
        continue;
      }
      switch (tok.kind(id)) {
        case TokenKind::kText:
          batch.back() += tok.text(id);
          text_chars += CountCodePoints(tok.text(id));
          break;
        case TokenKind::kDelimiter:
          batch.emplace_back();
          break;
        case TokenKind::kColumn:
          if (i > 0) batch.emplace_back();
          EXPECT_EQ(tok.column(id), static_cast<int>(batch.size()) - 1);
          break;
        case TokenKind::kEndOfRecord:
          EXPECT_EQ(i, ids.size() - 1);
          break;
        case TokenKind::kUnused:
          ADD_FAILURE() << "unused id " << id;
      }
    }
    EXPECT_EQ(batch, records[r]) << "record " << r;
    // Incremental decode.
    dec.Reset();
    for (size_t i = 0; i < ids.size(); ++i) {
      const bool end = dec.Push(ids[i]);
      EXPECT_EQ(end, i + 1 == ids.size());
    }
    EXPECT_TRUE(dec.done());
    EXPECT_EQ(dec.fields(), records[r]) << "record " << r;
    EXPECT_EQ(dec.chars(), text_chars);
    size_t want_chars = 0;
    for (const auto& f : records[r]) want_chars += CountCodePoints(f);
    EXPECT_EQ(dec.chars(), want_chars);
  }
  return total;
}

struct Variant {
  const char* type;
  const char* sp_model_type;
  bool markers;
};
void PrintTo(const Variant& v, std::ostream* os) {
  *os << v.type << "/" << v.sp_model_type << "/" << v.markers;
}

class RoundTrip : public ::testing::TestWithParam<Variant> {};

TEST_P(RoundTrip, TrickyFieldsSurviveEncodeDecodeAndSaveLoad) {
  const Variant v = GetParam();
  TokenizerConfig c;
  c.type = v.type;
  c.sp_model_type = v.sp_model_type;
  c.column_markers = v.markers;
  c.num_columns = v.markers ? 3 : 0;
  c.vocab_size = 500;
  const Records records = TrickyRecords();
  auto tok = Train(c, records);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->type(), v.type);
  EXPECT_LE(tok->vocab_size(), 500);
  EXPECT_EQ(tok->column_markers(), v.markers);
  EXPECT_EQ(tok->num_columns(), v.markers ? 3 : 0);
  EXPECT_EQ(tok->end_id(), 0);
  EXPECT_EQ(tok->kind(0), TokenKind::kEndOfRecord);
  if (v.markers) {
    EXPECT_EQ(tok->delimiter_id(), -1);
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(tok->column_id(k), 1 + k);
      EXPECT_EQ(tok->kind(1 + k), TokenKind::kColumn);
      EXPECT_EQ(tok->column(1 + k), k);
    }
    EXPECT_EQ(tok->column_id(3), -1);
  } else {
    EXPECT_EQ(tok->delimiter_id(), 1);
    EXPECT_EQ(tok->kind(1), TokenKind::kDelimiter);
    EXPECT_EQ(tok->column_id(0), -1);
  }
  ExpectRoundTrip(*tok, records);

  // Special-looking text never produces special ids.
  for (const char* s : {"<d>", "<n>", "<col0>", "<col1>x"}) {
    std::vector<int32_t> ids;
    ASSERT_TRUE(tok->EncodeField(s, &ids).ok());
    for (int id : ids) EXPECT_EQ(tok->kind(id), TokenKind::kText) << s;
  }

  // Save / Load gives the same vocabulary and the same encodings.
  const fs::path dir =
      fs::path(::testing::TempDir()) /
      fmt::format("tok_rt_{}_{}_{}_{}", v.type, v.sp_model_type, v.markers, ::getpid());
  fs::remove_all(dir);
  ASSERT_TRUE(tok->Save(dir.string()).ok());
  EXPECT_TRUE(fs::exists(dir / "tokenizer.json"));
  EXPECT_EQ(fs::exists(dir / "tokenizer.model"), std::string(v.type) == "sentencepiece");
  if (std::string(v.type) == "sentencepiece") {
    // '\n' etc. are escaped to private-use stand-ins; U+E000 occurs in the data, so it is no
    // stand-in.
    std::ifstream in(dir / "tokenizer.json");
    const auto j = nlohmann::json::parse(in);
    std::map<uint32_t, uint32_t> esc;
    for (const auto& e : j["sentencepiece"]["escapes"])
      esc[e[0].get<uint32_t>()] = e[1].get<uint32_t>();
    for (uint32_t cp : {0u, 9u, 10u, 13u, 0x7Fu, 0x2581u, 0x2585u, 0x2028u, 0xFEFFu, 0xFFFDu}) {
      ASSERT_TRUE(esc.count(cp)) << cp;
      EXPECT_NE(esc[cp], 0xE000u);
    }
    EXPECT_FALSE(esc.count(' '));
  }
  auto loaded = LoadTokenizer(dir.string());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString(true);
  EXPECT_EQ(Texts(**loaded), Texts(*tok));
  EXPECT_EQ((*loaded)->type(), tok->type());
  EXPECT_EQ((*loaded)->column_markers(), v.markers);
  EXPECT_EQ((*loaded)->num_columns(), tok->num_columns());
  for (int i = 0; i < tok->vocab_size(); ++i) EXPECT_EQ((*loaded)->kind(i), tok->kind(i));
  for (const auto& r : records) {
    std::vector<int32_t> a, b;
    ASSERT_TRUE(tok->EncodeRecord(r, &a).ok());
    ASSERT_TRUE((*loaded)->EncodeRecord(r, &b).ok());
    EXPECT_EQ(a, b);
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(All, RoundTrip,
                         ::testing::Values(Variant{"char", "unigram", false},
                                           Variant{"char", "unigram", true},
                                           Variant{"sentencepiece", "unigram", false},
                                           Variant{"sentencepiece", "unigram", true},
                                           Variant{"sentencepiece", "bpe", false},
                                           Variant{"sentencepiece", "bpe", true}),
                         [](const auto& info) {
                           return std::string(info.param.type) + "_" + info.param.sp_model_type +
                                  (info.param.markers ? "_markers" : "_delim");
                         });

TEST(CharTokenizer, VocabularyIsSpecialsThenSortedCodePoints) {
  TokenizerConfig c;
  c.type = "char";
  auto tok = Train(c, {{"b\xc3\xa9", "a"}, {"\xf0\x9f\x98\x80", "a b"}});
  ASSERT_TRUE(tok);
  const std::vector<std::string> want = {"", "", " ", "a", "b", "\xc3\xa9", "\xf0\x9f\x98\x80"};
  EXPECT_EQ(Texts(*tok), want);
  std::vector<int32_t> ids;
  ASSERT_TRUE(tok->EncodeRecord({"ab", "", "\xf0\x9f\x98\x80"}, &ids).ok());
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 4, 1, 1, 6, 0}));
}

TEST(CharTokenizer, UnseenCharacterIsNamed) {
  TokenizerConfig c;
  c.type = "char";
  auto tok = Train(c, {{"abc"}});
  ASSERT_TRUE(tok);
  std::vector<int32_t> ids = {7};
  Status s = tok->EncodeField("ab\xc3\xa9", &ids);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kInvalidInput);
  EXPECT_NE(s.message().find("U+00E9 '\xc3\xa9'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("byte 2"), std::string::npos) << s.message();
  EXPECT_EQ(ids, std::vector<int32_t>{7});  // nothing appended on error
  s = tok->EncodeField("a\tb", &ids);
  EXPECT_NE(s.message().find("U+0009"), std::string::npos) << s.message();
  s = tok->EncodeRecord({"a", "x"}, &ids);
  EXPECT_NE(s.message().find("field 2"), std::string::npos) << s.message();
  EXPECT_EQ(ids, std::vector<int32_t>{7});
  s = tok->EncodeField("a\xff", &ids);
  EXPECT_EQ(s.code(), Code::kInvalidInput);
  EXPECT_NE(s.message().find("invalid UTF-8"), std::string::npos) << s.message();
}

TEST(SentencePiece, UnseenCharactersAndEscapeTargetsAreErrors) {
  TokenizerConfig c;
  c.vocab_size = 200;
  Records r;
  for (int i = 0; i < 50; ++i) r.push_back({"line " + std::to_string(i) + "\nnext"});
  auto tok = Train(c, r);
  ASSERT_TRUE(tok);
  std::vector<int32_t> ids;
  Status s = tok->EncodeField("line \xe2\x82\xac", &ids);
  EXPECT_EQ(s.code(), Code::kInvalidInput);
  EXPECT_NE(s.message().find("U+20AC '\xe2\x82\xac'"), std::string::npos) << s.message();
  s = tok->EncodeField("a\tb", &ids);  // tab needs an escape but never occurred
  EXPECT_NE(s.message().find("U+0009"), std::string::npos) << s.message();
  s = tok->EncodeField("\xee\x80\x80", &ids);  // U+E000: the stand-in for '\n'
  EXPECT_NE(s.message().find("U+E000"), std::string::npos) << s.message();
  EXPECT_TRUE(ids.empty());
  ASSERT_TRUE(tok->EncodeField("line 7\nnext", &ids).ok());
  std::string back;
  for (int id : ids) back += tok->text(id);
  EXPECT_EQ(back, "line 7\nnext");
}

TEST(SentencePiece, VocabSizeIsASoftLimit) {
  Records r;
  for (int i = 0; i < 30; ++i) r.push_back({"yes", i % 2 ? "no" : "maybe", std::to_string(i)});
  for (const char* type : {"unigram", "bpe"}) {
    for (int vocab : {20000, 1 << 30}) {
      TokenizerConfig c;
      c.sp_model_type = type;
      c.vocab_size = vocab;
      auto tok = Train(c, r);
      ASSERT_TRUE(tok) << type << " " << vocab;
      EXPECT_LT(tok->vocab_size(), 200) << type;
      EXPECT_GT(tok->vocab_size(), 2 + 15) << type;  // at least the distinct characters
      ExpectRoundTrip(*tok, r);
    }
  }
}

TEST(SentencePiece, VocabSmallerThanCharactersIsAClearError) {
  TokenizerConfig c;
  c.vocab_size = 8;
  auto res = TrainTokenizer(c, {{"abcdefghijklmnop"}});
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), Code::kInvalidArgument);
  EXPECT_NE(res.status().message().find("vocab_size 8 is too small"), std::string::npos);
}

TEST(SentencePiece, ParsesVocabLimitFromSpError) {
  EXPECT_EQ(tok_internal::ParseSpVocabLimit("Internal: trainer_interface.cc(660) [...] Vocabulary "
                                            "size too high (20000). Please set it to a "
                                            "value <= 1505."),
            1505);
  EXPECT_EQ(
      tok_internal::ParseSpVocabLimit("Vocabulary size is smaller than required_chars. 1 vs 2."),
      -1);
  EXPECT_EQ(tok_internal::ParseSpVocabLimit(
                "Vocabulary size too high (5). Please set it to a value <= x"),
            -1);
}

TEST(SentencePiece, LongRecordIsAnErrorNamingIt) {
  TokenizerConfig c;
  c.max_line_len = 10;
  auto res = TrainTokenizer(c, {{"short"}, {"0123456789", "x"}});
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), Code::kInvalidInput);
  EXPECT_NE(res.status().message().find("training record 2: 12 bytes"), std::string::npos)
      << res.status().message();
}

TEST(SentencePiece, SampledTrainingStillCoversEveryCharacter) {
  Records r;
  for (int i = 0; i < 400; ++i) r.push_back({"row " + std::to_string(i)});
  r[333] = {"rare \xc3\x9f char"};
  TokenizerConfig c;
  c.pretrain_sentence_count = 10;
  c.vocab_size = 100;
  auto tok = Train(c, r);
  ASSERT_TRUE(tok);
  ExpectRoundTrip(*tok, r);
}

TEST(Tokenizer, TrainingIsDeterministic) {
  const Records records = TrickyRecords();
  for (const char* type : {"char", "sentencepiece"}) {
    for (const char* sp : {"unigram", "bpe"}) {
      TokenizerConfig c;
      c.type = type;
      c.sp_model_type = sp;
      c.vocab_size = 300;
      auto a = Train(c, records);
      auto b = Train(c, records);
      ASSERT_TRUE(a && b);
      EXPECT_EQ(Texts(*a), Texts(*b)) << type << " " << sp;
      for (const auto& r : records) {
        std::vector<int32_t> x, y;
        ASSERT_TRUE(a->EncodeRecord(r, &x).ok());
        ASSERT_TRUE(b->EncodeRecord(r, &y).ok());
        EXPECT_EQ(x, y);
      }
    }
  }
}

TEST(SentencePiece, SavedFilesAreByteIdenticalAcrossRuns) {
  const Records rows = ReadTelco(1500);
  std::string model[2], json[2];
  for (int run = 0; run < 2; ++run) {
    TokenizerConfig c;
    c.seed = 7;
    auto tok = Train(c, rows);
    ASSERT_TRUE(tok);
    const fs::path dir =
        fs::path(::testing::TempDir()) / fmt::format("tok_det_{}_{}", ::getpid(), run);
    ASSERT_TRUE(tok->Save(dir.string()).ok());
    std::ifstream m(dir / "tokenizer.model", std::ios::binary), j(dir / "tokenizer.json");
    std::stringstream ms, js;
    ms << m.rdbuf();
    js << j.rdbuf();
    model[run] = ms.str();
    json[run] = js.str();
    fs::remove_all(dir);
  }
  EXPECT_GT(model[0].size(), 1000u);
  EXPECT_EQ(model[0], model[1]);
  EXPECT_EQ(json[0], json[1]);
}

TEST(SentencePiece, CharacterCoverageBelowOneMakesRareCharactersAnError) {
  Records r;
  for (int i = 0; i < 3000; ++i) r.push_back({"abcabc " + std::to_string(i % 10)});
  r.push_back({"cab \xc3\x9f"});
  TokenizerConfig c;
  c.vocab_size = 100;
  c.character_coverage = 0.999;
  auto tok = Train(c, r);
  ASSERT_TRUE(tok);
  std::vector<int32_t> ids;
  EXPECT_TRUE(tok->EncodeRecord(r[5], &ids).ok());
  Status s = tok->EncodeRecord(r.back(), &ids);
  EXPECT_EQ(s.code(), Code::kInvalidInput);
  EXPECT_NE(s.message().find("U+00DF"), std::string::npos) << s.message();
}

TEST(Tokenizer, BadConfigAndRecordsAreRejected) {
  TokenizerConfig c;
  c.type = "wordpiece";
  EXPECT_EQ(TrainTokenizer(c, {{"a"}}).status().code(), Code::kInvalidArgument);
  c.type = "sentencepiece";
  c.sp_model_type = "word";
  EXPECT_EQ(TrainTokenizer(c, {{"a"}}).status().code(), Code::kInvalidArgument);
  c.sp_model_type = "unigram";
  c.column_markers = true;
  c.num_columns = 0;
  EXPECT_EQ(TrainTokenizer(c, {{"a"}}).status().code(), Code::kInvalidArgument);
  c.num_columns = 2;
  auto res = TrainTokenizer(c, {{"a", "b"}, {"a"}});
  EXPECT_EQ(res.status().code(), Code::kInvalidInput);
  EXPECT_NE(res.status().message().find("training record 2: 1 fields, expected 2"),
            std::string::npos);
  c.column_markers = false;
  res = TrainTokenizer(c, {{"a"}, {"b\xc3"}});
  EXPECT_EQ(res.status().code(), Code::kInvalidInput);
  EXPECT_NE(res.status().message().find("invalid UTF-8"), std::string::npos);
  res = TrainTokenizer(c, {{""}, {"", ""}});
  EXPECT_EQ(res.status().code(), Code::kInvalidInput);
  c.type = "char";
  EXPECT_TRUE(TrainTokenizer(c, {{""}, {"", ""}}).ok());  // char: specials only
}

TEST(RecordDecoder, HandlesSeparatorsAtRecordStartAndResets) {
  TokenizerConfig c;
  c.type = "char";
  auto tok = Train(c, {{"ab", "c"}});
  ASSERT_TRUE(tok);
  const int a = 2, b = 3, cc = 4, d = tok->delimiter_id(), n = tok->end_id();
  RecordDecoder dec(*tok);
  EXPECT_TRUE(dec.Push(n));  // an empty line
  EXPECT_EQ(dec.fields(), std::vector<std::string>{""});
  EXPECT_FALSE(dec.Push(d));  // push after done starts a new record
  EXPECT_FALSE(dec.done());
  dec.Push(a);
  dec.Push(d);
  EXPECT_TRUE(dec.Push(n));
  EXPECT_EQ(dec.fields(), (std::vector<std::string>{"", "a", ""}));
  dec.Reset();
  for (int id : {a, b, d, cc}) EXPECT_FALSE(dec.Push(id));
  EXPECT_EQ(dec.fields(), (std::vector<std::string>{"ab", "c"}));
  EXPECT_EQ(dec.chars(), 3u);

  c.column_markers = true;
  c.num_columns = 2;
  auto mt = Train(c, {{"ab", "c"}});
  ASSERT_TRUE(mt);
  RecordDecoder md(*mt);
  md.Push(mt->column_id(0));
  EXPECT_EQ(md.fields().size(), 1u);  // <col0> at the start opens field 0
  md.Push(mt->column_id(1));
  EXPECT_TRUE(md.Push(mt->end_id()));
  EXPECT_EQ(md.fields(), (std::vector<std::string>{"", ""}));
  md.Reset();
  EXPECT_EQ(mt->text(5), "c");  // ids: <n> <col0> <col1> a b c
  md.Push(5);                   // text before any marker goes to field 0
  md.Push(mt->column_id(1));
  md.Push(4);
  EXPECT_EQ(md.fields(), (std::vector<std::string>{"c", "b"}));
}

TEST(Tokenizer, EncodePrefixOpensTheNextField) {
  for (bool markers : {false, true}) {
    TokenizerConfig c;
    c.vocab_size = 100;
    c.column_markers = markers;
    c.num_columns = markers ? 3 : 0;
    Records r;
    for (int i = 0; i < 20; ++i) r.push_back({fmt::format("x{}", i), "y", "z"});
    auto tok = Train(c, r);
    ASSERT_TRUE(tok);
    std::vector<int32_t> ids;
    ASSERT_TRUE(tok->EncodePrefix({"x1", "y"}, &ids).ok());
    std::vector<int32_t> x1, y;
    ASSERT_TRUE(tok->EncodeField("x1", &x1).ok());
    ASSERT_TRUE(tok->EncodeField("y", &y).ok());
    std::vector<int32_t> want;
    if (markers) want.push_back(tok->column_id(0));
    want.insert(want.end(), x1.begin(), x1.end());
    want.push_back(markers ? tok->column_id(1) : tok->delimiter_id());
    want.insert(want.end(), y.begin(), y.end());
    want.push_back(markers ? tok->column_id(2) : tok->delimiter_id());
    EXPECT_EQ(ids, want);
    RecordDecoder dec(*tok);
    for (int id : ids) EXPECT_FALSE(dec.Push(id));
    EXPECT_EQ(dec.fields(), (std::vector<std::string>{"x1", "y", ""}));
    ids.clear();
    ASSERT_TRUE(tok->EncodePrefix({}, &ids).ok());
    EXPECT_EQ(ids, markers ? std::vector<int32_t>{tok->column_id(0)} : std::vector<int32_t>{});
    if (markers) {
      EXPECT_EQ(tok->EncodePrefix({"a", "b", "c"}, &ids).code(), Code::kInvalidInput);
      EXPECT_EQ(tok->EncodeRecord({"a", "b"}, &ids).code(), Code::kInvalidInput);
    }
  }
}

// ---- corrupted / foreign files ----

class Corrupt : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / fmt::format("tok_corrupt_{}", ::getpid());
    fs::remove_all(root_);
    Records r;
    for (int i = 0; i < 40; ++i) r.push_back({"alpha " + std::to_string(i), "beta\n"});
    TokenizerConfig c;
    c.vocab_size = 100;
    auto a = Train(c, r);
    c.sp_model_type = "bpe";
    r.push_back({"gamma", "delta"});
    auto b = Train(c, r);
    c.type = "char";
    auto ch = Train(c, r);
    ASSERT_TRUE(a && b && ch);
    ASSERT_TRUE(a->Save((root_ / "a").string()).ok());
    ASSERT_TRUE(b->Save((root_ / "b").string()).ok());
    ASSERT_TRUE(ch->Save((root_ / "c").string()).ok());
  }
  void TearDown() override { fs::remove_all(root_); }

  static std::string Read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  static void Write(const fs::path& p, const std::string& s) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << s;
  }
  // Edits a.json (or c) with fn and expects loading to fail with kCorrupt and
  // a message naming `file` and containing `needle`.
  void ExpectCorrupt(const char* which, const std::function<void(nlohmann::json&)>& fn,
                     const char* needle, const char* file = "tokenizer.json") {
    const fs::path dir = root_ / which;
    const std::string orig = Read(dir / "tokenizer.json");
    auto j = nlohmann::json::parse(orig);
    fn(j);
    Write(dir / "tokenizer.json", j.dump());
    auto res = LoadTokenizer(dir.string());
    EXPECT_FALSE(res.ok()) << needle;
    EXPECT_EQ(res.status().code(), Code::kCorrupt) << res.status().ToString();
    EXPECT_NE(res.status().message().find(file), std::string::npos) << res.status().message();
    EXPECT_NE(res.status().message().find(needle), std::string::npos) << res.status().message();
    Write(dir / "tokenizer.json", orig);
    EXPECT_TRUE(LoadTokenizer(dir.string()).ok());
  }
  fs::path root_;
};

TEST_F(Corrupt, MissingAndGarbageFiles) {
  EXPECT_EQ(LoadTokenizer((root_ / "none").string()).status().code(), Code::kNotFound);
  Write(root_ / "a" / "tokenizer.json", "{\"format\": ");
  auto res = LoadTokenizer((root_ / "a").string());
  EXPECT_EQ(res.status().code(), Code::kCorrupt);
  EXPECT_NE(res.status().message().find("tokenizer.json: not valid JSON"), std::string::npos);
  Write(root_ / "a" / "tokenizer.json", "[1,2]");
  EXPECT_EQ(LoadTokenizer((root_ / "a").string()).status().code(), Code::kCorrupt);
}

TEST_F(Corrupt, JsonFieldsAreChecked) {
  ExpectCorrupt(
      "a", [](auto& j) { j["format_version"] = 2; }, "format_version 2");
  ExpectCorrupt(
      "a", [](auto& j) { j["format"] = "other"; }, "not a datasynth tokenizer");
  ExpectCorrupt(
      "a", [](auto& j) { j["type"] = "wordpiece"; }, "unknown tokenizer type");
  ExpectCorrupt(
      "a", [](auto& j) { j["type"] = 3; }, "'type' must be a string");
  ExpectCorrupt(
      "a", [](auto& j) { j["vocab_size"] = j["vocab_size"].template get<int>() + 1; },
      "vocab_size");
  ExpectCorrupt(
      "a", [](auto& j) { j["vocab_size"] = -5; }, "vocab_size");
  ExpectCorrupt(
      "a", [](auto& j) { j["column_markers"] = true; }, "num_columns");
  ExpectCorrupt(
      "a",
      [](auto& j) {
        j["specials"] = {"<n>", "<x>"};
      },
      "specials");
  ExpectCorrupt(
      "a", [](auto& j) { j.erase("specials"); }, "missing key 'specials'");
  ExpectCorrupt(
      "a", [](auto& j) { j["num_columns"] = 1e12; }, "num_columns");
  ExpectCorrupt(
      "a", [](auto& j) { j["sentencepiece"]["num_pieces"] = 3; }, "pieces", "tokenizer.model");
  ExpectCorrupt(
      "a", [](auto& j) { j["sentencepiece"]["model_crc32"] = 1; }, "does not match",
      "tokenizer.model");
  ExpectCorrupt(
      "a", [](auto& j) { j["sentencepiece"]["model_file"] = "../x"; }, "model_file");
  ExpectCorrupt(
      "a", [](auto& j) { j["sentencepiece"]["model_type"] = "word"; }, "model_type");
  ExpectCorrupt(
      "a",
      [](auto& j) {
        j["sentencepiece"]["escapes"] = {{10, 65}};
      },
      "invalid escape", "tokenizer.model");
  ExpectCorrupt(
      "a", [](auto& j) { j["sentencepiece"]["escapes"] = {{10}}; }, "escapes[0]");
  ExpectCorrupt(
      "a",
      [](auto& j) {
        j["sentencepiece"]["escapes"] = {{10, 0xD800}};
      },
      "escapes[0]");
  ExpectCorrupt(
      "c", [](auto& j) { std::swap(j["char"]["chars"][2], j["char"]["chars"][3]); },
      "out of order");
  ExpectCorrupt(
      "c", [](auto& j) { j["char"]["chars"][2] = "ab"; }, "exactly one character");
  ExpectCorrupt(
      "c", [](auto& j) { j["char"]["chars"][2] = 65; }, "not a string");
  ExpectCorrupt(
      "c", [](auto& j) { j["char"] = 1; }, "chars");
}

TEST_F(Corrupt, ForeignOrDamagedModelFileIsDetected) {
  // tokenizer.model from another tokenizer.
  fs::copy_file(root_ / "b" / "tokenizer.model", root_ / "a" / "tokenizer.model",
                fs::copy_options::overwrite_existing);
  auto res = LoadTokenizer((root_ / "a").string());
  EXPECT_EQ(res.status().code(), Code::kCorrupt);
  EXPECT_NE(res.status().message().find("tokenizer.model: does not match tokenizer.json"),
            std::string::npos)
      << res.status().message();
  // Truncated / flipped bytes.
  std::string m = Read(root_ / "b" / "tokenizer.model");
  Write(root_ / "b" / "tokenizer.model", m.substr(0, m.size() / 2));
  EXPECT_EQ(LoadTokenizer((root_ / "b").string()).status().code(), Code::kCorrupt);
  m[m.size() / 2] ^= 0x40;
  Write(root_ / "b" / "tokenizer.model", m);
  EXPECT_EQ(LoadTokenizer((root_ / "b").string()).status().code(), Code::kCorrupt);
  fs::remove(root_ / "b" / "tokenizer.model");
  EXPECT_EQ(LoadTokenizer((root_ / "b").string()).status().code(), Code::kNotFound);
}

TEST_F(Corrupt, ModelThatIsNotSentencePieceIsRejectedEvenWithMatchingChecksum) {
  // A consistent pair whose model is garbage: the checksum passes, the parse must not.
  const fs::path dir = root_ / "a";
  const std::string junk = "\xff\xff\xff\xff not a protobuf";
  Write(dir / "tokenizer.model", junk);
  auto j = nlohmann::json::parse(Read(dir / "tokenizer.json"));
  j["sentencepiece"]["model_bytes"] = junk.size();
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(junk.data()), static_cast<uInt>(junk.size()));
  j["sentencepiece"]["model_crc32"] = static_cast<uint32_t>(crc);
  Write(dir / "tokenizer.json", j.dump());
  auto res = LoadTokenizer(dir.string());
  EXPECT_EQ(res.status().code(), Code::kCorrupt);
  EXPECT_NE(res.status().message().find("tokenizer.model"), std::string::npos)
      << res.status().message();
}

// ---- a real table ----

Records ReadTelco(size_t max_rows) {
  std::ifstream in(std::string(DS_SOURCE_DIR) + "/examples/telco_churn_2k.csv");
  Records out;
  std::string line;
  std::getline(in, line);  // header
  while (out.size() < max_rows && std::getline(in, line)) {
    std::vector<std::string> fields;
    std::stringstream ss(line);
    std::string f;
    while (std::getline(ss, f, ',')) {
      if (f.size() >= 2 && f.front() == '"' && f.back() == '"') f = f.substr(1, f.size() - 2);
      fields.push_back(f);
    }
    if (!line.empty() && line.back() == ',') fields.emplace_back();
    out.push_back(std::move(fields));
  }
  return out;
}

TEST(Telco, TrainsWithinVocabSizeAndRoundTripsEveryRecord) {
  const Records rows = ReadTelco(2000);
  ASSERT_EQ(rows.size(), 2000u);
  ASSERT_EQ(rows[0].size(), 20u);
  struct Case {
    const char* type;
    const char* sp;
    int vocab;
    bool markers;
  };
  for (Case k :
       {Case{"sentencepiece", "unigram", 20000, false}, Case{"sentencepiece", "bpe", 20000, false},
        Case{"sentencepiece", "unigram", 300, true}, Case{"sentencepiece", "bpe", 300, false},
        Case{"char", "unigram", 20000, true}}) {
    TokenizerConfig c;
    c.type = k.type;
    c.sp_model_type = k.sp;
    c.vocab_size = k.vocab;
    c.column_markers = k.markers;
    c.num_columns = k.markers ? 20 : 0;
    auto tok = Train(c, rows);
    ASSERT_TRUE(tok);
    EXPECT_LE(tok->vocab_size(), k.vocab);
    const size_t tokens = ExpectRoundTrip(*tok, rows);
    std::printf("telco %s/%s vocab_size=%d markers=%d: vocab %d, %zu tokens for %zu records\n",
                k.type, k.sp, k.vocab, k.markers, tok->vocab_size(), tokens, rows.size());
  }
}

}  // namespace
}  // namespace ds
