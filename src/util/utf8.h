// UTF-8 validation, decoding and encoding (RFC 3629).
//
// Validity follows the Unicode "well-formed UTF-8" table (Unicode 15, table 3-7):
//   U+0000..U+007F      00..7F
//   U+0080..U+07FF      C2..DF 80..BF
//   U+0800..U+0FFF      E0     A0..BF 80..BF
//   U+1000..U+CFFF      E1..EC 80..BF 80..BF
//   U+D000..U+D7FF      ED     80..9F 80..BF          (no surrogates D800..DFFF)
//   U+E000..U+FFFF      EE..EF 80..BF 80..BF
//   U+10000..U+3FFFF    F0     90..BF 80..BF 80..BF
//   U+40000..U+FFFFF    F1..F3 80..BF 80..BF 80..BF
//   U+100000..U+10FFFF  F4     80..8F 80..BF 80..BF   (nothing above U+10FFFF)
// so overlong forms (C0, C1, E0 80..9F, F0 80..8F), surrogates and code points above
// U+10FFFF are rejected. NUL (00) is valid UTF-8; callers that forbid it check for it.
//
// Invalid input policy for decoding: NextCodePoint yields U+FFFD for each "maximal
// subpart" of an ill-formed sequence (Unicode's recommended practice, sec. 3.9), so it
// never gets stuck and never reads past the end.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ds {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// True when s is well-formed UTF-8. On failure, *bad_offset (if given) is the byte
// offset of the first byte of the first ill-formed sequence.
bool IsValidUtf8(std::string_view s, size_t* bad_offset = nullptr);

// The tail of an "invalid UTF-8" message for s[bad] (bad from IsValidUtf8): the byte in
// hex and, since such bytes are most often Latin-1 / Windows-1252 text, how to convert:
// " (byte 0xf6: if the file is Latin-1 or Windows-1252, convert it to UTF-8 first, e.g.
// iconv -f cp1252 -t utf-8)".
std::string InvalidUtf8Hint(std::string_view s, size_t bad);

// True when every byte is < 0x80 (pure ASCII, hence valid UTF-8). Word-at-a-time.
bool IsAscii(std::string_view s);

// Number of code points NextCodePoint would yield (each ill-formed subpart counts as
// one U+FFFD). For valid UTF-8 this is the number of characters.
size_t CountCodePoints(std::string_view s);

// Appends the UTF-8 encoding of cp. Surrogates and values above U+10FFFF are not
// encodable and append U+FFFD instead.
void AppendCodePoint(std::string* out, char32_t cp);

// Decodes the code point starting at *pos, stores it in *cp and advances *pos past it.
// Returns false (leaving *pos and *cp unchanged) when *pos >= s.size(). Ill-formed
// input yields U+FFFD (see policy above).
//   size_t pos = 0; char32_t cp;
//   while (NextCodePoint(s, &pos, &cp)) ...
bool NextCodePoint(std::string_view s, size_t* pos, char32_t* cp);

// Strict decoding (tokenizers, untrusted files): like NextCodePoint but returns
// false, leaving *pos unchanged, on ill-formed or truncated UTF-8.
bool NextCodePointStrict(std::string_view s, size_t* pos, char32_t* cp);

// True for a Unicode scalar value (a code point UTF-8 may encode).
inline bool IsScalarValue(int64_t cp) {
  return cp >= 0 && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
}

// The UTF-8 encoding of one code point.
inline std::string EncodeCodePoint(char32_t cp) {
  std::string s;
  AppendCodePoint(&s, cp);
  return s;
}

// "U+00E9 'é'" for messages; control characters get no quoted form.
std::string DescribeCodePoint(char32_t cp);

// The code points of s, each as its UTF-8 bytes ("añ" -> {"a", "ñ"}). A byte that
// does not start a valid sequence (NextCodePointStrict) is skipped and *ok (when
// given) set to false.
std::vector<std::string> SplitCodePoints(std::string_view s, bool* ok = nullptr);

}  // namespace ds
