#include "util/status.h"

#include <gtest/gtest.h>

#include "util/rng.h"

namespace ds {
namespace {

Result<int> Half(int x) {
  if (x % 2) return DS_ERR(kInvalidArgument, "{} is odd", x);
  return x / 2;
}

Status UseHalf(int x, int* out) {
  DS_ASSIGN_OR_RETURN(*out, Half(x));
  return Status::Ok();
}

TEST(Status, CarriesMessageAndLocation) {
  int v = 0;
  Status s = UseHalf(3, &v);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "3 is odd");
  EXPECT_NE(std::string(s.file()).find("status_test.cc"), std::string::npos);
  EXPECT_GT(s.line(), 0);
  EXPECT_TRUE(UseHalf(8, &v).ok());
  EXPECT_EQ(v, 4);
}

TEST(Status, CaptureConvertsExceptions) {
  Status s = Capture([] { DS_THROW(kCorrupt, "bad {}", 1); });
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_EQ(s.message(), "bad 1");
}

TEST(Philox, KnownAnswerAndStreamsDiffer) {
  // Philox4x32-10 known-answer test vector (Random123): key 0, counter 0.
  Philox a(0, 0);
  EXPECT_EQ(a.NextU32(), 0x6627e8d5u);
  EXPECT_EQ(a.NextU32(), 0xe169c58du);
  EXPECT_EQ(a.NextU32(), 0xbc57ac4cu);
  EXPECT_EQ(a.NextU32(), 0x9b00dbd8u);
  Philox b(1, 0), c(1, 1);
  EXPECT_NE(b.NextU64(), c.NextU64());
}

TEST(Philox, UniformMeanAndBelowRange) {
  Philox r(42, 7);
  double sum = 0;
  for (int i = 0; i < 100000; ++i) {
    float u = r.Uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.01);
  for (int i = 0; i < 1000; ++i) ASSERT_LT(r.Below(7), 7u);
}

}  // namespace
}  // namespace ds
