// Field tokenizer (tokenize/field_tokenizer.h): round trip of every type,
// the token layout, masks (only legal tokens; dates always real; numbers in
// range), sampling under the mask, save / load and corrupt files.
#include "tokenize/field_tokenizer.h"

#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "generate/field_filter.h"
#include "util/rng.h"
#include "util/utf8.h"

namespace ds {
namespace {

const std::vector<std::string> kHeader = {"cat", "n", "price", "day", "when", "note", "k", "e"};

std::vector<std::vector<std::string>> Records() {
  std::vector<std::vector<std::string>> r;
  const char* cats[] = {"red", "green", "blue", ""};
  const char* notes[] = {"hello, world", "", "quote \" and\nnewline", "ünï"};
  for (int i = 0; i < 60; ++i) {
    const int day = 1 + (i * 7) % 28;
    r.push_back({cats[i % 4], std::to_string(i * 37 - 500),
                 fmt::format("{}.{:02d}", 10 + i % 50, (i * 13) % 100),
                 fmt::format("2020-{:02d}-{:02d}", 1 + i % 12, day),
                 i % 10 == 0 ? "" : fmt::format("{}/{}/19{}", 1 + i % 12, day, 50 + i % 40),
                 notes[i % 4], "const", ""});
  }
  r[5][1] = "NA";  // a missing spelling in a numeric column
  return r;
}

std::unique_ptr<FieldTokenizer> Train(int rare_count = 1,
                                      const std::map<std::string, std::string>& types = {}) {
  FieldTokenizerOptions o;
  o.rare_count = rare_count;
  o.field_types = types;
  auto t = FieldTokenizer::Train(kHeader, Records(), o);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(*t) : nullptr;
}

// A saved tokenizer.json, parsed.
nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

// Both tokenizers encode every record to the same ids.
void ExpectSameEncoding(const Tokenizer& a, const Tokenizer& b,
                        const std::vector<std::vector<std::string>>& recs) {
  for (const auto& r : recs) {
    std::vector<int32_t> x, y;
    ASSERT_TRUE(a.EncodeRecord(r, &x).ok());
    ASSERT_TRUE(b.EncodeRecord(r, &y).ok());
    EXPECT_EQ(x, y);
  }
}

TEST(FieldTokenizer, TypesAndLayout) {
  auto t = Train();
  ASSERT_TRUE(t);
  const auto& c = t->columns();
  ASSERT_EQ(c.size(), kHeader.size());
  EXPECT_EQ(c[0].type.type, FieldType::kCategorical);
  EXPECT_EQ(c[1].type.type, FieldType::kInteger);
  EXPECT_EQ(c[2].type.type, FieldType::kDecimal);
  EXPECT_EQ(c[3].type.type, FieldType::kDatetime);
  EXPECT_EQ(c[4].type.format, "%-m/%-d/%Y");
  EXPECT_EQ(c[5].type.type, FieldType::kCategorical);  // 4 distinct notes in 60 rows
  EXPECT_EQ(c[6].type.type, FieldType::kConstant);
  EXPECT_EQ(c[7].type.type, FieldType::kEmpty);
  // Disjoint, contiguous id ranges in header order after <n>.
  int next = 1;
  for (const auto& col : c) {
    EXPECT_EQ(col.base, next) << col.name;
    next += col.size;
  }
  EXPECT_EQ(next, t->vocab_size());
  EXPECT_EQ(c[6].size, 0);
  EXPECT_EQ(c[7].size, 0);
}

void ExpectRoundTrip(const FieldTokenizer& t, const std::vector<std::vector<std::string>>& recs) {
  for (const auto& r : recs) {
    std::vector<int32_t> ids;
    ASSERT_TRUE(t.EncodeRecord(r, &ids).ok());
    ASSERT_EQ(ids.back(), 0);
    std::vector<std::string> back;
    std::string err = t.DecodeRecord(std::span<const int32_t>(ids.data(), ids.size() - 1), &back);
    EXPECT_EQ(err, "");
    EXPECT_EQ(back, r);
    EXPECT_EQ(t.CheckFields(back), "");
    EXPECT_LE(int(ids.size()), t.max_record_tokens());
  }
}

TEST(FieldTokenizer, RoundTripEveryType) {
  auto t = Train();
  ASSERT_TRUE(t);
  ExpectRoundTrip(*t, Records());
  // Free text as chars with <eof> (forced), ids with chars.
  auto tt = Train(1, {{"note", "text"}, {"cat", "id"}});
  ASSERT_TRUE(tt);
  EXPECT_EQ(tt->columns()[5].type.type, FieldType::kText);
  ExpectRoundTrip(*tt, Records());
}

TEST(FieldTokenizer, RarePooling) {
  auto recs = Records();
  recs[0][0] = "violet";  // seen once
  recs[1][0] = "indigo";  // seen once
  FieldTokenizerOptions o;
  o.rare_count = 2;
  o.header_order = true;  // column 0's token first
  auto t = FieldTokenizer::Train(kHeader, recs, o);
  ASSERT_TRUE(t.ok());
  const auto& c = (*t)->columns()[0];
  EXPECT_EQ(c.values.size(), 4u);  // red green blue ""
  EXPECT_EQ(c.rare, (std::vector<std::string>{"violet", "indigo"}));
  std::vector<int32_t> a, b;
  ASSERT_TRUE((*t)->EncodeRecord(recs[0], &a).ok());
  ASSERT_TRUE((*t)->EncodeRecord(recs[1], &b).ok());
  EXPECT_EQ(a[0], b[0]);  // one <other> token
  std::vector<std::string> back;
  EXPECT_EQ((*t)->DecodeRecord(std::span<const int32_t>(a.data(), a.size() - 1), &back), "");
  EXPECT_TRUE(back[0] == "violet" || back[0] == "indigo") << back[0];
  EXPECT_EQ((*t)->CheckFields(back), "");
  // <other> in the FIRST column still draws from the whole rare list: the
  // choice hashes the whole record, so records differing later differ here.
  std::set<std::string> drawn;
  for (const auto& r : recs) {
    auto x = r;
    x[0] = "violet";
    std::vector<int32_t> ids;
    ASSERT_TRUE((*t)->EncodeRecord(x, &ids).ok());
    ASSERT_EQ((*t)->DecodeRecord(std::span<const int32_t>(ids.data(), ids.size() - 1), &back), "");
    drawn.insert(back[0]);
  }
  EXPECT_EQ(drawn, (std::set<std::string>{"violet", "indigo"}));
}

TEST(FieldTokenizer, EncodeErrorsAndChecks) {
  auto t = Train();
  ASSERT_TRUE(t);
  auto r = Records()[1];
  std::vector<int32_t> ids;
  r[0] = "purple";
  EXPECT_FALSE(t->EncodeRecord(r, &ids).ok());
  EXPECT_NE(t->CheckFields(r), "");
  r = Records()[1];
  r[1] = "999999";  // outside the learned range
  EXPECT_FALSE(t->EncodeRecord(r, &ids).ok());
  r = Records()[1];
  r[3] = "2020-02-30";
  EXPECT_NE(t->CheckFields(r), "");
  r = Records()[1];
  r[2] = "10.5";  // fixed style needs "10.50"
  EXPECT_NE(t->CheckFields(r), "");
  EXPECT_TRUE(ids.empty());
  EXPECT_NE(t->CheckFields({"red"}), "");  // field count
}

// Walks a record by always taking the highest-id legal token (or a random
// legal one), checking that the mask allows exactly what Advance accepts.
std::vector<int32_t> SampleUnderMask(const FieldTokenizer& t, Philox* rng, bool highest) {
  std::vector<float> logits(size_t(t.vocab_size()));
  FieldTokenizer::Cursor c;
  t.Begin(&c, nullptr);
  std::vector<int32_t> ids;
  for (int step = 0; step < 1000; ++step) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    t.Mask(c, logits.data());
    std::vector<int> legal;
    for (int v = 0; v < t.vocab_size(); ++v)
      if (logits[size_t(v)] == 0.0f) legal.push_back(v);
    EXPECT_FALSE(legal.empty());
    if (legal.empty()) return ids;
    for (int v = 0; v < t.vocab_size(); ++v) {  // every masked token is indeed illegal
      if (logits[size_t(v)] == 0.0f || v == 0) continue;
      if (rng->Below(8) != 0) continue;  // a sample of them keeps the test fast
      FieldTokenizer::Cursor probe = c;
      t.Advance(&probe, v, nullptr);
      EXPECT_TRUE(probe.broken) << "masked token " << v << " was accepted";
    }
    const int id = highest ? legal.back() : legal[rng->Below(legal.size())];
    if (id == 0) return ids;
    t.Advance(&c, id, nullptr);
    EXPECT_FALSE(c.broken) << "legal token " << id << " broke the record";
    ids.push_back(id);
  }
  ADD_FAILURE() << "no end of record";
  return ids;
}

// A column of repeated names with too many distinct values for a token each
// (12,000 rows, 5,500 names: over the 5,000-category limit, text) is closed
// text: spelled by chars, but masked walks only ever spell names seen, an
// unseen name is not a value (CheckFields), and save / load keeps it closed.
TEST(FieldTokenizer, ClosedTextSpellsOnlySeenValues) {
  const std::vector<std::string> header = {"city", "n"};
  std::vector<std::vector<std::string>> recs;
  std::set<std::string> names;
  for (int i = 0; i < 12000; ++i) {
    const int k = (i * 7919) % 5500;
    std::string name = fmt::format("{}{}ville", char('A' + k % 26), k);
    names.insert(name);
    recs.push_back({name, std::to_string(i % 10)});
  }
  auto t = FieldTokenizer::Train(header, recs, FieldTokenizerOptions{});
  ASSERT_TRUE(t.ok()) << t.status().message();
  const auto& col = (*t)->columns()[0];
  ASSERT_EQ(col.type.type, FieldType::kId);
  EXPECT_EQ(col.closed.size(), names.size());
  Philox rng(3, 1);
  for (int i = 0; i < 200; ++i) {
    auto ids = SampleUnderMask(**t, &rng, i % 7 == 0);
    std::vector<std::string> f;
    ASSERT_EQ((*t)->DecodeRecord(ids, &f), "");
    EXPECT_TRUE(names.count(f[0])) << f[0];
  }
  EXPECT_NE((*t)->CheckFields({"Zinvented", "3"}), "");
  EXPECT_NE((*t)->CheckFields({"A0vill", "3"}), "");  // a prefix of a name is not a name
  EXPECT_EQ((*t)->CheckFields({recs[5][0], "3"}), "");
  const std::string dir = testing::TempDir() + "/field_tok_closed";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE((*t)->Save(dir).ok());
  auto l = LoadTokenizer(dir);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_NE((*l)->CheckFields({"Zinvented", "3"}), "");
  // A free-text column (values mostly distinct) stays open.
  recs.resize(100);
  for (int i = 0; i < 100; ++i) recs[i][0] = fmt::format("line {} of the log", i);
  auto open = FieldTokenizer::Train(header, recs, FieldTokenizerOptions{});
  ASSERT_TRUE(open.ok());
  EXPECT_TRUE((*open)->columns()[0].closed.empty());
  std::filesystem::remove_all(dir);
}

// Open free text with sub-word pieces (text_pieces): fewer tokens a value,
// exact round trip, values never longer than max_len under the mask, pieces
// saved and loaded; a model without "pieces" is chars only, as before.
TEST(FieldTokenizer, FreeTextPieces) {
  const std::vector<std::string> header = {"src", "line"};
  std::vector<std::vector<std::string>> recs;
  const char* hosts[] = {"srv", "mail", "gw"};
  for (int i = 0; i < 300; ++i)
    recs.push_back({i % 2 ? "sshd" : "exim",
                    fmt::format("{} sshd[{}]: Failed password for user{} from 10.0.{}.{} port {}",
                                hosts[i % 3], 1000 + i * 7, i % 13, i % 7, i % 250, 40000 + i)});
  recs[3][1] = "";  // an empty value was seen
  FieldTokenizerOptions chars_only, pieces;
  pieces.text_pieces = 64;
  auto c = FieldTokenizer::Train(header, recs, chars_only);
  auto p = FieldTokenizer::Train(header, recs, pieces);
  ASSERT_TRUE(c.ok() && p.ok()) << p.status().message();
  const auto& col = (*p)->columns()[1];
  ASSERT_EQ(col.type.type, FieldType::kText);
  EXPECT_TRUE((*c)->columns()[1].pieces.empty());
  ASSERT_GE(col.pieces.size(), 20u);
  EXPECT_EQ((*p)->vocab_size(), (*c)->vocab_size() + int(col.pieces.size()));
  size_t nc = 0, np = 0;
  for (const auto& r : recs) {
    std::vector<int32_t> a, b;
    ASSERT_TRUE((*c)->EncodeRecord(r, &a).ok());
    ASSERT_TRUE((*p)->EncodeRecord(r, &b).ok());
    nc += a.size();
    np += b.size();
  }
  ExpectRoundTrip(**p, recs);
  EXPECT_LT(np * 3, nc * 2);  // at least 1.5x fewer steps
  Philox rng(5, 1);
  for (int i = 0; i < 300; ++i) {
    auto ids = SampleUnderMask(**p, &rng, i % 3 == 0);
    std::vector<std::string> f;
    ASSERT_EQ((*p)->DecodeRecord(ids, &f), "");
    EXPECT_LE(int(SplitCodePoints(f[1]).size()), col.max_len);
    EXPECT_EQ((*p)->CheckFields(f), "") << f[1];
  }
  EXPECT_NE((*p)->CheckFields({"sshd", std::string(size_t(col.max_len) + 1, 's')}), "");
  EXPECT_NE((*p)->CheckFields({"sshd", "unseen char \x01"}), "");
  const std::string dir = testing::TempDir() + "/field_tok_pieces";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE((*p)->Save(dir).ok());
  auto l = LoadTokenizer(dir);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ((*l)->vocab_size(), (*p)->vocab_size());
  ExpectSameEncoding(**p, **l, recs);
  const nlohmann::json good = ReadJson(dir + "/tokenizer.json");
  auto load = [&](auto edit) {
    nlohmann::json j = good;
    edit(j["field"]["columns"][1]);
    std::ofstream(dir + "/tokenizer.json") << j.dump();
    return LoadTokenizer(dir);
  };
  auto bad = [&](auto edit) {
    auto r = load(edit);
    return !r.ok() && r.status().code() == Code::kCorrupt;
  };
  EXPECT_TRUE(bad([](nlohmann::json& o) { o["pieces"][1] = o["pieces"][0]; }));   // twice
  EXPECT_TRUE(bad([](nlohmann::json& o) { o["pieces"][0] = "s"; }));               // one char
  EXPECT_TRUE(bad([](nlohmann::json& o) { o["pieces"][0] = "\u00e9\u00e9"; }));  // unknown chars
  EXPECT_TRUE(bad([](nlohmann::json& o) { o["pieces"][0] = 7; }));
  // Without "pieces" the column is chars only: the layout of older models.
  auto old = load([](nlohmann::json& o) { o.erase("pieces"); });
  EXPECT_FALSE(old.ok());  // vocabulary no longer matches the saved size
  std::filesystem::remove_all(dir);
}

TEST(FieldTokenizer, MaskAllowsOnlyLegalTokens) {
  auto t = Train();
  ASSERT_TRUE(t);
  Philox rng(7, 1);
  std::set<std::string> days;
  for (int i = 0; i < 400; ++i) {
    auto ids = SampleUnderMask(*t, &rng, i % 5 == 0);
    std::vector<std::string> f;
    ASSERT_EQ(t->DecodeRecord(ids, &f), "");
    ASSERT_EQ(t->CheckFields(f), "") << fmt::format("{}", fmt::join(f, "|"));
    days.insert(f[3]);
  }
  // Random legal walks reach day 31, and never an unreal date.
  bool saw31 = false;
  for (const auto& d : days) {
    if (d.size() == 10 && d.substr(8) == "31") saw31 = true;
    EXPECT_NE(d.substr(5), "02-30");
    EXPECT_NE(d.substr(5), "04-31");
  }
  EXPECT_TRUE(saw31);
}

TEST(FieldTokenizer, DayMaskFollowsMonthAndYear) {
  auto t = Train();
  ASSERT_TRUE(t);
  const auto& col = t->columns()[4];  // %-m/%-d/%Y, years 1950..1989
  ASSERT_EQ(col.type.type, FieldType::kDatetime);
  std::vector<float> logits(size_t(t->vocab_size()));
  for (int year : {1951, 1952}) {
    FieldTokenizer::Cursor c;
    t->Begin(&c, nullptr);
    std::vector<int32_t> ids;
    auto rec = Records()[1];
    rec[4] = fmt::format("2/1/{}", year);
    ASSERT_TRUE(t->EncodeRecord(rec, &ids).ok());
    // Feed up to and including the month of column 4, then ask for the day.
    size_t k = 0;
    const auto order = t->generation_order();
    const int pos = int(std::find(order.begin(), order.end(), 4) - order.begin());
    while (c.col < pos) t->Advance(&c, ids[k++], nullptr);
    t->Advance(&c, ids[k++], nullptr);  // year
    t->Advance(&c, ids[k++], nullptr);  // month
    std::fill(logits.begin(), logits.end(), 0.0f);
    t->Mask(c, logits.data());
    int allowed = 0;
    for (float l : logits) allowed += l == 0.0f;
    EXPECT_EQ(allowed, year == 1952 ? 29 : 28) << year;
  }
}

TEST(FieldTokenizer, FilterMatchesMask) {
  auto t = Train();
  ASSERT_TRUE(t);
  auto f = NewFieldFilter(*t, 2);
  std::vector<int32_t> ids;
  ASSERT_TRUE(t->EncodeRecord(Records()[2], &ids).ok());
  f->Begin(1);
  std::vector<float> logits(size_t(t->vocab_size()));
  for (int32_t id : ids) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    f->Mask(1, logits.data());
    EXPECT_EQ(logits[size_t(id)], 0.0f) << "the real record's token " << id << " is masked";
    f->Accept(1, id);
  }
}

