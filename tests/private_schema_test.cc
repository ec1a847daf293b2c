// schema/private_schema.h: the schema derived under DP from a known table,
// the noise calibration in closed form, partition selection of rare values.
#include "schema/private_schema.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "privacy/rdp_accountant.h"
#include "tokenize/field_tokenizer.h"

namespace ds {
namespace {

using Records = std::vector<std::vector<std::string>>;
const std::vector<std::string> kHeader = {"plan", "age", "fee", "day", "note", "code"};

// 3,000 rows: plan (3 values, one of them held by a single row), age integer
// 18..90, fee 2 decimals 0.00..199.99, day ISO dates 2015..2019, note free
// text, code unique ids.
Records Table() {
  Records r;
  for (int i = 0; i < 3000; ++i) {
    const std::string plan = i == 7 ? "secret-plan" : (i % 3 == 0 ? "gold" : "basic");
    const int age = 18 + (i * 37) % 73;
    const std::string fee = std::to_string((i * 7919) % 20000 / 100) + "." +
                            std::string(1, char('0' + i % 10)) + std::string(1, char('0' + i / 10 % 10));
    const std::string day = std::to_string(2015 + i % 5) + "-0" + std::to_string(1 + i % 9) + "-1" +
                            std::to_string(i % 10);
    r.push_back({plan, std::to_string(age), fee, day, "note number " + std::to_string(i * 13),
                 "c" + std::to_string(100000 + i)});
  }
  return r;
}

TEST(PrivateSchema, NoiseMultiplierMeetsTheTargetTightly) {
  for (int releases : {1, 2}) {
    const double sigma = SchemaNoiseMultiplier(0.5, 1e-5, releases);
    const auto orders = DefaultOrders();
    auto eps = [&](double s) {
      auto rdp = GaussianRdp(s, orders);
      for (double& x : rdp) x *= releases;
      return RdpToEpsilon(orders, rdp, 1e-5).epsilon;
    };
    EXPECT_LE(eps(sigma), 0.5);
    EXPECT_GT(eps(sigma * 0.999), 0.5);
  }
  // Two releases need sqrt(2) x the noise of one (RDP of a Gaussian: a / 2 sigma^2).
  EXPECT_NEAR(SchemaNoiseMultiplier(1, 1e-6, 2) / SchemaNoiseMultiplier(1, 1e-6, 1),
              std::sqrt(2.0), 1e-4);
}

TEST(PrivateSchema, GaussianUpperQuantile) {
  EXPECT_NEAR(GaussianUpperQuantile(0.5), 0, 1e-9);
  EXPECT_NEAR(GaussianUpperQuantile(0.025), 1.959964, 1e-5);
  EXPECT_NEAR(GaussianUpperQuantile(1e-6), 4.753424, 1e-5);
}

TEST(PrivateSchema, RecoversTheTableShapeAtLargeEpsilon) {
  SecureGaussian noise = SecureGaussian::Deterministic(3);
  PrivateSchemaOptions o;
  o.epsilon = 8;
  o.delta = 1e-6;
  PrivateSchemaReport rep;
  auto s = DerivePrivateSchema(kHeader, Table(), o, &noise, &rep);
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->columns.size(), kHeader.size());
  const auto& c = s->columns;
  EXPECT_EQ(c[0].type, FieldType::kCategorical);
  EXPECT_EQ(c[0].values, (std::vector<std::string>{"basic", "gold"}));  // the single row's value is not
  EXPECT_EQ(c[1].type, FieldType::kInteger);
  EXPECT_EQ(c[1].min, 10);   // the grid cell [10, 20) holds 18..19
  EXPECT_EQ(c[1].max, 100);  // [50, 100) holds 50..90
  EXPECT_EQ(c[2].type, FieldType::kDecimal);
  EXPECT_EQ(c[2].decimals, 2);
  EXPECT_FALSE(c[2].trim);
  EXPECT_GE(c[2].min, 0);  // the 15 fees below 1 spread over 6 cells: the bound may stop short
  EXPECT_LE(c[2].min, 1);
  EXPECT_EQ(c[2].max, 200);
  EXPECT_EQ(c[3].type, FieldType::kDatetime);
  EXPECT_EQ(c[3].format, "%Y-%m-%d");
  EXPECT_EQ(c[3].min_year, 2015);
  EXPECT_EQ(c[3].max_year, 2019);
  EXPECT_EQ(c[4].type, FieldType::kText);
  EXPECT_EQ(c[4].max_length, 32);  // "note number 38987": 17 code points
  EXPECT_EQ(c[5].type, FieldType::kText);  // unique ids: no value passes the threshold
  EXPECT_EQ(rep.releases, 2);
  EXPECT_GT(rep.value_threshold, 1);
  // Round trip through the file format, and a tokenizer builds from it.
  PublicSchema back = ParsePublicSchema(PublicSchemaToJson(*s), "t").value();
  EXPECT_EQ(PublicSchemaToJson(back), PublicSchemaToJson(*s));
  EXPECT_DOUBLE_EQ(back.derived_epsilon, 0);  // the caller records what it spent
  auto tok = FieldTokenizer::FromSchema(*s);
  EXPECT_TRUE(tok.ok()) << tok.status().message();
}

// A value held by one record is released with probability <= delta / 2 / k
// (partition selection): over 300 noise draws at a modest epsilon, never.
// A value held by 400 records always is.
TEST(PrivateSchema, RareValuesStayOut) {
  Records r;
  for (int i = 0; i < 2000; ++i) r.push_back({i == 0 ? "alice" : (i % 5 == 0 ? "b" : "a"), "x"});
  PrivateSchemaOptions o;
  o.epsilon = 1;
  o.delta = 1e-5;
  o.field_types = {{"v", "categorical"}, {"w", "categorical"}};
  int b_listed = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    SecureGaussian noise = SecureGaussian::Deterministic(seed);
    auto s = DerivePrivateSchema({"v", "w"}, r, o, &noise, nullptr);
    ASSERT_TRUE(s.ok());
    for (const auto& v : s->columns[0].values) ASSERT_NE(v, "alice") << "seed " << seed;
    b_listed += std::count(s->columns[0].values.begin(), s->columns[0].values.end(), "b");
  }
  EXPECT_EQ(b_listed, 300);
}

