#include "tokenize/utf8.h"

#include <fmt/core.h>

namespace ds::utf8 {

std::string Describe(char32_t cp) {
  std::string s = fmt::format("U+{:04X}", static_cast<uint32_t>(cp));
  const bool control = cp < 0x20 || (cp >= 0x7F && cp <= 0x9F);
  if (!control) {
    s += " '";
    Append(cp, &s);
    s += "'";
  }
  return s;
}

}  // namespace ds::utf8
