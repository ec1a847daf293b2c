#include "util/bytes.h"

#include <gtest/gtest.h>

#include <string>

namespace ds {
namespace {

TEST(Bytes, LittleEndianLayoutSpelledOut) {
  std::string s;
  PutU32(&s, 0x11223344u);
  PutU64(&s, 0x0102030405060708ull);
  PutStr(&s, "ab");
  const std::string want("\x44\x33\x22\x11"
                         "\x08\x07\x06\x05\x04\x03\x02\x01"
                         "\x02\x00\x00\x00"
                         "ab",
                         18);
  EXPECT_EQ(s, want);
}

TEST(Bytes, RoundTrip) {
  std::string s;
  PutU32(&s, 0xffffffffu);
  PutU64(&s, 0x8000000000000001ull);
  PutStr(&s, std::string("x\0y", 3));
  s.push_back(char(0xfe));
  ByteReader rd(s);
  EXPECT_EQ(rd.Get<uint32_t>(), 0xffffffffu);
  EXPECT_EQ(rd.Get<uint64_t>(), 0x8000000000000001ull);
  EXPECT_EQ(rd.Str(), std::string("x\0y", 3));
  EXPECT_EQ(rd.Get<uint8_t>(), 0xfe);
  EXPECT_TRUE(rd.ok());
  EXPECT_TRUE(rd.at_end());
}

TEST(Bytes, ReadPastTheEndFailsForGood) {
  std::string s;
  PutU32(&s, 7);
  ByteReader rd(std::string_view(s).substr(0, 3));
  EXPECT_EQ(rd.Get<uint32_t>(), 0u);
  EXPECT_FALSE(rd.ok());
  // Once failed, later reads fail too, even ones that would fit.
  ByteReader rd2(s);
  EXPECT_EQ(rd2.Get<uint64_t>(), 0u);
  EXPECT_FALSE(rd2.ok());
  EXPECT_EQ(rd2.Get<uint8_t>(), 0u);
  EXPECT_FALSE(rd2.ok());
}

TEST(Bytes, StringLongerThanThePayloadIsRejected) {
  std::string s;
  PutU32(&s, 100);  // announces 100 bytes
  s += "short";
  ByteReader rd(s);
  EXPECT_EQ(rd.Str(), "");
  EXPECT_FALSE(rd.ok());
}

}  // namespace
}  // namespace ds
