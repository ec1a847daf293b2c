// train/dp_bins.h: numeric bins at the quantiles of a noisy fine histogram.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "privacy/secure_noise.h"
#include "schema/public_schema.h"
#include "tokenize/field_tokenizer.h"
#include "train/dp_bins.h"

namespace ds {
namespace {

// Exact counts (no noise): the edges are the quantiles inside the support, and
// every coarse cell outside it is a bin of its own (not one bin up to the
// bound: a value put there must stay near where the release saw it).
TEST(DpBins, ExactCountsGiveQuantilesAndOuterBins) {
  // Scaled range 0..999 in 1000 fine cells; 800 records uniform on 400..799.
  std::vector<double> h(1000, 0.0);
  for (int v = 400; v < 800; ++v) h[size_t(v)] = 2;
  const std::vector<int64_t> e = DpQuantileEdges(0, 999, h, 0.01, 8);
  ASSERT_GE(e.size(), 3u);
  EXPECT_EQ(e.front(), 0);
  EXPECT_EQ(e.back(), 1000);
  // The 32 coarse cells of ~31 values start at ceil(g * 1000 / 32); the
  // support is coarse cells 12 (375..406, holding 400) to 25 (782..812).
  std::vector<int64_t> outside;
  for (int g = 1; g < 32; ++g)
    if (g <= 12 || g >= 26) outside.push_back((g * 1000 + 31) / 32);
  for (int64_t b : outside)
    EXPECT_NE(std::find(e.begin(), e.end(), b), e.end()) << "no edge at coarse boundary " << b;
  for (int64_t x : e) {  // nothing else outside the support
    if (x >= 375 && x <= 813) continue;
    EXPECT_TRUE(x == 0 || x == 1000 || std::find(outside.begin(), outside.end(), x) != outside.end())
        << x;
  }
  // Inside: 7 quantile edges at 450, 500, ..., 750, and no coarse edges.
  for (int q = 450; q < 800; q += 50)
    EXPECT_NE(std::find(e.begin(), e.end(), q), e.end()) << "no edge at " << q;
  EXPECT_EQ(std::count_if(e.begin(), e.end(), [](int64_t x) { return x > 375 && x < 813; }), 7);
  for (size_t i = 1; i < e.size(); ++i) EXPECT_LT(e[i - 1], e[i]);
}

TEST(DpBins, NothingAboveTheNoiseKeepsUniformBins) {
  std::vector<double> h(100, 0.5);
  EXPECT_TRUE(DpQuantileEdges(0, 99, h, 10.0, 8).empty());
}

// Noisy release: edges always partition [lo, hi + 1] and the tokenizer takes
// them; the values' region gets most of the bins.
TEST(DpBins, NoisyReleaseBuildsATokenizer) {
  auto s = ParsePublicSchema(nlohmann::json::parse(R"({"columns": [
      {"name": "z", "type": "decimal", "decimals": 2, "min": 0, "max": 100},
      {"name": "c", "type": "categorical", "values": ["a", "b"]}]})"),
                             "t.json");
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(AdaptiveBinColumns(*s), std::vector<int>{0});
  std::vector<std::vector<std::string>> recs;
  for (int i = 0; i < 4000; ++i)
    recs.push_back({fmt::format("{:.2f}", 2.0 + 4.0 * ((i * 37) % 1000) / 1000.0), "a"});
  SecureGaussian noise = SecureGaussian::Deterministic(7);
  auto edges = MeasureDpBinEdges(*s, recs, 2.0, &noise);
  ASSERT_TRUE(edges.ok()) << edges.status().message();
  ASSERT_EQ(edges->size(), 2u);
  EXPECT_TRUE((*edges)[1].empty());
  const std::vector<int64_t>& e = (*edges)[0];
  ASSERT_FALSE(e.empty());
  EXPECT_EQ(e.front(), 0);
  EXPECT_EQ(e.back(), 10001);
  int inside = 0;  // edges within the data's 2.00-6.00 (scaled 200-600)
  for (int64_t v : e) inside += v >= 150 && v <= 650;
  EXPECT_GE(inside, 20);
  auto tok = FieldTokenizer::FromSchema(*s, &*edges);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  std::vector<int64_t> bad = e;
  bad.back() = 5000;
  std::vector<std::vector<int64_t>> wrong = {bad, {}};
  EXPECT_FALSE(FieldTokenizer::FromSchema(*s, &wrong).ok());
}

TEST(DpBins, PaysOnlyWithEnoughSignal) {
  // diamonds at epsilon 1 (ratio 34) yes; penguins at epsilon 10 (11) no.
  EXPECT_TRUE(DpBinsPay(43152, 14.95, 7));
  EXPECT_FALSE(DpBinsPay(275, 1.525, 4));
  EXPECT_FALSE(DpBinsPay(1000, 1.0, 0));
}

// SplitRelease (what the trainer measures the bins and the calibration at):
// the two parts' RDP a / (2 sigma^2) add up to the release's a / (2 sigma_m^2);
// no share leaves the release whole.
TEST(DpBins, SplitComposesToTheRelease) {
  for (double share : {0.1, 0.25, 0.9}) {
    const ReleaseSplit p = SplitRelease(3.7, share);
    EXPECT_NEAR(1 / (p.bins * p.bins) + 1 / (p.rest * p.rest), 1 / (3.7 * 3.7), 1e-15) << share;
    EXPECT_EQ(p.bins > p.rest, share < 0.5) << share;  // the smaller share, the noisier part
  }
  const ReleaseSplit none = SplitRelease(3.7, 0);
  EXPECT_EQ(none.rest, 3.7);
  EXPECT_EQ(none.bins, 0);
}

}  // namespace
}  // namespace ds