TEST(FieldTokenizer, SaveLoadAndCorruptFiles) {
  auto t = Train(2);
  ASSERT_TRUE(t);
  const std::string dir = testing::TempDir() + "/field_tok";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(t->Save(dir).ok());
  auto l = LoadTokenizer(dir);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ((*l)->type(), "field");
  EXPECT_EQ((*l)->vocab_size(), t->vocab_size());
  ExpectSameEncoding(*t, **l, Records());
  const nlohmann::json good = ReadJson(dir + "/tokenizer.json");
  auto corrupt = [&](auto edit) {
    nlohmann::json j = good;
    edit(j);
    std::ofstream(dir + "/tokenizer.json") << j.dump();
    auto r = LoadTokenizer(dir);
    return !r.ok() && r.status().code() == Code::kCorrupt;
  };
  auto cols = [](nlohmann::json& j) -> nlohmann::json& { return j["field"]["columns"]; };
  EXPECT_TRUE(corrupt([](nlohmann::json& j) { j["vocab_size"] = 5; }));
  EXPECT_TRUE(corrupt([&](nlohmann::json& j) { cols(j)[1]["edges"] = {5, 3}; }));
  EXPECT_TRUE(corrupt([&](nlohmann::json& j) { cols(j)[1]["edges"] = {1}; }));
  EXPECT_TRUE(corrupt([&](nlohmann::json& j) { cols(j)[1]["decimals"] = 30; }));
  EXPECT_TRUE(corrupt([&](nlohmann::json& j) { cols(j)[0]["values"] = {"a", "a"}; }));
  EXPECT_TRUE(corrupt([&](nlohmann::json& j) { cols(j)[3]["format"] = "%Q"; }));
  EXPECT_TRUE(corrupt([&](nlohmann::json& j) { cols(j)[3]["years"] = {2020, 99999}; }));
  EXPECT_TRUE(corrupt([&](nlohmann::json& j) { cols(j)[3]["missing"] = {"zzz"}; }));
  EXPECT_TRUE(corrupt([&](nlohmann::json& j) { cols(j)[2]["type"] = "float"; }));
  EXPECT_TRUE(corrupt([&](nlohmann::json& j) { cols(j)[1]["name"] = "cat"; }));
  EXPECT_TRUE(corrupt([](nlohmann::json& j) { j["field"]["columns"] = nlohmann::json::array(); }));
  EXPECT_TRUE(corrupt([](nlohmann::json& j) { j["specials"] = {"<n>", "<d>"}; }));
  EXPECT_TRUE(corrupt([&](nlohmann::json& j) { cols(j)[0]["values"] = 7; }));
  std::filesystem::remove_all(dir);
}

