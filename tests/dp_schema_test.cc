// Tests for DP with typed fields: the public schema (schema/public_schema.h:
// parsing errors, conforming data, the schema-built field tokenizer), the
// accounting of DP-SGD composed with the marginal release (against
// dp-accounting vectors and the closed form), and marginal calibration
// (train/calibrate.h) on a closed-form case.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "dp_vectors.h"
#include "model/network.h"
#include "privacy/dp_config.h"
#include "privacy/rdp_accountant.h"
#include "schema/public_schema.h"
#include "tokenize/field_tokenizer.h"
#include "train/calibrate.h"

namespace ds {
namespace {

using Json = nlohmann::json;

Json Telco() {
  return Json::parse(R"({"columns": [
    {"name": "contract", "type": "categorical", "values": ["Month-to-month", "One year"]},
    {"name": "tenure", "type": "integer", "min": 0, "max": 100},
    {"name": "charges", "type": "decimal", "decimals": 2, "style": "trim", "min": 0,
     "max": 150, "missing": [""]},
    {"name": "day", "type": "datetime", "format": "%Y-%m-%d", "min_year": 2000, "max_year": 2001},
    {"name": "note", "type": "text", "max_length": 5, "alphabet": "abc"}]})");
}

std::string ParseError(const Json& j) {
  auto r = ParsePublicSchema(j, "s.json");
  return r.ok() ? "" : r.status().message();
}

TEST(PublicSchema, ParsesAndRoundTrips) {
  auto s = ParsePublicSchema(Telco(), "s.json");
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->columns.size(), 5u);
  EXPECT_EQ(s->columns[2].decimals, 2);
  EXPECT_TRUE(s->columns[2].trim);
  auto again = ParsePublicSchema(PublicSchemaToJson(*s), "t.json");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(PublicSchemaToJson(*again), PublicSchemaToJson(*s));
}

TEST(PublicSchema, ErrorsNameFileColumnAndKey) {
  Json j = Telco();
  j["columns"][1].erase("max");
  EXPECT_NE(ParseError(j).find("s.json: columns[1] ('tenure'): key 'max' is required"),
            std::string::npos) << ParseError(j);
  j = Telco();
  j["columns"][1]["min"] = 200;
  EXPECT_NE(ParseError(j).find("('tenure'): needs min <= max"), std::string::npos);
  j = Telco();
  j["columns"][0]["values"] = {"a", "a"};
  EXPECT_NE(ParseError(j).find("('contract'): value 'a' listed twice"), std::string::npos);
  j = Telco();
  j["columns"][0]["bins"] = 3;
  EXPECT_NE(ParseError(j).find("key 'bins' is not allowed for type categorical"), std::string::npos);
  j = Telco();
  j["columns"][1]["type"] = "number";
  EXPECT_NE(ParseError(j).find("unknown type 'number'"), std::string::npos);
  j = Telco();
  j["columns"][2]["decimals"] = 12;
  EXPECT_NE(ParseError(j).find("key 'decimals' must be in 1..9"), std::string::npos);
  j = Telco();
  j["columns"][2]["missing"] = {"zero"};
  EXPECT_NE(ParseError(j).find("'zero' in 'missing' is not a missing spelling"), std::string::npos);
  j = Telco();
  j["columns"][3]["format"] = "%Q";
  EXPECT_NE(ParseError(j).find("('day'): key 'format'"), std::string::npos);
  j = Telco();
  j["columns"][1]["min"] = "0";
  EXPECT_NE(ParseError(j).find("key 'min' has the wrong type"), std::string::npos);
  j = Telco();
  j["extra"] = 1;
  EXPECT_NE(ParseError(j).find("unknown key 'extra'"), std::string::npos);
  EXPECT_NE(ParseError(Json::parse(R"({"columns": []})")).find("'columns' is empty"),
            std::string::npos);
  auto s = ParsePublicSchema(Telco(), "s.json");
  ASSERT_TRUE(s.ok());
  Status h = CheckSchemaHeader(*s, {"contract", "tenure", "charge", "day", "note"});
  EXPECT_NE(h.message().find("column 3 is 'charges' but the data's header has 'charge'"),
            std::string::npos) << h.message();
}

