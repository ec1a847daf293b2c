// ParamLayout, InitParams and the FLOP formulas of model/network.h.
#include "model/network.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace ds {
namespace {

NetworkSpec Spec(int V, int E, int H, int L) {
  NetworkSpec s;
  s.vocab_size = V;
  s.embedding_dim = E;
  s.rnn_units = H;
  s.num_layers = L;
  return s;
}

TEST(ParamLayout, OffsetsAlignedOrderedAndDisjoint) {
  for (const auto& spec : {Spec(7, 5, 4, 2), Spec(100, 256, 256, 2), Spec(13, 3, 5, 3)}) {
    ParamLayout p = ParamLayout::For(spec);
    const auto& tensors = p.tensors;
    ASSERT_EQ(tensors.size(), size_t(3 + 3 * spec.num_layers));
    size_t end = 0;
    for (const auto& t : tensors) {
      EXPECT_EQ(t.offset % 16, 0u) << t.name;
      EXPECT_GE(t.offset, end) << t.name << " overlaps the previous tensor";
      EXPECT_LT(t.offset - end, 16u) << t.name << ": more padding than alignment needs";
      end = t.offset + t.size();
    }
    EXPECT_EQ(p.total, (end + 15) / 16 * 16);
    EXPECT_EQ(tensors[0].name, "embedding");
    EXPECT_EQ(tensors[1].name, "lstm0.wx");
    EXPECT_EQ(tensors[2].name, "lstm0.wh");
    EXPECT_EQ(tensors[3].name, "lstm0.b");
    EXPECT_EQ(tensors.back().name, "dense.b");
    EXPECT_EQ(tensors[tensors.size() - 2].name, "dense.w");
    const int64_t H = spec.rnn_units;
    EXPECT_EQ(tensors[1].shape, (std::vector<int64_t>{spec.embedding_dim, 4 * H}));
    EXPECT_EQ(tensors[tensors.size() - 2].shape, (std::vector<int64_t>{H, spec.vocab_size}));
    EXPECT_EQ(p.layer(0).in, spec.embedding_dim);
    for (int l = 1; l < spec.num_layers; ++l) EXPECT_EQ(p.layer(l).in, spec.rnn_units);
    EXPECT_EQ(p.offset("embedding"), tensors[0].offset);
    EXPECT_EQ(p.offset("dense.w"), tensors[tensors.size() - 2].offset);
    EXPECT_EQ(p.layer(0).wh, tensors[2].offset);
    EXPECT_THROW(p.at("gru0.wx"), Error);
  }
}

TEST(ParamLayout, DefaultNetworkSizes) {
  NetworkSpec s = Spec(100, 256, 256, 2);
  ParamLayout p = ParamLayout::For(s);
  // 100*256 + (256*1024 + 256*1024 + 1024) * 2 + 256*100 + 100 (+12 padding after dense.b)
  EXPECT_EQ(p.total, size_t(25600 + 2 * (262144 * 2 + 1024) + 25600 + 112));
}

double Mean(const float* x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += x[i];
  return s / n;
}
double Var(const float* x, size_t n) {
  double m = Mean(x, n), s = 0;
  for (size_t i = 0; i < n; ++i) s += (x[i] - m) * (x[i] - m);
  return s / n;
}

TEST(InitParams, KerasDefaults) {
  NetworkSpec s = Spec(300, 64, 128, 2);
  ParamLayout p = ParamLayout::For(s);
  std::vector<float> w(p.total, 123.0f);
  InitParams(s, "glorot_uniform", 42, w.data());
  const int V = 300, E = 64, H = 128;
  // Embedding uniform(-0.05, 0.05): bounds, mean 0, variance 0.1^2 / 12.
  const float* e = w.data() + p.offset("embedding");
  for (size_t i = 0; i < size_t(V) * E; ++i) ASSERT_LE(std::abs(e[i]), 0.05f);
  EXPECT_NEAR(Mean(e, size_t(V) * E), 0.0, 0.002);
  EXPECT_NEAR(Var(e, size_t(V) * E), 0.01 / 12, 0.01 / 12 * 0.05);
  auto check_glorot = [&](const float* x, int fan_in, int fan_out) {
    const double limit = std::sqrt(6.0 / (fan_in + fan_out));
    const size_t n = size_t(fan_in) * fan_out;
    double mx = 0;
    for (size_t i = 0; i < n; ++i) mx = std::max(mx, double(std::abs(x[i])));
    EXPECT_LE(mx, limit);
    EXPECT_GT(mx, 0.98 * limit);
    EXPECT_NEAR(Mean(x, n), 0.0, 0.02 * limit);
    EXPECT_NEAR(Var(x, n), limit * limit / 3, 0.05 * limit * limit / 3);
  };
  for (int l = 0; l < 2; ++l) {
    const auto L = p.layer(l);
    check_glorot(w.data() + L.wx, L.in, 4 * H);
    check_glorot(w.data() + L.wh, H, 4 * H);
    for (int c = 0; c < 4 * H; ++c)
      EXPECT_EQ(w[L.b + c], (c >= H && c < 2 * H) ? 1.0f : 0.0f) << "layer " << l << " col " << c;
  }
  check_glorot(w.data() + p.offset("dense.w"), H, V);
  for (int v = 0; v < V; ++v) EXPECT_EQ(w[p.offset("dense.b") + v], 0.0f);
  // Padding is zero, and the init is a function of the seed.
  std::vector<float> w2(p.total);
  InitParams(s, "glorot_uniform", 42, w2.data());
  EXPECT_EQ(w, w2);
  InitParams(s, "glorot_uniform", 43, w2.data());
  EXPECT_NE(w, w2);
}

TEST(InitParams, OrthogonalRecurrentKernelHasOrthonormalRows) {
  NetworkSpec s = Spec(10, 8, 16, 1);
  ParamLayout p = ParamLayout::For(s);
  std::vector<float> w(p.total);
  InitParams(s, "orthogonal", 7, w.data());
  const float* wh = w.data() + p.layer(0).wh;  // [16, 64]
  for (int a = 0; a < 16; ++a)
    for (int b = 0; b < 16; ++b) {
      double d = 0;
      for (int c = 0; c < 64; ++c) d += double(wh[a * 64 + c]) * wh[b * 64 + c];
      EXPECT_NEAR(d, a == b ? 1.0 : 0.0, 1e-5) << a << "," << b;
    }
  EXPECT_THROW(InitParams(s, "bogus", 1, w.data()), std::exception);
}

TEST(Flops, MatchHandCount) {
  NetworkSpec s = Spec(100, 256, 256, 2);
  // forward MACs/token: 2 layers x 4*256*(256+256) + 256*100 = 1,074,176
  EXPECT_DOUBLE_EQ(InferFlopsPerToken(s), 2.0 * 1074176);
  EXPECT_DOUBLE_EQ(TrainFlopsPerToken(s), 6.0 * 1074176);
  NetworkSpec t = Spec(7, 5, 4, 3);
  // 4*4*(5+4) + 2 * 4*4*(4+4) + 4*7 = 144 + 256 + 28 = 428
  EXPECT_DOUBLE_EQ(InferFlopsPerToken(t), 2.0 * 428);
}

// ---- the GRU (model/network.h: Keras GRU, reset_after) ----

NetworkSpec Gru(int V, int E, int H, int L) {
  NetworkSpec s = Spec(V, E, H, L);
  s.architecture = Architecture::kGru;
  return s;
}

TEST(Architecture, NamesRoundTripAndUnknownIsRefused) {
  for (Architecture a : kAllArchitectures)
    EXPECT_EQ(ParseArchitecture(ArchitectureName(a)).value(), a);
  auto bad = ParseArchitecture("transformer");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("architecture: unknown value 'transformer'"),
            std::string::npos);
  EXPECT_EQ(GateCount(Architecture::kLstm), 4);
  EXPECT_EQ(GateCount(Architecture::kGru), 3);
  EXPECT_EQ(NetworkSpec{}.architecture, Architecture::kLstm);  // the default
}

