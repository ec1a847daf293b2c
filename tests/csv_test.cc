// Tests for src/io: InputStream (plain/gzip/stdin), CsvReader, CSV writer, LineReader.
#include "io/csv.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "io/input.h"
#include "io/line_reader.h"
#include "util/fs.h"
#include "util/rng.h"

namespace ds {
namespace {

using Rows = std::vector<std::vector<std::string>>;

std::string Gzip(std::string_view data, int level = 6) {
  z_stream s{};
  EXPECT_EQ(deflateInit2(&s, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&s, data.size()) + 64, '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  s.avail_in = static_cast<uInt>(data.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&s, Z_FINISH), Z_STREAM_END);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

class CsvTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ds_csv_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { EXPECT_TRUE(RemoveTree(dir_).ok()); }

  std::string Write(const std::string& name, std::string_view content) {
    const std::string p = dir_ + "/" + name;
    EXPECT_TRUE(WriteFileAtomic(p, content).ok());
    return p;
  }

  // Reads every record; fails the test on error.
  Rows ReadAll(const std::string& path, CsvOptions opts = {},
               std::vector<std::string>* header = nullptr, std::vector<int64_t>* lines = nullptr) {
    Rows rows;
    auto r = CsvReader::Open(path, opts);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) return rows;
    if (header) *header = (*r)->header();
    std::vector<std::string> f;
    for (;;) {
      auto more = (*r)->Next(&f);
      EXPECT_TRUE(more.ok()) << more.status().message();
      if (!more.ok() || !*more) break;
      rows.push_back(f);
      if (lines) lines->push_back((*r)->record_line());
    }
    EXPECT_EQ((*r)->records_read(), static_cast<int64_t>(rows.size()));
    return rows;
  }

  // Reads until an error and returns it (OK status if the file reads cleanly).
  Status ReadError(const std::string& path, CsvOptions opts = {}) {
    auto r = CsvReader::Open(path, opts);
    if (!r.ok()) return r.status();
    std::vector<std::string> f;
    for (;;) {
      auto more = (*r)->Next(&f);
      if (!more.ok()) {
        // Errors are sticky.
        auto again = (*r)->Next(&f);
        EXPECT_FALSE(again.ok());
        if (!again.ok()) {
          EXPECT_EQ(again.status().message(), more.status().message());
        }
        return more.status();
      }
      if (!*more) return Status::Ok();
    }
  }

  std::string dir_;
};

void ExpectMessage(const Status& s, Code code, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), code) << s.message();
  for (const auto& p : parts) {
    EXPECT_NE(s.message().find(p), std::string::npos)
        << "message '" << s.message() << "' lacks '" << p << "'";
  }
}

// ---------------------------------------------------------------- RFC 4180 cases