TEST(PublicSchema, ConformClipsMapsAndDrops) {
  auto s = ParsePublicSchema(Telco(), "s.json");
  ASSERT_TRUE(s.ok());
  std::vector<std::vector<std::string>> recs = {
      {"One year", "150", "12.345", "1999-02-28", "abc"},  // clipped tenure, rounded charge, year
      {"Two year", "5", "1", "2000-01-01", "a"},           // category not listed: dropped
      {"One year", "5", "NA", "2000-01-01", "a"},          // missing -> the listed ""
      {"One year", "5", "1", "2000-01-01", "abd"},         // char outside the alphabet: dropped
      {"Month-to-month", "-3", "-1", "2002-02-29", ""}};   // text empty not allowed: dropped
  std::vector<int64_t> lines = {2, 3, 4, 5, 6};
  ConformReport rep = ConformRecords(*s, &recs, &lines);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(rep.dropped, 3);
  EXPECT_EQ(lines, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(recs[0], (std::vector<std::string>{"One year", "100", "12.35", "2000-02-28", "abc"}));
  EXPECT_EQ(recs[1][2], "");
  EXPECT_EQ(rep.clipped[1], 2);  // 150 and -3 (counted before the record was dropped)
  EXPECT_EQ(rep.dropped_by[0], 1);
  const std::string d = rep.Describe(*s);
  EXPECT_NE(d.find("'contract': 1 records dropped"), std::string::npos) << d;
  EXPECT_EQ(d.find("Two year"), std::string::npos) << "values must not be read out: " << d;
}

TEST(PublicSchema, TokenizerFromSchemaOnly) {
  auto s = ParsePublicSchema(Telco(), "s.json");
  ASSERT_TRUE(s.ok());
  auto t = FieldTokenizer::FromSchema(*s);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const auto& cols = (*t)->columns();
  EXPECT_EQ(cols[0].values, (std::vector<std::string>{"Month-to-month", "One year"}));
  EXPECT_TRUE(cols[0].rare.empty());
  EXPECT_EQ(cols[1].edges.size(), 33u);  // 101 values > 100: 32 uniform bins
  EXPECT_EQ(cols[1].edges.front(), 0);
  EXPECT_EQ(cols[1].edges.back(), 101);
  EXPECT_EQ(cols[3].year_lo, 2000);
  EXPECT_EQ(cols[3].year_hi, 2001);
  std::vector<int32_t> ids;
  EXPECT_TRUE((*t)->EncodeRecord({"One year", "100", "12.35", "2001-12-31", "cab"}, &ids).ok());
  ASSERT_EQ(ids.back(), (*t)->end_id());
  ids.pop_back();
  std::vector<std::string> fields;
  EXPECT_EQ((*t)->DecodeRecord(ids, &fields), "");
  EXPECT_EQ(fields, (std::vector<std::string>{"One year", "100", "12.35", "2001-12-31", "cab"}));
  ids.clear();
  EXPECT_FALSE((*t)->EncodeRecord({"Two year", "1", "1", "2001-01-01", "a"}, &ids).ok());
}

TEST(PublicSchema, TemplateFromData) {
  auto s = SchemaTemplate({"c", "n", "d"}, {{"x", "72", "18.25"}, {"y", "3", "118.75"},
                                            {"x", "5", ""}, {"z", "1", "2.5"}});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->columns[0].values, (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(s->columns[1].min, 1);
  EXPECT_EQ(s->columns[1].max, 80);
  EXPECT_EQ(s->columns[2].max, 200);
  EXPECT_EQ(s->columns[2].missing, (std::vector<std::string>{""}));
  EXPECT_TRUE(ParsePublicSchema(PublicSchemaToJson(*s), "t").ok());
}

// ------------------------------------------------------- composed accounting

TEST(ComposedAccounting, GaussianIsClosedForm) {
  const std::vector<double> orders = DefaultOrders();
  const std::vector<double> g = GaussianRdp(3.0, orders);
  for (size_t k = 0; k < orders.size(); ++k) EXPECT_NEAR(g[k], orders[k] / 18.0, 1e-12 * orders[k]);
  RdpAccountant a;
  a.AddSteps(0.05, 1.1, 100);
  std::vector<double> want = a.rdp();
  a.AddGaussian(3.0);
  for (size_t k = 0; k < orders.size(); ++k) EXPECT_NEAR(a.rdp()[k], want[k] + g[k], 1e-12);
}

TEST(ComposedAccounting, MatchesDpAccounting) {
  const auto rows =
      ReadComposedVectors(std::string(DS_TEST_DATA) + "/privacy/composed_vectors.csv");
  for (const auto& v : rows) {
    RdpAccountant a;
    a.AddSteps(v.q, v.sigma, v.steps);
    a.AddGaussian(v.marginal_sigma);
    const DpResult r = a.GetEpsilon(v.delta);
    EXPECT_NEAR(r.epsilon, v.epsilon, 1e-9 * v.epsilon + 1e-12) << v.line;
    EXPECT_EQ(r.order, v.order) << v.line;
  }
  EXPECT_EQ(rows.size(), 5u);
}

TEST(ComposedAccounting, PlanMeetsTheTargetForTheComposition) {
  DpSettings s;
  s.dp = true;
  s.dp_target_epsilon = 1.0;
  s.marginal_share = 0.1;
  auto p = PlanDp(s, 5634, 512, 15);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_GT(p->marginal_noise_multiplier, 0);
  EXPECT_NEAR(p->marginal_epsilon_alone, 0.1, 1e-3);
  RdpAccountant a;
  a.AddSteps(p->sampling_rate, p->noise_multiplier, p->steps);
  a.AddGaussian(p->marginal_noise_multiplier);
  EXPECT_LE(a.GetEpsilon(p->delta).epsilon, 1.0 + 1e-9);
  EXPECT_GT(a.GetEpsilon(p->delta).epsilon, 0.999);
  EXPECT_LT(p->sgd_epsilon_alone, 1.0);
  const std::vector<double> extra = p->ExtraRdp();
  EXPECT_EQ(MaxStepsWithinBudget(1.0, p->sampling_rate, p->noise_multiplier, p->delta,
                                 RdpConversion::kImproved, &extra),
            p->steps);
  s.dp_target_epsilon = 0;
  s.dp_noise_multiplier = 1;
  EXPECT_FALSE(PlanDp(s, 5634, 512, 15).ok());  // a share needs a target
}

// ----------------------------------------------------------------- calibrate

TEST(Calibrate, MovesAMarginalToItsTarget) {
  // One categorical column of two values; dense.w = 0, so the first token's
  // distribution is softmax of dense.b over the two ids: the calibrated bias
  // difference must approach log(0.8 / 0.2).
  auto s = ParsePublicSchema(Json::parse(
      R"({"columns": [{"name": "c", "type": "categorical", "values": ["a", "b"]}]})"), "s");
  ASSERT_TRUE(s.ok());
  auto tok = FieldTokenizer::FromSchema(*s);
  ASSERT_TRUE(tok.ok());
  NetworkSpec spec;
  spec.vocab_size = (*tok)->vocab_size();
  spec.embedding_dim = 4;
  spec.rnn_units = 4;
  spec.num_layers = 1;
  const ParamLayout layout = ParamLayout::For(spec);
  std::vector<float> params(layout.total, 0.0f);
  std::vector<ColumnMarginal> target = MarginalCells(**tok);
  ASSERT_EQ(target.size(), 1u);
  ASSERT_EQ(target[0].hi - target[0].lo, 2);
  CountMarginals(**tok, {{"a"}, {"a"}, {"a"}, {"a"}, {"b"}}, &target);
  EXPECT_EQ(target[0].p, (std::vector<double>{4, 1}));
  Normalize(&target);
  CalibrateOptions o;
  o.samples = 4000;
  o.iterations = 3;
  CalibrateReport rep;
  ASSERT_TRUE(Calibrate(**tok, {"c"}, ',', spec, params.data(), target, o, &rep).ok());
  EXPECT_NEAR(rep.tvd_before, 0.3, 0.03);
  EXPECT_LT(rep.tvd_after, 0.03);
  const float* b = params.data() + layout.offset("dense.b");
  EXPECT_NEAR(b[target[0].lo] - b[target[0].lo + 1], std::log(4.0), 0.2);
}

}  // namespace
}  // namespace ds
