// Little-endian fixed-width integers in byte strings: the one encoder and the
// one bounds-checked reader behind the project's own binary formats (the copy
// guard's file, the generation workers' frames). Explicit byte order, so a
// file written on one machine reads the same on any other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace ds {

// Appends the low `bytes` bytes of v, least significant first.
inline void PutLE(std::string* s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s->push_back(char((v >> (8 * i)) & 0xff));
}
inline void PutU32(std::string* s, uint32_t v) { PutLE(s, v, 4); }
inline void PutU64(std::string* s, uint64_t v) { PutLE(s, v, 8); }
// u32 length, then the bytes.
inline void PutStr(std::string* s, std::string_view v) {
  PutU32(s, uint32_t(v.size()));
  s->append(v);
}

// Reads what the Put functions wrote, front to back. A read past the end
// returns zero / empty and clears `ok` for good, so a decoder checks once at
// the end (ok && at_end()).
class ByteReader {
 public:
  ByteReader(const char* p, const char* end) : p_(p), end_(end) {}
  explicit ByteReader(std::string_view s) : ByteReader(s.data(), s.data() + s.size()) {}

  template <typename T>
  T Get() {
    static_assert(std::is_integral_v<T> && sizeof(T) <= 8);
    if (!ok_ || remaining() < sizeof(T)) {
      ok_ = false;
      return T{};
    }
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= uint64_t(uint8_t(p_[i])) << (8 * i);
    p_ += sizeof(T);
    return T(v);
  }
  std::string Str() {
    const uint32_t n = Get<uint32_t>();
    if (!ok_ || remaining() < n) {
      ok_ = false;
      return {};
    }
    std::string s(p_, n);
    p_ += n;
    return s;
  }
  bool ok() const { return ok_; }
  bool at_end() const { return p_ == end_; }
  size_t remaining() const { return size_t(end_ - p_); }

 private:
  const char* p_;
  const char* end_;
  bool ok_ = true;
};

}  // namespace ds
