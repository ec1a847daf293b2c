#include "util/utf8.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>

namespace ds {
namespace {

// Length of the well-formed sequence that starts at s[i] (1..4), or 0 if ill-formed;
// for an ill-formed sequence *subpart is the length of its maximal subpart (>= 1).
inline size_t SeqLen(const unsigned char* s, size_t n, size_t i, size_t* subpart) {
  const unsigned char c = s[i];
  if (c < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    *subpart = 1;
    return 0;
  }
  size_t k = 1;
  for (; k < len; ++k) {
    if (i + k >= n) break;
    const unsigned char b = s[i + k];
    const unsigned char l = (k == 1) ? lo : 0x80, h = (k == 1) ? hi : 0xBF;
    if (b < l || b > h) break;
  }
  if (k == len) return len;
  *subpart = k;
  return 0;
}

inline bool AllAscii8(const unsigned char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return (w & 0x8080808080808080ull) == 0;
}

}  // namespace

bool IsValidUtf8(std::string_view sv, size_t* bad_offset) {
  const auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  const size_t n = sv.size();
  size_t i = 0;
  while (i < n) {
    // ASCII fast path: 16 then 8 bytes at a time.
    while (i + 16 <= n && AllAscii8(s + i) && AllAscii8(s + i + 8)) i += 16;
    while (i + 8 <= n && AllAscii8(s + i)) i += 8;
    while (i < n && s[i] < 0x80) ++i;
    if (i >= n) break;
    size_t sub;
    const size_t len = SeqLen(s, n, i, &sub);
    if (len == 0) {
      if (bad_offset) *bad_offset = i;
      return false;
    }
    i += len;
  }
  return true;
}

bool IsAscii(std::string_view sv) {
  const auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  const size_t n = sv.size();
  size_t i = 0;
  uint64_t acc = 0;
  for (; i + 32 <= n; i += 32) {
    uint64_t w[4];
    std::memcpy(w, s + i, 32);
    acc |= w[0] | w[1] | w[2] | w[3];
    if (acc & 0x8080808080808080ull) return false;
  }
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, s + i, 8);
    acc |= w;
  }
  if (acc & 0x8080808080808080ull) return false;
  for (; i < n; ++i) {
    if (s[i] & 0x80) return false;
  }
  return true;
}

size_t CountCodePoints(std::string_view sv) {
  const auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  const size_t n = sv.size();
  size_t i = 0, count = 0;
  while (i < n) {
    size_t start = i;
    while (i + 8 <= n && AllAscii8(s + i)) i += 8;
    while (i < n && s[i] < 0x80) ++i;
    count += i - start;
    if (i >= n) break;
    size_t sub;
    const size_t len = SeqLen(s, n, i, &sub);
    i += len ? len : sub;
    ++count;
  }
  return count;
}

void AppendCodePoint(std::string* out, char32_t cp) {
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = kReplacementChar;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    const char b[2] = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    out->append(b, 2);
  } else if (cp < 0x10000) {
    const char b[3] = {static_cast<char>(0xE0 | (cp >> 12)),
                       static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
                       static_cast<char>(0x80 | (cp & 0x3F))};
    out->append(b, 3);
  } else {
    const char b[4] = {
        static_cast<char>(0xF0 | (cp >> 18)), static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
        static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
    out->append(b, 4);
  }
}

bool NextCodePoint(std::string_view sv, size_t* pos, char32_t* cp) {
  const auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  const size_t n = sv.size();
  const size_t i = *pos;
  if (i >= n) return false;
  const unsigned char c = s[i];
  if (c < 0x80) {
    *cp = c;
    *pos = i + 1;
    return true;
  }
  size_t sub;
  const size_t len = SeqLen(s, n, i, &sub);
  if (len == 0) {
    *cp = kReplacementChar;
    *pos = i + sub;
    return true;
  }
  char32_t v;
  if (len == 2) {
    v = ((c & 0x1F) << 6) | (s[i + 1] & 0x3F);
  } else if (len == 3) {
    v = ((c & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
  } else {
    v = ((c & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12) | ((s[i + 2] & 0x3F) << 6) |
        (s[i + 3] & 0x3F);
  }
  *cp = v;
  *pos = i + len;
  return true;
}

bool NextCodePointStrict(std::string_view s, size_t* pos, char32_t* cp) {
  size_t i = *pos;
  if (i >= s.size()) return false;
  size_t j = i;
  char32_t c;
  if (!NextCodePoint(s, &j, &c)) return false;
  // NextCodePoint maps ill-formed input to U+FFFD; accept a real U+FFFD only
  // when its bytes are the 3-byte encoding EF BF BD.
  if (c == kReplacementChar &&
      !(j - i == 3 && static_cast<unsigned char>(s[i]) == 0xEF &&
        static_cast<unsigned char>(s[i + 1]) == 0xBF && static_cast<unsigned char>(s[i + 2]) == 0xBD))
    return false;
  *pos = j;
  *cp = c;
  return true;
}

std::string DescribeCodePoint(char32_t cp) {
  std::string s = fmt::format("U+{:04X}", static_cast<uint32_t>(cp));
  const bool control = cp < 0x20 || (cp >= 0x7F && cp <= 0x9F);
  if (!control) {
    s += " '";
    AppendCodePoint(&s, cp);
    s += "'";
  }
  return s;
}

std::vector<std::string> SplitCodePoints(std::string_view s, bool* ok) {
  std::vector<std::string> out;
  if (ok) *ok = true;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t at = pos;
    char32_t cp;
    if (!NextCodePointStrict(s, &pos, &cp)) {
      if (ok) *ok = false;
      pos = at + 1;
      continue;
    }
    out.emplace_back(s.substr(at, pos - at));
  }
  return out;
}

std::string InvalidUtf8Hint(std::string_view s, size_t bad) {
  if (bad >= s.size()) return "";
  return fmt::format(" (byte 0x{:02x}: if the file is Latin-1 or Windows-1252, convert it to UTF-8 "
                     "first, e.g. iconv -f cp1252 -t utf-8)",
                     static_cast<unsigned char>(s[bad]));
}

}  // namespace ds