// Numbers as exports write them (R's exponents, Python's float noise) are a
// numeric column, read by value: encoded, decoded at the column's precision,
// type-checked, and the normalized flag survives save / load.
TEST(FieldTokenizer, NormalizedNumbersRoundTripByValue) {
  const std::vector<std::string> header = {"inc", "x"};
  std::vector<std::vector<std::string>> recs;
  for (int i = 0; i < 40; ++i)
    recs.push_back({std::to_string(30000 + 1000 * i), fmt::format("{}.{:04d}", i % 9, i * 37)});
  recs[3] = {"3e+05", "8.927999999999999"};
  auto t = FieldTokenizer::Train(header, recs, FieldTokenizerOptions{});
  ASSERT_TRUE(t.ok()) << t.status().message();
  const auto& c = (*t)->columns();
  EXPECT_EQ(c[0].type.type, FieldType::kInteger);
  EXPECT_EQ(c[1].type.type, FieldType::kDecimal);
  EXPECT_EQ(c[1].type.decimals, 4);
  EXPECT_TRUE(c[0].type.normalized && c[1].type.normalized);
  std::vector<int32_t> ids;
  ASSERT_TRUE((*t)->EncodeRecord(recs[3], &ids).ok());
  std::vector<std::string> back;
  EXPECT_EQ((*t)->DecodeRecord(std::span<const int32_t>(ids.data(), ids.size() - 1), &back), "");
  EXPECT_EQ(back, (std::vector<std::string>{"300000", "8.9280"}));  // fixed style
  EXPECT_EQ((*t)->CheckFields({"3e+05", "8.927999999999999"}), "");
  EXPECT_EQ((*t)->CheckFields(back), "");
  EXPECT_NE((*t)->CheckFields({"3e+06", "1"}), "");  // outside the learned range
  const std::string dir = testing::TempDir() + "/field_tok_norm";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE((*t)->Save(dir).ok());
  auto l = LoadTokenizer(dir);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ((*l)->CheckFields({"3e+05", "8.927999999999999"}), "");
  std::filesystem::remove_all(dir);
}