TEST(ParamLayout, GruTensorsShapesAndInit) {
  NetworkSpec s = Gru(50, 8, 16, 2);
  ParamLayout p = ParamLayout::For(s);
  std::vector<std::string> names;
  for (const auto& t : p.tensors) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"embedding", "gru0.wx", "gru0.wh", "gru0.b",
                                              "gru1.wx", "gru1.wh", "gru1.b", "dense.w",
                                              "dense.b"}));
  EXPECT_EQ(p.at("gru0.wx").shape, (std::vector<int64_t>{8, 48}));
  EXPECT_EQ(p.at("gru1.wx").shape, (std::vector<int64_t>{16, 48}));
  EXPECT_EQ(p.at("gru0.wh").shape, (std::vector<int64_t>{16, 48}));
  EXPECT_EQ(p.at("gru0.b").shape, (std::vector<int64_t>{2, 48}));
  // 50*8 + (8*48 + 16*48 + 96) + (16*48 + 16*48 + 96) + 16*50 + 50 (+14 padding)
  EXPECT_EQ(p.total, size_t(400 + 1248 + 1632 + 800 + 64));
  std::vector<float> w(p.total, 9.0f);
  InitParams(s, "glorot_uniform", 3, w.data());
  for (int i = 0; i < 96; ++i) EXPECT_EQ(w[p.offset("gru1.b") + i], 0.0f);  // Keras: zeros
  const double limit = std::sqrt(6.0 / (16 + 48));
  double mx = 0;
  for (size_t i = 0; i < 16 * 48; ++i) mx = std::max(mx, double(std::abs(w[p.layer(1).wh + i])));
  EXPECT_LE(mx, limit);
  EXPECT_GT(mx, 0.9 * limit);
  // The embedding and dense draws do not depend on the architecture.
  NetworkSpec l = s;
  l.architecture = Architecture::kLstm;
  ParamLayout pl = ParamLayout::For(l);
  std::vector<float> wl(pl.total);
  InitParams(l, "glorot_uniform", 3, wl.data());
  for (size_t i = 0; i < 400; ++i) ASSERT_EQ(w[i], wl[i]);
  for (size_t i = 0; i < 800; ++i)
    ASSERT_EQ(w[p.offset("dense.w") + i], wl[pl.offset("dense.w") + i]);
}

TEST(Flops, GruCountsThreeGates) {
  NetworkSpec t = Gru(7, 5, 4, 3);
  // 3*4*(5+4) + 2 * 3*4*(4+4) + 4*7 = 108 + 192 + 28 = 328
  EXPECT_DOUBLE_EQ(InferFlopsPerToken(t), 2.0 * 328);
  EXPECT_DOUBLE_EQ(TrainFlopsPerToken(t), 6.0 * 328);
}

}  // namespace
}  // namespace ds
