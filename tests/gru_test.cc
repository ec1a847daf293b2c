// The GRU cell (model/network.h: Keras GRU, reset_after = true) in closed form:
// a one-unit network with hand-set weights, its hidden state and logits
// worked out by hand (the numbers below), against the CPU inference and
// training backends. The case tells reset_after from reset_before already at
// t = 0 (h_prev = 0): reset_after gives n = tanh(a_n + r * bh_n), reset_before
// n = tanh(a_n + bh_n). Gradients: tests/lstm_grad_test.cc (RnnMath/gru).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cpu/buffer.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/registry.h"
#include "model/network.h"

namespace ds {
namespace {

// V = 2, Emb = 1, H = 1, one layer, no dropout.
NetworkSpec TinyGru() {
  NetworkSpec s;
  s.vocab_size = 2;
  s.embedding_dim = 1;
  s.rnn_units = 1;
  s.num_layers = 1;
  s.dropout_rate = 0.0f;
  s.architecture = Architecture::kGru;
  return s;
}

std::vector<float> TinyParams(const ParamLayout& p) {
  std::vector<float> w(p.total, 0.0f);
  auto set = [&](const char* name, std::vector<float> v) {
    ASSERT_EQ(p.at(name).size(), v.size()) << name;
    for (size_t i = 0; i < v.size(); ++i) w[p.offset(name) + i] = v[i];
  };
  set("embedding", {0.5f, -1.0f});
  set("gru0.wx", {0.3f, -0.2f, 0.7f});  // z, r, n
  set("gru0.wh", {0.4f, 0.6f, -0.5f});
  set("gru0.b", {0.1f, 0.0f, -0.1f, 0.0f, 0.2f, 0.3f});  // bx, then bh
  set("dense.w", {1.0f, -1.0f});
  set("dense.b", {0.0f, 0.5f});
  return w;
}

// By hand, tokens 0 then 1:
//   t = 0: x = 0.5, a = [0.25, -0.1, 0.25], u = bh = [0, 0.2, 0.3],
//          z = s(0.25), r = s(0.1), n = tanh(0.25 + 0.3 r), h0 = (1 - z) n
//   t = 1: x = -1, a = [-0.2, 0.2, -0.8], u = h0 Wh + bh, h1 = z h0 + (1 - z) n
double Sig(double x) { return 1 / (1 + std::exp(-x)); }
const double kH0 = 0.16914986323376524, kH1 = -0.23136379161378268;

TEST(GruClosedForm, HandWorkedStateMatchesTheFormula) {
  // The constants are the formulas of network.h (guards the constants).
  double z = Sig(0.25), r = Sig(0.1), n = std::tanh(0.25 + r * 0.3);
  double h0 = (1 - z) * n;
  EXPECT_NEAR(h0, kH0, 1e-15);
  double u[3] = {h0 * 0.4, h0 * 0.6 + 0.2, h0 * -0.5 + 0.3};
  z = Sig(-0.2 + u[0]);
  r = Sig(0.2 + u[1]);
  n = std::tanh(-0.8 + r * u[2]);
  EXPECT_NEAR(z * h0 + (1 - z) * n, kH1, 1e-15);
  EXPECT_GT(std::abs(kH0 - (1 - Sig(0.25)) * std::tanh(0.55)), 1e-3)
      << "reset_before would give the same number; the case would not tell them apart";
}

TEST(GruClosedForm, InferenceLogits) {
  NetworkSpec spec = TinyGru();
  ParamLayout p = ParamLayout::For(spec);
  std::vector<float> w = TinyParams(p);
  cpu::Buffer<float> params(p.total);
  for (size_t i = 0; i < p.total; ++i) params.data()[i] = w[i];
  auto inf = MakeInferBackend(DeviceKind::kCpu, spec, params.data(), 1).ValueOrThrow();
  int slot = 0;
  float logits[2];
  int32_t tok = 0;
  inf->Step(&slot, &tok, 1, logits);
  EXPECT_NEAR(logits[0], kH0, 2e-6);
  EXPECT_NEAR(logits[1], 0.5 - kH0, 2e-6);
  tok = 1;
  inf->Step(&slot, &tok, 1, logits);
  EXPECT_NEAR(logits[0], kH1, 2e-6);
  EXPECT_NEAR(logits[1], 0.5 - kH1, 2e-6);
  inf->ResetSlot(0);
  tok = 0;
  inf->Step(&slot, &tok, 1, logits);
  EXPECT_NEAR(logits[0], kH0, 2e-6);
}

TEST(GruClosedForm, TrainingLoss) {
  NetworkSpec spec = TinyGru();
  auto be = cpu::NewCpuTrainBackend(spec, 1, 2);
  std::vector<float> w = TinyParams(be->layout());
  be->SetParams(w.data());
  Batch b;
  b.batch = 1;
  b.steps = 2;
  b.inputs = {0, 1};
  b.targets = {1, 0};
  // CE = logsumexp(l) - l[target], l = [h, 0.5 - h].
  auto ce = [](double h, int y) {
    double l0 = h, l1 = 0.5 - h, m = std::max(l0, l1);
    return m + std::log(std::exp(l0 - m) + std::exp(l1 - m)) - (y == 0 ? l0 : l1);
  };
  StepStats st = be->Step(b, /*train=*/false, 0);
  EXPECT_NEAR(st.loss_sum, ce(kH0, 1) + ce(kH1, 0), 1e-5);
  EXPECT_EQ(st.count, 2);
  EXPECT_EQ(st.correct, 1);  // argmax at t = 0 is 1 (0.33 > 0.17), at t = 1 also 1 (target 0)
  std::vector<float> logits(4);
  be->ForwardLogits(b, logits.data());
  EXPECT_NEAR(logits[0], kH0, 2e-6);
  EXPECT_NEAR(logits[2], kH1, 2e-6);
}

}  // namespace
}  // namespace ds