// Random digit edits of a saved tokenizer.json: loading either fails cleanly
// or gives a tokenizer whose masked walks decode and type-check (run under
// ASan / UBSan by scripts/sanitize.sh).
TEST(FieldTokenizer, MutatedFilesLoadOrFailCleanly) {
  auto t = Train(2);
  ASSERT_TRUE(t);
  const std::string dir = testing::TempDir() + "/field_tok_mut";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(t->Save(dir).ok());
  std::ifstream in(dir + "/tokenizer.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string good = ss.str();
  Philox rng(11, 3);
  int loaded = 0;
  for (int iter = 0; iter < 300; ++iter) {
    std::string text = good;
    for (int k = 0; k < 3; ++k) {
      const size_t at = rng.Below(text.size());
      if (text[at] >= '0' && text[at] <= '9') text[at] = char('0' + rng.Below(10));
      if (k == 0 && rng.Below(4) == 0) text.insert(at, "9");
    }
    std::ofstream(dir + "/tokenizer.json", std::ios::trunc) << text;
    auto l = LoadTokenizer(dir);
    if (!l.ok()) {
      EXPECT_EQ(l.status().code(), Code::kCorrupt) << l.status().message();
      continue;
    }
    ++loaded;
    const auto* f = dynamic_cast<const FieldTokenizer*>(l->get());
    ASSERT_NE(f, nullptr);
    for (int r = 0; r < 3; ++r) {
      auto ids = SampleUnderMask(*f, &rng, r == 0);
      std::vector<std::string> fields;
      EXPECT_EQ(f->DecodeRecord(ids, &fields), "");
      EXPECT_EQ(f->CheckFields(fields), "");
    }
  }
  EXPECT_GT(loaded, 0);  // some edits (values inside a range) still load
  std::filesystem::remove_all(dir);
}

// Columns are generated fewest distinct values first (a table's broad
// categories before the values they determine: vega_zipcodes' state before
// its city and coordinates), written back in header order. A start may fix
// only the first columns of that order; field_order "header" keeps the header
// order; models without "order" (older files) load in header order.
TEST(FieldTokenizer, GenerationOrderFewestValuesFirst) {
  const std::vector<std::string> header = {"zip", "lat", "state"};
  std::vector<std::vector<std::string>> recs;
  for (int i = 0; i < 200; ++i)
    recs.push_back({fmt::format("{:05d}", 100 + i), fmt::format("{}.{}", 20 + i % 37, i % 37 % 10),
                    i % 3 == 0 ? "NY" : "CA"});
  auto t = FieldTokenizer::Train(header, recs, FieldTokenizerOptions{});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ((*t)->generation_order(), (std::vector<int>{2, 1, 0}));
  const auto& cols = (*t)->columns();
  std::vector<int32_t> ids;
  ASSERT_TRUE((*t)->EncodeRecord(recs[4], &ids).ok());
  ASSERT_FALSE(ids.empty());
  EXPECT_GE(ids[0], cols[2].base);  // the record starts with the state
  EXPECT_LT(ids[0], cols[2].base + cols[2].size);
  std::vector<std::string> f;
  ASSERT_EQ(ids.back(), 0);
  ASSERT_EQ((*t)->DecodeRecord(std::span<const int32_t>(ids.data(), ids.size() - 1), &f), "");
  EXPECT_EQ(f, recs[4]);  // header order
  Philox rng(5, 1);
  for (int i = 0; i < 50; ++i) {
    auto s = SampleUnderMask(**t, &rng, false);
    ASSERT_EQ((*t)->DecodeRecord(s, &f), "");
    EXPECT_TRUE(f[2] == "NY" || f[2] == "CA") << f[2];
    EXPECT_EQ((*t)->CheckFields(f), "");
  }
  ids.clear();
  Status st = (*t)->EncodePrefix({"00104"}, &ids);  // zip is generated last
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("field_order"), std::string::npos) << st.message();
  EXPECT_TRUE(ids.empty());
  // Saved and loaded with its order; a file without "order" is header order.
  const std::string dir = testing::TempDir() + "/field_tok_order";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE((*t)->Save(dir).ok());
  auto l = LoadTokenizer(dir);
  ASSERT_TRUE(l.ok()) << l.status().message();
  auto* lf = dynamic_cast<FieldTokenizer*>(l->get());
  ASSERT_TRUE(lf);
  EXPECT_EQ(lf->generation_order(), (std::vector<int>{2, 1, 0}));
  nlohmann::json j;
  std::ifstream(dir + "/tokenizer.json") >> j;
  j["field"].erase("order");
  auto old = FieldTokenizer::Load(j, dir);
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_EQ(dynamic_cast<FieldTokenizer*>(old->get())->generation_order(),
            (std::vector<int>{0, 1, 2}));
  j["field"]["order"] = {2, 2, 0};
  EXPECT_FALSE(FieldTokenizer::Load(j, dir).ok());
  j["field"]["order"] = {2, 1};
  EXPECT_FALSE(FieldTokenizer::Load(j, dir).ok());
  // field_order "header": no reordering, and a start on the first column works.
  FieldTokenizerOptions ho;
  ho.header_order = true;
  auto h = FieldTokenizer::Train(header, recs, ho);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ((*h)->generation_order(), (std::vector<int>{0, 1, 2}));
  ids.clear();
  EXPECT_TRUE((*h)->EncodePrefix({"00104"}, &ids).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ds

namespace ds {
namespace {

// A zero-inflated column (ames' porch areas, lending_club's balances): the 0
// holds most rows and gets a bin of its own ([0, 1): no digit token); the
// other values are cut into quantile bins among themselves (before: the
// deduplicated quantiles left 3 bins, one of them [1, 1000)). Every value
// round-trips exactly and every sampled value is legal.
TEST(FieldTokenizer, PointMassesGetTheirOwnBin) {
  std::vector<std::vector<std::string>> rows;
  for (int i = 0; i < 2000; ++i) {
    const int v = i % 10 < 7 ? 0 : (i % 10 == 7 ? 100 : 1 + (i * 7919) % 997);
    rows.push_back({std::to_string(v), fmt::format("{}.{}", i % 50, i % 10)});
  }
  auto t = FieldTokenizer::Train({"porch", "x"}, rows, FieldTokenizerOptions{});
  ASSERT_TRUE(t.ok()) << t.status().message();
  const auto& c = (*t)->columns()[0];
  ASSERT_GE(c.edges.size(), 4u);
  EXPECT_EQ(c.edges[0], 0);
  EXPECT_EQ(c.edges[1], 1);  // [0, 1): the mass at 0 alone
  EXPECT_TRUE(std::find(c.edges.begin(), c.edges.end(), 100) != c.edges.end());
  EXPECT_TRUE(std::find(c.edges.begin(), c.edges.end(), 101) != c.edges.end());  // [100, 101)
  // 400 other values: clamp(400 / 40, 8, 32) = 10 quantile bins among them.
  EXPECT_GE(c.edges.size(), 2 + 2 + 10u);
  EXPECT_TRUE(std::is_sorted(c.edges.begin(), c.edges.end()));
  EXPECT_EQ(std::adjacent_find(c.edges.begin(), c.edges.end()), c.edges.end());
  int mx = 0;
  for (const auto& r : rows) mx = std::max(mx, std::stoi(r[0]));
  EXPECT_EQ(c.edges.back(), mx + 1);
  std::vector<int32_t> ids;
  ASSERT_TRUE((*t)->EncodeColumnField(0, "0", &ids).ok());
  EXPECT_EQ(ids.size(), 1u);  // the mass: its bin token alone
  ids.clear();
  ASSERT_TRUE((*t)->EncodeColumnField(0, "100", &ids).ok());
  EXPECT_EQ(ids.size(), 1u);
  ExpectRoundTrip(**t, rows);
  Philox rng(3, 1);
  for (int i = 0; i < 300; ++i) {
    auto s = SampleUnderMask(**t, &rng, false);
    std::vector<std::string> f;
    ASSERT_EQ((*t)->DecodeRecord(s, &f), "");
    ASSERT_EQ((*t)->CheckFields(f), "") << fmt::format("{}", fmt::join(f, "|"));
  }
}

}  // namespace
}  // namespace ds