TEST(PrivateSchema, GivenTypesSkipTheShapeRelease) {
  Records r = Table();
  PrivateSchemaOptions o;
  o.epsilon = 4;
  o.delta = 1e-6;
  for (const auto& h : kHeader) o.field_types[h] = "text";
  o.field_types["age"] = "integer";
  o.field_types["day"] = "datetime:%Y-%m-%d";
  SecureGaussian noise = SecureGaussian::Deterministic(5);
  PrivateSchemaReport rep;
  auto s = DerivePrivateSchema(kHeader, r, o, &noise, &rep);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(rep.releases, 1);
  EXPECT_NEAR(rep.noise_multiplier * std::sqrt(2.0), SchemaNoiseMultiplier(4, 5e-7, 2), 1e-6);
  EXPECT_EQ(s->columns[1].type, FieldType::kInteger);
  EXPECT_EQ(s->columns[3].min_year, 2015);
  EXPECT_EQ(s->columns[4].type, FieldType::kText);
  EXPECT_EQ(s->columns[4].max_length, 32);
}

// Bounds never clip a real mass: 0 and 1..9 are neighbours for integers
// (no integer lies between), a far false decade cannot stretch them, and
// over many noise draws they always cover the values.
TEST(PrivateSchema, NumericBoundsCoverTheValues) {
  Records r;
  for (int i = 0; i < 3000; ++i) r.push_back({std::to_string(i % 4), std::to_string(100 + i % 700)});
  PrivateSchemaOptions o;
  o.epsilon = 0.5;
  o.delta = 1e-5;
  int exact = 0;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    SecureGaussian noise = SecureGaussian::Deterministic(seed);
    auto s = DerivePrivateSchema({"k", "v"}, r, o, &noise, nullptr);
    ASSERT_TRUE(s.ok());
    const auto& k = s->columns[0];
    const auto& v = s->columns[1];
    ASSERT_EQ(k.type, FieldType::kInteger) << "seed " << seed;
    // Covering, and loose by at most one decade (a neighbour's noise above
    // two stddevs, or an empty cell of an outer decade kept).
    EXPECT_LE(k.min, 0) << "seed " << seed;
    EXPECT_GE(k.min, -10) << "seed " << seed;
    EXPECT_GE(k.max, 3) << "seed " << seed;
    EXPECT_LE(k.max, 10) << "seed " << seed;
    EXPECT_LE(v.min, 100) << "seed " << seed;
    EXPECT_GE(v.min, 10) << "seed " << seed;
    EXPECT_GE(v.max, 799) << "seed " << seed;
    EXPECT_LE(v.max, 10000) << "seed " << seed;
    exact += k.min == 0 && k.max <= 5 && v.min == 100 && v.max == 1000;
  }
  EXPECT_GE(exact, 80);  // most draws give the tight bounds
}

TEST(PrivateSchema, BadOptionsAreErrors) {
  SecureGaussian noise = SecureGaussian::Deterministic(1);
  PrivateSchemaOptions o;
  o.delta = 1e-5;
  EXPECT_FALSE(DerivePrivateSchema(kHeader, Table(), o, &noise, nullptr).ok());  // epsilon 0
  o.epsilon = 1;
  o.field_types = {{"nope", "integer"}};
  auto s = DerivePrivateSchema(kHeader, Table(), o, &noise, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("nope"), std::string::npos);
  o.field_types = {{"age", "constant"}};
  EXPECT_FALSE(DerivePrivateSchema(kHeader, Table(), o, &noise, nullptr).ok());
  EXPECT_FALSE(DerivePrivateSchema(kHeader, {}, PrivateSchemaOptions{1, 1e-5, {}}, &noise, nullptr).ok());
}

}  // namespace
}  // namespace ds
