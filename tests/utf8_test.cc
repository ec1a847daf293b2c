#include "util/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace ds {
namespace {

// Reference: decodes one sequence the slow, obvious way and applies RFC 3629 rules.
bool RefValid(const unsigned char* s, size_t n) {
  size_t i = 0;
  while (i < n) {
    const unsigned c = s[i];
    size_t len;
    char32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    const char32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

std::string Bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

TEST(Utf8, ValidBoundaries) {
  for (char32_t cp : {0x0u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xD7FFu, 0xE000u, 0xFFFDu, 0xFFFFu,
                      0x10000u, 0x10FFFFu}) {
    std::string s;
    AppendCodePoint(&s, cp);
    EXPECT_TRUE(IsValidUtf8(s)) << std::hex << uint32_t(cp);
  }
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("h\xC3\xA9llo \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80"));
}

TEST(Utf8, RejectsOverlongSurrogatesAndTooLarge) {
  const std::string bad[] = {
      Bytes({0xC0, 0x80}),              // overlong NUL
      Bytes({0xC1, 0xBF}),              // overlong U+007F
      Bytes({0xE0, 0x80, 0x80}),        // overlong
      Bytes({0xE0, 0x9F, 0xBF}),        // overlong U+07FF
      Bytes({0xF0, 0x80, 0x80, 0x80}),  // overlong
      Bytes({0xF0, 0x8F, 0xBF, 0xBF}),  // overlong U+FFFF
      Bytes({0xED, 0xA0, 0x80}),        // U+D800
      Bytes({0xED, 0xBF, 0xBF}),        // U+DFFF
      Bytes({0xF4, 0x90, 0x80, 0x80}),  // U+110000
      Bytes({0xF5, 0x80, 0x80, 0x80}),  // lead byte out of range
      Bytes({0xFF}),
      Bytes({0x80}),        // lone continuation
      Bytes({0xE2, 0x82}),  // truncated
      Bytes({0xC3, 0x28}),  // bad continuation
  };
  for (const auto& s : bad) {
    size_t off = 99;
    EXPECT_FALSE(IsValidUtf8(s, &off)) << testing::PrintToString(s);
    EXPECT_EQ(off, 0u);
  }
}

TEST(Utf8, BadOffsetAfterAsciiFastPath) {
  // The fast path skips 16/8 bytes at a time; the offset must still be exact.
  for (size_t prefix = 0; prefix < 40; ++prefix) {
    std::string s(prefix, 'a');
    s += "\xC3\xA9";
    const size_t bad_at = s.size();
    s += "\xE2\x82";  // truncated euro sign
    s += "tail";
    size_t off = 0;
    EXPECT_FALSE(IsValidUtf8(s, &off));
    EXPECT_EQ(off, bad_at) << prefix;
  }
}

TEST(Utf8, ExhaustiveOneToThreeBytesMatchReference) {
  unsigned char b[3];
  for (int x = 0; x < 256; ++x) {
    b[0] = x;
    ASSERT_EQ(IsValidUtf8(std::string_view(reinterpret_cast<char*>(b), 1)), RefValid(b, 1)) << x;
    for (int y = 0; y < 256; ++y) {
      b[1] = y;
      ASSERT_EQ(IsValidUtf8(std::string_view(reinterpret_cast<char*>(b), 2)), RefValid(b, 2));
      for (int z = 0; z < 256; ++z) {
        b[2] = z;
        ASSERT_EQ(IsValidUtf8(std::string_view(reinterpret_cast<char*>(b), 3)), RefValid(b, 3))
            << x << " " << y << " " << z;
      }
    }
  }
}

TEST(Utf8, FourByteLeadsMatchReference) {
  unsigned char b[4];
  for (int w = 0xF0; w <= 0xF8; ++w) {
    for (int x = 0; x < 256; ++x) {
      for (int y = 0; y < 256; ++y) {
        for (int z : {0x7F, 0x80, 0xBF, 0xC0}) {
          b[0] = w;
          b[1] = x;
          b[2] = y;
          b[3] = z;
          ASSERT_EQ(IsValidUtf8(std::string_view(reinterpret_cast<char*>(b), 4)), RefValid(b, 4))
              << w << " " << x << " " << y << " " << z;
        }
      }
    }
  }
}

TEST(Utf8, EveryCodePointRoundTrips) {
  std::string all;
  size_t n = 0;
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string s;
    AppendCodePoint(&s, cp);
    const size_t expect_len = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    ASSERT_EQ(s.size(), expect_len);
    size_t pos = 0;
    char32_t got = 0;
    ASSERT_TRUE(NextCodePoint(s, &pos, &got));
    ASSERT_EQ(uint32_t(got), uint32_t(cp));
    ASSERT_EQ(pos, s.size());
    all += s;
    ++n;
  }
  EXPECT_TRUE(IsValidUtf8(all));
  EXPECT_EQ(CountCodePoints(all), n);
}

TEST(Utf8, AppendReplacesUnencodable) {
  std::string s;
  AppendCodePoint(&s, 0xD800);
  AppendCodePoint(&s, 0x110000);
  EXPECT_EQ(s, "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(Utf8, DecodeInvalidYieldsReplacementPerMaximalSubpart) {
  // 'a', E2 82 (truncated 3-byte: one subpart), 'z', F0 80 (F0 then bad 80: two), C0 (one)
  const std::string s = "a\xE2\x82z\xF0\x80\xC0";
  std::u32string got;
  size_t pos = 0;
  char32_t cp;
  while (NextCodePoint(s, &pos, &cp)) got.push_back(cp);
  EXPECT_EQ(got, (std::u32string{U'a', 0xFFFD, U'z', 0xFFFD, 0xFFFD, 0xFFFD}));
  EXPECT_EQ(CountCodePoints(s), got.size());
  EXPECT_FALSE(NextCodePoint(s, &pos, &cp));
  EXPECT_EQ(pos, s.size());
}

TEST(Utf8, IsAscii) {
  EXPECT_TRUE(IsAscii(""));
  for (size_t n = 1; n < 80; ++n) {
    std::string s(n, 'a');
    EXPECT_TRUE(IsAscii(s));
    for (size_t at = 0; at < n; ++at) {
      std::string t = s;
      t[at] = static_cast<char>(0x80);
      ASSERT_FALSE(IsAscii(t)) << n << " " << at;
    }
  }
}

TEST(Utf8, CountCodePoints) {
  EXPECT_EQ(CountCodePoints(""), 0u);
  EXPECT_EQ(CountCodePoints("hello"), 5u);
  EXPECT_EQ(CountCodePoints("h\xC3\xA9llo\xF0\x9F\x98\x80"), 6u);
  EXPECT_EQ(CountCodePoints(std::string(100, 'x') + "\xE6\x97\xA5"), 101u);
}

}  // namespace
}  // namespace ds
