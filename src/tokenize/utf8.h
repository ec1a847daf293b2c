// Strict UTF-8 helpers for the tokenizers (internal).
//
// Decoding rejects overlong forms, surrogates (U+D800..U+DFFF), code points
// above U+10FFFF and truncated sequences, so every accepted string re-encodes
// to the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ds::utf8 {

// Decodes the code point starting at s[*pos]; advances *pos past it. Returns
// false (and leaves *pos unchanged) on invalid or truncated UTF-8.
inline bool Next(std::string_view s, size_t* pos, char32_t* cp) {
  size_t i = *pos;
  if (i >= s.size()) return false;
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    *cp = b0;
    *pos = i + 1;
    return true;
  }
  int len;
  char32_t c;
  char32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, c = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, c = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, c = b0 & 0x07, min = 0x10000;
  } else {
    return false;
  }
  if (i + len > s.size()) return false;
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return false;
    c = (c << 6) | (b & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
  *cp = c;
  *pos = i + len;
  return true;
}

// True for a Unicode scalar value (a code point UTF-8 may encode).
inline bool IsScalar(int64_t cp) {
  return cp >= 0 && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
}

// Appends the UTF-8 encoding of a scalar value.
inline void Append(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

inline std::string Encode(char32_t cp) {
  std::string s;
  Append(cp, &s);
  return s;
}

// Number of code points in valid UTF-8 (counts non-continuation bytes).
inline size_t CountChars(std::string_view s) {
  size_t n = 0;
  for (char ch : s) n += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
  return n;
}

// "U+00E9 'é'" for messages; control characters get no quoted form.
std::string Describe(char32_t cp);

}  // namespace ds::utf8