TEST_F(CsvTest, SimpleFileWithHeader) {
  std::vector<std::string> h;
  std::vector<int64_t> lines;
  Rows rows = ReadAll(Write("s.csv", "a,b,c\n1,2,3\n4,5,6\n"), {}, &h, &lines);
  EXPECT_EQ(h, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(rows, (Rows{{"1", "2", "3"}, {"4", "5", "6"}}));
  EXPECT_EQ(lines, (std::vector<int64_t>{2, 3}));
}

TEST_F(CsvTest, FixtureWithBomCrlfQuotesAndMultilineFields) {
  std::vector<std::string> h;
  std::vector<int64_t> lines;
  Rows rows = ReadAll(std::string(DS_TEST_DATA) + "/csv/rfc4180.csv", {}, &h, &lines);
  EXPECT_EQ(h, (std::vector<std::string>{"id", "name", "note"}));  // BOM dropped
  EXPECT_EQ(rows, (Rows{{"1", "Smith, John", "said \"hi\""},
                        {"2", "multi\r\nline", ""},
                        {"3", "", "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC"},
                        {"4", "plain", "last, no newline"}}));
  // Record 2 spans lines 3-4, line 5 is blank.
  EXPECT_EQ(lines, (std::vector<int64_t>{2, 3, 6, 7}));
}

TEST_F(CsvTest, QuotedDelimiterDoubledQuotesAndNewlines) {
  Rows rows = ReadAll(Write("q.csv",
                            "a,b\n\"x,y\",\"he said \"\"hi\"\"\"\n"
                            "\"line1\nline2\",\"cr\r\nlf\"\n\"\"\"\",\"\"\n"));
  EXPECT_EQ(rows, (Rows{{"x,y", "he said \"hi\""}, {"line1\nline2", "cr\r\nlf"}, {"\"", ""}}));
}

TEST_F(CsvTest, CrlfLfAndBareCrLineEnds) {
  EXPECT_EQ(ReadAll(Write("crlf.csv", "a,b\r\n1,2\r\n3,4\r\n")), (Rows{{"1", "2"}, {"3", "4"}}));
  EXPECT_EQ(ReadAll(Write("mixed.csv", "a,b\n1,2\r\n3,4\n")), (Rows{{"1", "2"}, {"3", "4"}}));
  std::vector<int64_t> lines;
  EXPECT_EQ(ReadAll(Write("cr.csv", "a,b\r1,2\r3,4\r"), {}, nullptr, &lines),
            (Rows{{"1", "2"}, {"3", "4"}}));
  EXPECT_EQ(lines, (std::vector<int64_t>{2, 3}));
}

TEST_F(CsvTest, EmptyFieldsAndTrailingDelimiter) {
  EXPECT_EQ(ReadAll(Write("e.csv", "a,b,c\n,,\n1,,\n,,3\n\"\",\"\",\"\"\n")),
            (Rows{{"", "", ""}, {"1", "", ""}, {"", "", "3"}, {"", "", ""}}));
  // Input ending right after a delimiter: the last field is empty.
  EXPECT_EQ(ReadAll(Write("t.csv", "a,b\n1,")), (Rows{{"1", ""}}));
}

TEST_F(CsvTest, FinalLineWithoutNewline) {
  EXPECT_EQ(ReadAll(Write("n1.csv", "a,b\n1,2")), (Rows{{"1", "2"}}));
  EXPECT_EQ(ReadAll(Write("n2.csv", "a,b\n\"1\",\"2\"")), (Rows{{"1", "2"}}));
  EXPECT_EQ(ReadAll(Write("n3.csv", "a,b\r\n1,2\r")), (Rows{{"1", "2"}}));
}

TEST_F(CsvTest, BlankLinesAreSkippedWithCorrectLineNumbers) {
  std::vector<int64_t> lines;
  Rows rows = ReadAll(Write("b.csv", "\n\na,b\n\n1,2\n\r\n\n3,4\n\n"), {}, nullptr, &lines);
  EXPECT_EQ(rows, (Rows{{"1", "2"}, {"3", "4"}}));
  EXPECT_EQ(lines, (std::vector<int64_t>{5, 8}));
  // One quoted empty field is a record, not a blank line.
  EXPECT_EQ(ReadAll(Write("one.csv", "x\n\"\"\n\nv\n")), (Rows{{""}, {"v"}}));
}

TEST_F(CsvTest, LenientQuoteInsideUnquotedField) {
  EXPECT_EQ(ReadAll(Write("l.csv", "h,w\n5'10\",ab\"c\"\n")), (Rows{{"5'10\"", "ab\"c\""}}));
}

TEST_F(CsvTest, RaggedRowsAreReturnedAsFound) {
  auto r = CsvReader::Open(Write("r.csv", "a,b,c\n1,2\n1,2,3,4\n5\n")).ValueOrThrow();
  EXPECT_EQ(r->num_columns(), 3u);
  std::vector<std::string> f;
  std::vector<size_t> counts;
  while (r->Next(&f).value()) counts.push_back(f.size());
  EXPECT_EQ(counts, (std::vector<size_t>{2, 4, 1}));
}

TEST_F(CsvTest, NoHeaderAndTabDelimiter) {
  CsvOptions opts;
  opts.has_header = false;
  std::vector<std::string> h;
  EXPECT_EQ(ReadAll(Write("nh.csv", "1,2\n3,4\n"), opts, &h), (Rows{{"1", "2"}, {"3", "4"}}));
  EXPECT_TRUE(h.empty());
  opts.has_header = true;
  opts.delimiter = '\t';
  EXPECT_EQ(ReadAll(std::string(DS_TEST_DATA) + "/csv/tabs.tsv", opts, &h),
            (Rows{{"x\ty", "5'10\""}}));
  EXPECT_EQ(h, (std::vector<std::string>{"a", "b"}));
  // Commas are data with a tab delimiter.
  EXPECT_EQ(ReadAll(Write("t.tsv", "a\tb\n1,5\t\"q\"\n"), opts), (Rows{{"1,5", "q"}}));
}

TEST_F(CsvTest, EmptyFileAndRequireHeader) {
  for (const char* content : {"", "\n\n\r\n", "\xEF\xBB\xBF"}) {
    const std::string p = Write("empty.csv", content);
    auto r = CsvReader::Open(p).ValueOrThrow();
    EXPECT_TRUE(r->header().empty());
    std::vector<std::string> f;
    EXPECT_FALSE(r->Next(&f).value());
    ExpectMessage(r->RequireHeader(), Code::kInvalidInput,
                  {"empty.csv: empty file (no header row)"});
  }
  auto r = CsvReader::Open(Write("ok.csv", "a\n")).ValueOrThrow();
  EXPECT_TRUE(r->RequireHeader().ok());
}

TEST_F(CsvTest, ValidateHeader) {
  EXPECT_TRUE(ValidateHeader({"a", "b", "c"}, "f.csv").ok());
  ExpectMessage(ValidateHeader({"a", "x", "b", "c", "x"}, "f.csv"), Code::kInvalidInput,
                {"f.csv", "duplicate column name 'x' (columns 2 and 5)"});
  ExpectMessage(ValidateHeader({"a", "b", ""}, "f.csv"), Code::kInvalidInput,
                {"f.csv", "column 3 has an empty name"});
  ExpectMessage(ValidateHeader({}, "f.csv"), Code::kInvalidInput, {"f.csv: empty file"});
}

TEST_F(CsvTest, ParseDelimiter) {
  EXPECT_EQ(ParseDelimiter(",").value(), ',');
  EXPECT_EQ(ParseDelimiter("\t").value(), '\t');
  EXPECT_EQ(ParseDelimiter("\\t").value(), '\t');
  EXPECT_EQ(ParseDelimiter("tab").value(), '\t');
  EXPECT_EQ(ParseDelimiter("TAB").value(), '\t');
  EXPECT_EQ(ParseDelimiter("|").value(), '|');
  EXPECT_EQ(ParseDelimiter(";").value(), ';');
  EXPECT_EQ(ParseDelimiter("semicolon").value(), ';');
  EXPECT_EQ(ParseDelimiter("pipe").value(), '|');
  EXPECT_EQ(ParseDelimiter("space").value(), ' ');
  for (std::string bad : std::vector<std::string>{"", "\"", "\n", "\r", std::string(1, '\0'), ",,",
                                                  "\xC3\xA9", "xyz"}) {
    auto r = ParseDelimiter(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  }
  CsvOptions opts;
  opts.delimiter = '"';
  EXPECT_EQ(CsvReader::Open(Write("d.csv", "a\n"), opts).status().code(), Code::kInvalidArgument);
}

TEST_F(CsvTest, SniffDelimiterKeepsTheNameUnlessTheLinesSayOtherwise) {
  // A European export: ';' between fields, ',' as the decimal mark.
  EXPECT_EQ(SniffDelimiterOf("\xEF\xBB\xBF\"a\";\"b\";c\r\n1;2,5;x\r\n3;4,0;y\r\n", ','), ';');
  // Commas that split every line consistently win even with ';' inside fields.
  EXPECT_EQ(SniffDelimiterOf("a,b,c\n1;2,x;y,3\n4,5,z\n", ','), ',');
  // Quoted fields may hold the other candidates and newlines.
  EXPECT_EQ(SniffDelimiterOf("a;b\n\"x,y,z\";1\n\"p,\nq\";2\n", ','), ';');
  EXPECT_EQ(SniffDelimiterOf("a;b\n\"say \"\"x;y\"\"\";1\n2;3\n", ','), ';');  // doubled quotes
  // A quote inside an unquoted field is a literal (as the reader takes it), not an opening.
  // (read as openings, the two quotes below would merge rows 1-2 and ';' would not fit)
  EXPECT_EQ(SniffDelimiterOf("in;name;k\n5\";tv;1\n6;p\";2\n7;r;3\n8;t;4\n", ','), ';');
  EXPECT_EQ(SniffDelimiterOf("in;name;k\nab\"\"c;tv;1\n6;p\";2\n7;r;3\n8;t;4\n", ','), ';');
  EXPECT_EQ(SniffDelimiterOf("a\tb\tc\n1\t2\t3\n", ','), '\t');
  EXPECT_EQ(SniffDelimiterOf("a|b\n1|2\n", ','), '|');
  // One column, or no candidate that fits: the file name's choice stands.
  EXPECT_EQ(SniffDelimiterOf("value\n1\n2\n", ','), ',');
  EXPECT_EQ(SniffDelimiterOf("a;b\n1\n2\n3;4;5\n", ','), ',');  // ';' fits 0 of 3 rows
  EXPECT_EQ(SniffDelimiterOf("", '\t'), '\t');
  // A header alone is enough.
  EXPECT_EQ(SniffDelimiterOf("a;b;c", ','), ';');
  // Ragged tails below 10% do not change the choice.
  std::string many = "a;b\n";
  for (int i = 0; i < 30; ++i) many += "1;2\n";
  many += "oops\n";
  EXPECT_EQ(SniffDelimiterOf(many, ','), ';');
}

TEST_F(CsvTest, SniffDelimiterReadsFilesAndGzip) {
  EXPECT_EQ(SniffDelimiter(Write("eu.csv", "x;y\n1,5;2\n"), ','), ';');
  EXPECT_EQ(SniffDelimiter(Write("eu.csv.gz", Gzip("x;y\n1,5;2\n")), ','), ';');
  EXPECT_EQ(SniffDelimiter(Write("us.csv", "x,y\n1.5,2\n"), ','), ',');
  EXPECT_EQ(SniffDelimiter(dir_ + "/missing.csv", ','), ',');  // the reader reports it
  // Only the head is read: a record cut at 64 KiB is not counted against ';'.
  std::string big = "a;b\n";
  while (big.size() < (size_t{64} << 10) + 100) big += "1;\"a long, quoted, field\"\n";
  EXPECT_EQ(SniffDelimiter(Write("big.csv", big), ','), ';');
  EXPECT_EQ(DelimiterName('\t'), "tab");
  EXPECT_EQ(DelimiterName(';'), "';'");
  EXPECT_EQ(DelimiterName('\x01'), "byte 0x01");
}

// ---------------------------------------------------------------- errors

TEST_F(CsvTest, UnbalancedQuoteReportsStartLine) {
  Status s = ReadError(Write("bad.csv", "a,b\n1,2\n3,\"abc\n4,5\n6,7\n"));
  ExpectMessage(s, Code::kInvalidInput, {"bad.csv:3:", "field 2 'b'", "unbalanced quote"});
}

TEST_F(CsvTest, CharacterAfterClosingQuote) {
  Status s = ReadError(Write("bad.csv", "a,b\n1,2\n\"x\"y,3\n"));
  ExpectMessage(s, Code::kInvalidInput, {"bad.csv:3:", "field 1 'a'", "'y'", "closing quote"});
  s = ReadError(Write("bad2.csv", "a,b\n1,\"he said \"hi\"\"\n"));
  ExpectMessage(s, Code::kInvalidInput, {"bad2.csv:2:", "field 2 'b'", "must be doubled"});
}

TEST_F(CsvTest, InvalidUtf8NamesFieldAndColumn) {
  Status s = ReadError(Write("u.csv", "id,name\n1,ok\n2,caf\xC3\n"));
  ExpectMessage(s, Code::kInvalidInput, {"u.csv:3:", "field 2 'name'", "invalid UTF-8", "byte 3"});
  s = ReadError(Write("u2.csv", "id,name\n1,\"multi\nline \xED\xA0\x80\"\n"));  // surrogate
  ExpectMessage(s, Code::kInvalidInput, {"u2.csv:2:", "field 2 'name'", "invalid UTF-8"});
  s = ReadError(Write("u3.csv", "id,n\xC0\x80me\n1,2\n"));  // overlong in the header
  ExpectMessage(s, Code::kInvalidInput, {"u3.csv:1:", "field 2", "invalid UTF-8"});
  // Latin-1 text: the byte and how to convert the file.
  s = ReadError(Write("l1.csv", "id,city\n1,K\xF6ln\n"));
  ExpectMessage(s, Code::kInvalidInput,
                {"l1.csv:2:", "field 2 'city'", "byte 1 of the field (byte 0xf6:", "iconv -f cp1252"});
}

TEST_F(CsvTest, NulBytesRejected) {
  Status s = ReadError(Write("z.csv", std::string("a,b\n1,2\n3,x\0y\n", 14)));
  ExpectMessage(s, Code::kInvalidInput, {"z.csv:3:", "field 2 'b'", "NUL byte", "binary"});
  s = ReadError(Write("zq.csv", std::string("a,b\n1,\"two\nx\0\"\n", 16)));
  ExpectMessage(s, Code::kInvalidInput, {"zq.csv:3:", "field 2 'b'", "NUL byte"});
  s = ReadError(Write("za.csv", std::string("a,b\n\"1\"\0,2\n", 11)));
  ExpectMessage(s, Code::kInvalidInput, {"za.csv:2:", "field 1 'a'", "NUL byte"});
}

TEST_F(CsvTest, FieldTooLong) {
  CsvOptions opts;
  opts.max_field_bytes = 10;
  EXPECT_TRUE(ReadError(Write("ok.csv", "a,b\n1234567890,\"1234567890\"\n"), opts).ok());
  Status s = ReadError(Write("long.csv", "a,b\n1,2\n3,12345678901\n"), opts);
  ExpectMessage(s, Code::kInvalidInput, {"long.csv:3:", "field 2 'b'", "longer than 10 bytes"});
  s = ReadError(Write("longq.csv", "a,b\n\"12345\n\"\"7890x\",2\n"), opts);
  ExpectMessage(s, Code::kInvalidInput, {"longq.csv:2:", "field 1 'a'", "longer than 10 bytes"});
  opts.buffer_bytes = 4;  // the limit is enforced across chunk boundaries too
  s = ReadError(Write("long4.csv", "a,b\n1," + std::string(100, 'x') + "\n"), opts);
  ExpectMessage(s, Code::kInvalidInput, {"long4.csv:2:", "field 2 'b'", "longer than 10 bytes"});
}

TEST_F(CsvTest, TooManyFields) {
  CsvOptions opts;
  opts.max_fields = 3;
  EXPECT_TRUE(ReadError(Write("ok.csv", "a,b,c\n1,2,3\n"), opts).ok());
  Status s = ReadError(Write("wide.csv", "a,b,c\n1,2,3\n1,2,3,4\n"), opts);
  ExpectMessage(s, Code::kInvalidInput, {"wide.csv:3:", "more than 3 fields"});
  s = ReadError(Write("wide2.csv", "a,b,c\n1,2,3,\n"), opts);  // trailing empty field counts
  ExpectMessage(s, Code::kInvalidInput, {"wide2.csv:2:", "more than 3 fields"});
}

TEST_F(CsvTest, MissingFileAndDirectory) {
  auto r = CsvReader::Open(dir_ + "/missing.csv");
  ExpectMessage(r.status(), Code::kNotFound, {"missing.csv"});
  auto d = CsvReader::Open(dir_);
  ExpectMessage(d.status(), Code::kIo, {dir_, "directory"});
}

// ---------------------------------------------------------------- writer

TEST_F(CsvTest, WriterQuotesMinimally) {
  EXPECT_EQ(CsvEscapeField("plain", ','), "plain");
  EXPECT_EQ(CsvEscapeField(" spaced ", ','), " spaced ");
  EXPECT_EQ(CsvEscapeField("", ','), "");
  EXPECT_EQ(CsvEscapeField("a,b", ','), "\"a,b\"");
  EXPECT_EQ(CsvEscapeField("a,b", '\t'), "a,b");
  EXPECT_EQ(CsvEscapeField("a\tb", '\t'), "\"a\tb\"");
  EXPECT_EQ(CsvEscapeField("say \"hi\"", ','), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvEscapeField("l1\nl2", ','), "\"l1\nl2\"");
  EXPECT_EQ(CsvEscapeField("cr\r", ','), "\"cr\r\"");
  std::string out;
  AppendCsvRecord(&out, std::vector<std::string>{"a", "b c", "", "d,e"}, ',');
  AppendCsvRecord(&out, std::vector<std::string>{""}, ',');
  AppendCsvRecord(&out, std::vector<std::string_view>{"x", "y"}, '|');
  EXPECT_EQ(out, "a,b c,,\"d,e\"\n\"\"\nx|y\n");
}

std::string RandomField(Philox* rng) {
  static const std::vector<std::string> atoms = {
      "a", "b",  "Z",           "0",  "9",  " ",    ",",        "\t",           ";",
      "|", "\"", "\"\"",        "\n", "\r", "\r\n", "\xC3\xA9", "\xE6\x97\xA5", "\xF0\x9F\x98\x80",
      "'", "\\", "\xEF\xBB\xBF"};
  std::string f;
  const uint64_t len = rng->Below(4) == 0 ? 0 : rng->Below(12);
  for (uint64_t i = 0; i < len; ++i) f += atoms[rng->Below(atoms.size())];
  return f;
}

TEST_F(CsvTest, RandomRoundTripAcrossBufferSizes) {
  const char delims[] = {',', '\t', ';', '|', ' '};
  for (int trial = 0; trial < 10; ++trial) {
    Philox rng(1234, trial);
    const char d = delims[trial % 5];
    Rows rows;
    std::string text;
    for (int r = 0; r < 150; ++r) {
      std::vector<std::string> rec(1 + rng.Below(6));
      for (auto& f : rec) f = RandomField(&rng);
      AppendCsvRecord(&text, rec, d);
      rows.push_back(rec);
    }
    std::string content = text;
    if (trial % 2) {  // CRLF record terminators must read the same
      content.clear();
      // Re-encode with CRLF: write each record and replace its final "\n".
      for (const auto& rec : rows) {
        std::string one;
        AppendCsvRecord(&one, rec, d);
        one.pop_back();
        content += one + "\r\n";
      }
    }
    const std::string p = Write("rt.csv", content);
    for (size_t buf : {size_t{4}, size_t{5}, size_t{7}, size_t{64}, size_t{1} << 20}) {
      CsvOptions opts;
      opts.delimiter = d;
      opts.has_header = false;
      opts.buffer_bytes = buf;
      ASSERT_EQ(ReadAll(p, opts), rows) << "trial " << trial << " buffer " << buf;
    }
    const std::string gz = Write("rt.csv.gz", Gzip(content));
    CsvOptions opts;
    opts.delimiter = d;
    opts.has_header = false;
    ASSERT_EQ(ReadAll(gz, opts), rows) << "gzip trial " << trial;
  }
}

// Arbitrary byte soup (quotes, delimiters, CR/LF, NUL, UTF-8 pieces, invalid bytes):
// whatever the outcome (records or an error), it must not depend on the buffer size, and
// an error must name the file and a line.
TEST_F(CsvTest, ByteSoupResultIndependentOfBufferSize) {
  const std::vector<std::string> atoms = {"a",        ",",           "\"",   "\"\"",
                                          "\n",       "\r",          "\r\n", " ",
                                          "\xC3\xA9", "\xE6\x97",    "\xFF", std::string(1, '\0'),
                                          "xyz",      "\xEF\xBB\xBF"};
  int errors = 0, clean = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Philox rng(77, trial);
    std::string content;
    const uint64_t n = rng.Below(60);
    for (uint64_t i = 0; i < n; ++i) {
      // Mostly harmless atoms so that a fair share of files parse cleanly.
      const uint64_t k = rng.Below(100) < 97 ? rng.Below(9) : rng.Below(atoms.size());
      content += atoms[k];
    }
    const std::string p = Write("soup.csv", content);
    std::string reference;
    for (size_t buf : {size_t{1} << 20, size_t{4}, size_t{5}, size_t{6}, size_t{11}}) {
      CsvOptions opts;
      opts.buffer_bytes = buf;
      opts.has_header = trial % 2;
      std::string got;
      auto r = CsvReader::Open(p, opts);
      if (!r.ok()) {
        got = "ERR " + r.status().message();
      } else {
        for (const auto& h : (*r)->header()) got += "[" + h + "]";
        got += "\n";
        std::vector<std::string> f;
        for (;;) {
          auto more = (*r)->Next(&f);
          if (!more.ok()) {
            got += "ERR " + more.status().message();
            break;
          }
          if (!*more) break;
          got += std::to_string((*r)->record_line()) + ":";
          for (const auto& x : f) got += "[" + x + "]";
          got += "\n";
        }
      }
      if (buf == (size_t{1} << 20)) {
        reference = got;
        const size_t e = got.find("ERR ");
        if (e != std::string::npos) {
          ++errors;
          EXPECT_NE(got.find("soup.csv:", e), std::string::npos) << got;
        } else {
          ++clean;
        }
      } else {
        ASSERT_EQ(got, reference) << "trial " << trial << " buffer " << buf << " input "
                                  << testing::PrintToString(content);
      }
    }
  }
  EXPECT_GT(errors, 20);
  EXPECT_GT(clean, 20);
}

// A record spanning the 1 MiB read boundary, with the interesting byte (quote, doubled
// quote, CR of a CRLF, delimiter) placed at each offset around the boundary.
TEST_F(CsvTest, RecordsAcrossTheOneMiBBoundary) {
  const size_t kB = InputStream::kDefaultChunk;
  for (const std::string special : {"\"\"", "\r\n", ",", "\"x\""}) {
    for (int delta = -3; delta <= 2; ++delta) {
      std::string content = "a,b\n";
      const std::string filler_row = "0123456789,abcdefghij\n";
      while (content.size() + filler_row.size() + 40 < kB) content += filler_row;
      // Pad so that `special` starts at kB + delta.
      std::string rec = "\"";
      const size_t target = kB + delta;
      rec += std::string(target - content.size() - rec.size(), 'p');
      std::string field = rec.substr(1);
      rec += special;
      field += special == "\"\"" ? "\"" : special == "\"x\"" ? "\"x\"" : special;
      if (special == "\"x\"") {  // a doubled-quote-free variant: x quoted with doubles
        rec = rec.substr(0, rec.size() - 3) + "\"\"x\"\"";
      }
      rec += "tail\",2\r\n";
      field += "tail";
      content += rec + "3,4";
      const std::string p = Write("big.csv", content);
      std::vector<int64_t> lines;
      Rows rows = ReadAll(p, {}, nullptr, &lines);
      const size_t n_filler = (rows.size() >= 2) ? rows.size() - 2 : 0;
      ASSERT_EQ(rows.size(), n_filler + 2);
      EXPECT_EQ(rows[n_filler], (std::vector<std::string>{field, "2"}))
          << "special " << testing::PrintToString(special) << " delta " << delta;
      EXPECT_EQ(rows.back(), (std::vector<std::string>{"3", "4"}));
      EXPECT_EQ(lines.back(), lines[n_filler] + 1 + (special == "\r\n" ? 1 : 0));
    }
  }
  // CRLF record end split by the boundary: CR is the last byte of the first chunk.
  std::string content = "a,b\n";
  while (content.size() < kB - 4) content += "x,y\n";
  content.resize(kB - 4);
  content[kB - 5] = '\n';
  content += "1,2\r\n3,4\n";
  ASSERT_EQ(content[kB - 1], '\r');
  std::vector<int64_t> lines;
  Rows rows = ReadAll(Write("crlf.csv", content), {}, nullptr, &lines);
  ASSERT_GE(rows.size(), 2u);
  EXPECT_EQ(rows[rows.size() - 2], (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(rows.back(), (std::vector<std::string>{"3", "4"}));
  EXPECT_EQ(lines.back(), lines[lines.size() - 2] + 1);  // no phantom line
}

// ---------------------------------------------------------------- gzip / stdin

TEST_F(CsvTest, GzipRoundTripAndMultiMember) {
  const std::string text = "a,b\n1,\"x\ny\"\n2,3\n";
  EXPECT_EQ(ReadAll(Write("g.csv.gz", Gzip(text))), (Rows{{"1", "x\ny"}, {"2", "3"}}));
  // Detection is by content, not by name.
  EXPECT_EQ(ReadAll(Write("g_noext.csv", Gzip(text))), (Rows{{"1", "x\ny"}, {"2", "3"}}));
  // Concatenated members decode as one stream.
  EXPECT_EQ(ReadAll(Write("m.csv.gz", Gzip("a,b\n1,2\n") + Gzip("3,4\n") + Gzip(""))),
            (Rows{{"1", "2"}, {"3", "4"}}));
  auto in = InputStream::Open(dir_ + "/g.csv.gz").ValueOrThrow();
  EXPECT_TRUE(in->is_gzip());
  EXPECT_EQ(ReadAllInput(dir_ + "/g.csv.gz").value(), text);
}

TEST_F(CsvTest, TruncatedGzipIsAnErrorNotEof) {
  std::string big = "a,b\n";
  for (int i = 0; i < 20000; ++i) big += std::to_string(i) + ",v" + std::to_string(i * 7) + "\n";
  const std::string gz = Gzip(big);
  // Cut in the middle of the data, in the trailer, and inside the gzip header.
  for (size_t keep : {gz.size() / 2, gz.size() - 4, gz.size() - 1, size_t{5}}) {
    const std::string p = Write("file.csv.gz", gz.substr(0, keep));
    Status s = ReadError(p);
    ExpectMessage(s, Code::kInvalidInput, {"file.csv.gz: truncated gzip stream"});
    auto all = ReadAllInput(p);
    ExpectMessage(all.status(), Code::kInvalidInput, {"file.csv.gz: truncated gzip stream"});
  }
}

TEST_F(CsvTest, CorruptGzipAndTrailingGarbage) {
  std::string gz = Gzip("a,b\n1,2\n3,4\n");
  std::string bad = gz;
  bad[bad.size() - 6] ^= 0x55;  // CRC mismatch
  ExpectMessage(ReadError(Write("c.csv.gz", bad)), Code::kInvalidInput,
                {"c.csv.gz: corrupt gzip stream"});
  ExpectMessage(ReadError(Write("t.csv.gz", gz + "junk")), Code::kInvalidInput,
                {"t.csv.gz: trailing garbage"});
}

TEST_F(CsvTest, StdinDash) {
  const std::string p = Write("in.csv", Gzip("a,b\n1,2\n"));
  const int saved = ::dup(0);
  const int fd = ::open(p.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ::dup2(fd, 0);
  ::close(fd);
  std::vector<std::string> h;
  Rows rows;
  {
    auto r = CsvReader::Open("-").ValueOrThrow();
    EXPECT_EQ(r->path(), "<stdin>");
    h = r->header();
    std::vector<std::string> f;
    while (r->Next(&f).value()) rows.push_back(f);
  }
  ::dup2(saved, 0);
  ::close(saved);
  EXPECT_EQ(h, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(rows, (Rows{{"1", "2"}}));
}

// ---------------------------------------------------------------- LineReader

std::vector<std::string> ReadLines(const std::string& path, LineOptions opts = {}) {
  std::vector<std::string> out;
  auto r = LineReader::Open(path, opts);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return out;
  std::string line;
  for (;;) {
    auto more = (*r)->Next(&line);
    EXPECT_TRUE(more.ok()) << more.status().message();
    if (!more.ok() || !*more) break;
    out.push_back(line);
    EXPECT_EQ((*r)->line(), static_cast<int64_t>(out.size()));
  }
  return out;
}

Status LineError(const std::string& path) {
  auto r = LineReader::Open(path);
  if (!r.ok()) return r.status();
  std::string line;
  for (;;) {
    auto more = (*r)->Next(&line);
    if (!more.ok()) return more.status();
    if (!*more) return Status::Ok();
  }
}

TEST_F(CsvTest, LineReaderEndingsBomAndEmptyLines) {
  using V = std::vector<std::string>;
  EXPECT_EQ(ReadLines(Write("a.txt", "")), V{});
  EXPECT_EQ(ReadLines(Write("b.txt", "\n")), V{""});
  EXPECT_EQ(ReadLines(Write("c.txt", "one\ntwo")), (V{"one", "two"}));
  EXPECT_EQ(ReadLines(Write("d.txt", "one\r\n\r\ntwo\r\n")), (V{"one", "", "two"}));
  EXPECT_EQ(ReadLines(Write("e.txt", "\xEF\xBB\xBFhi\nx\ry\n\n")), (V{"hi", "x\ry", ""}));
  EXPECT_EQ(ReadLines(Write("f.txt", Gzip("g\xC3\xA9z\nline2\n"))), (V{"g\xC3\xA9z", "line2"}));
}

TEST_F(CsvTest, LineReaderSmallBuffersMatch) {
  std::string text;
  std::vector<std::string> expect;
  Philox rng(9, 9);
  for (int i = 0; i < 300; ++i) {
    std::string l;
    const uint64_t n = rng.Below(20);
    for (uint64_t k = 0; k < n; ++k) l += rng.Below(5) ? "w" : "\xE6\x97\xA5";
    expect.push_back(l);
    text += l + (rng.Below(2) ? "\r\n" : "\n");
  }
  const std::string p = Write("lines.txt", text);
  for (size_t buf : {size_t{4}, size_t{5}, size_t{13}, size_t{1} << 20}) {
    LineOptions opts;
    opts.buffer_bytes = buf;
    EXPECT_EQ(ReadLines(p, opts), expect) << buf;
  }
}

TEST_F(CsvTest, LineReaderErrors) {
  ExpectMessage(LineError(Write("bin.txt", std::string("ok\nfine\nab\0cd\n", 14))),
                Code::kInvalidInput, {"bin.txt:3:", "NUL byte", "byte 2", "binary file?"});
  ExpectMessage(LineError(Write("u.txt", "ok\nab\xE2\x82z\n")), Code::kInvalidInput,
                {"u.txt:2:", "invalid UTF-8", "byte 2"});
  auto r = LineReader::Open(Write("long.txt", "short\n" + std::string(100, 'x') + "\n"),
                            LineOptions{.max_line_bytes = 50, .buffer_bytes = 16})
               .ValueOrThrow();
  std::string line;
  EXPECT_TRUE(r->Next(&line).value());
  ExpectMessage(r->Next(&line).status(), Code::kInvalidInput, {"long.txt:2:", "longer than 50"});
  ExpectMessage(LineError(Write("t.txt.gz", Gzip("abc\n").substr(0, 12))), Code::kInvalidInput,
                {"t.txt.gz: truncated gzip stream"});
  ExpectMessage(LineReader::Open(dir_ + "/nope.txt").status(), Code::kNotFound, {"nope.txt"});
}

// ---------------------------------------------------------------- bundled datasets

// Real tables shipped in tests/data/datasets (samples of public datasets, see
// its README): every record has the header's field count.
TEST(CsvDatasets, EveryDatasetParsesWithConsistentFieldCounts) {
  const std::string dir = std::string(DS_TEST_DATA) + "/datasets";
  DIR* h = opendir(dir.c_str());
  ASSERT_NE(h, nullptr) << dir;
  std::vector<std::string> files;
  while (dirent* e = readdir(h)) {
    std::string n = e->d_name;
    if (n.size() > 4 && (n.ends_with(".csv") || n.ends_with(".csv.gz"))) files.push_back(n);
  }
  closedir(h);
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"ames_600.csv.gz", "lending_club_400.csv.gz",
                                             "penguins.csv", "santander.csv.gz"}));
  // name -> records, columns
  const std::map<std::string, std::pair<int64_t, size_t>> shape = {
      {"ames_600.csv.gz", {600, 74}},
      {"lending_club_400.csv.gz", {400, 23}},
      {"penguins.csv", {344, 8}},
      {"santander.csv.gz", {100, 202}}};
  for (const auto& name : files) {
    SCOPED_TRACE(name);
    auto r = CsvReader::Open(dir + "/" + name).ValueOrThrow();
    ASSERT_TRUE(r->RequireHeader().ok());
    ASSERT_TRUE(ValidateHeader(r->header(), r->path()).ok());
    std::vector<std::string> f;
    for (;;) {
      auto more = r->Next(&f);
      ASSERT_TRUE(more.ok()) << more.status().message();
      if (!*more) break;
      ASSERT_EQ(f.size(), r->num_columns()) << "line " << r->record_line();
    }
    auto it = shape.find(name);
    ASSERT_NE(it, shape.end());
    EXPECT_EQ(r->records_read(), it->second.first);
    EXPECT_EQ(r->num_columns(), it->second.second);
  }
  // Text datasets through LineReader (gzip read directly).
  auto lines = LineReader::Open(dir + "/harvard_sentences.txt.gz").ValueOrThrow();
  std::string line;
  while (lines->Next(&line).value()) {
  }
  EXPECT_EQ(lines->line(), 720);
}


// ---- what may be an input (issue #13 item 4) ----

TEST(InputKinds, BinarySampleDetection) {
  EXPECT_TRUE(CheckTextSample("", "f").ok());
  EXPECT_TRUE(CheckTextSample(std::string(10, '\0'), "f").ok());  // short: the readers decide
  std::string text;
  for (int i = 0; i < 100; ++i) text += "Zürich,42,\t\"quoted\"\r\n";
  EXPECT_TRUE(CheckTextSample(text, "f").ok());
  std::string one_nul = text;
  one_nul[50] = '\0';  // a stray byte: left to the readers, which name its line
  EXPECT_TRUE(CheckTextSample(one_nul, "f").ok());
  std::string small = text.substr(0, 80);
  small[70] = '\0';
  EXPECT_TRUE(CheckTextSample(small, "f").ok());
  Status zeros = CheckTextSample(std::string(4096, '\0'), "zero.bin");
  EXPECT_EQ(zeros.code(), Code::kInvalidInput);
  EXPECT_NE(zeros.message().find("zero.bin: binary data, not text"), std::string::npos);
  std::string random(1 << 16, ' ');
  Philox rng(3, 0);
  for (char& c : random) c = char(rng.Below(256));
  EXPECT_EQ(CheckTextSample(random, "r").code(), Code::kInvalidInput);
  std::string hive;  // \x01-delimited fields: control characters are not binary
  for (int i = 0; i < 100; ++i) hive += "a\x01" "b\x01" "c\n";
  EXPECT_TRUE(CheckTextSample(hive, "f").ok());
  std::string latin1;  // 10% invalid bytes: still text (the readers report the first)
  for (int i = 0; i < 100; ++i) latin1 += "Z\xfcrich,1\n";
  EXPECT_TRUE(CheckTextSample(latin1, "f").ok());
  EXPECT_NE(CheckTextSample("\xff\xfe" "a\0b\0", "u16").message().find("UTF-16"),
            std::string::npos);
}

TEST_F(CsvTest, BinaryInputFailsBeforeReadingOn) {
  std::string bin(3 << 20, '\0');
  auto r = CsvReader::Open(Write("big.bin", bin), CsvOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("big.bin: binary data"), std::string::npos);
  auto l = LineReader::Open(Write("big2.bin", bin));
  ASSERT_FALSE(l.ok());
  // Gzip of binary data: checked after decompression.
  EXPECT_FALSE(InputStream::Open(Write("bin.gz", Gzip(bin))).ok());
}

TEST(InputKinds, DevicesAreRefusedAtOnce) {
  for (const char* dev : {"/dev/zero", "/dev/urandom", "/dev/null"}) {
    auto in = InputStream::Open(dev);
    ASSERT_FALSE(in.ok()) << dev;
    EXPECT_EQ(in.status().code(), Code::kInvalidInput);
    EXPECT_NE(in.status().message().find("is a character device, not a file or a pipe"),
              std::string::npos);
  }
}

TEST(InputKinds, APipeIsReadOnceAndEveryOpenSeesTheSameBytes) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  const std::string data = "a,b\n1,2\n3,4\n";
  ASSERT_EQ(::write(p[1], data.data(), data.size()), ssize_t(data.size()));
  ::close(p[1]);
  const std::string path = "/dev/fd/" + std::to_string(p[0]);  // as <(...) gives
  for (int pass = 0; pass < 3; ++pass) {
    auto in = InputStream::Open(path, 16);
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    EXPECT_EQ((*in)->path(), path);
    std::string got(100, '\0');
    got.resize((*in)->ReadFull(got.data(), got.size()).value());
    EXPECT_EQ(got, data) << "pass " << pass;
  }
  ::close(p[0]);
  EXPECT_TRUE(InputExists("-"));
}

TEST_F(CsvTest, AFifoWithoutAWriterFailsAfterTheWait) {
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ::setenv("DATASYNTH_FIFO_WAIT_SECONDS", "0", 1);
  auto in = InputStream::Open(fifo);
  ::unsetenv("DATASYNTH_FIFO_WAIT_SECONDS");
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().code(), Code::kUnavailable);
  EXPECT_NE(in.status().message().find("a FIFO with no writer"), std::string::npos);
  // With a writer: read, and a second open reads the same copy (no second writer).
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(fifo.c_str(), O_WRONLY);
    const char msg[] = "x\ny\n";
    _exit(fd >= 0 && ::write(fd, msg, 4) == 4 ? 0 : 1);
  }
  for (int pass = 0; pass < 2; ++pass) {
    auto r = LineReader::Open(fifo);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::string line, all;
    while ((*r)->Next(&line).value()) all += line + "|";
    EXPECT_EQ(all, "x|y|");
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
}

}  // namespace
}  // namespace ds
