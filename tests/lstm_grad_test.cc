// The CPU backend's training math: finite differences through time for every
// parameter tensor, closed forms, optimizer steps, per-example clipping,
// inference vs training forward, reproducibility. The RnnMath cases run for
// every architecture (lstm, gru: kAllArchitectures).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "batch_fixtures.h"
#include "backend/cpu/buffer.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/dropout.h"
#include "model/network.h"
#include "util/rng.h"

namespace ds {
namespace {

using cpu::CpuTrainBackend;

// The architecture of the running RnnMath case (set by the fixture).
Architecture g_arch = Architecture::kLstm;

class RnnMath : public ::testing::TestWithParam<Architecture> {
 protected:
  void SetUp() override { g_arch = GetParam(); }
  void TearDown() override { g_arch = Architecture::kLstm; }
};

NetworkSpec SmallSpec(float dropout = 0.0f, int H = 4) {
  NetworkSpec s;
  s.architecture = g_arch;
  s.vocab_size = 7;
  s.embedding_dim = 5;
  s.rnn_units = H;
  s.num_layers = 2;
  s.dropout_rate = dropout;
  return s;
}

Batch RandomBatch(int B, int T, int V, uint64_t seed, bool weighted) {
  if (!weighted) return testing::RandomBatch(B, T, V, seed, 99);
  return testing::RandomBatch(B, T, V, seed, 99, [](int i, Philox& rng) {
    return i % 5 == 3 ? 0.0f : 0.5f + float(rng.Uniform());
  });
}

// Glorot init plus random biases (so every bias path carries signal).
std::vector<float> RandomParams(const NetworkSpec& spec, uint64_t seed) {
  ParamLayout p = ParamLayout::For(spec);
  std::vector<float> w(p.total);
  InitParams(spec, "glorot_uniform", seed, w.data());
  Philox rng(seed, 5);
  for (const auto& t : p.tensors) {
    if (t.name.find(".b") == std::string::npos) continue;  // biases (dense.b, <arch>N.b)
    for (size_t i = 0; i < t.size(); ++i) w[t.offset + i] += 0.5f * (rng.Uniform() - 0.5f);
  }
  return w;
}

double Loss(TrainBackend& be, const Batch& batch, uint64_t seed, bool dropout) {
  StepStats st = be.Step(batch, dropout, seed);
  return st.loss_sum / st.count;
}

// Central differences of loss_sum / count for every element of every tensor.
void GradCheck(float dropout, bool weighted) {
  NetworkSpec spec = SmallSpec(dropout);
  const int B = 3, T = 6;
  auto be = cpu::NewCpuTrainBackend(spec, B, T);
  be->SetThreads(1);
  std::vector<float> w = RandomParams(spec, 11);
  Batch batch = RandomBatch(B, T, spec.vocab_size, 3, weighted);
  const uint64_t seed = 1234;
  be->SetParams(w.data());
  be->Step(batch, true, seed);
  std::vector<float> grad(be->layout().total);
  be->GetGrads(grad.data());
  testing::ExpectFiniteDifferences(be->layout(), w, grad, [&]() {
    be->SetParams(w.data());
    return Loss(*be, batch, seed, dropout > 0);
  });
}

TEST_P(RnnMath, FiniteDifferencesNoDropout) { GradCheck(0.0f, false); }
TEST_P(RnnMath, FiniteDifferencesWeightedPositions) { GradCheck(0.0f, true); }
TEST_P(RnnMath, FiniteDifferencesFixedDropoutMask) { GradCheck(0.3f, false); }

// All weights zero: h = 0 for both cells (lstm: c = i g = 0; gru: n = 0, z = 1/2).
TEST_P(RnnMath, ZeroWeightsClosedForm) {
  NetworkSpec spec = SmallSpec();
  const int B = 3, T = 6, V = spec.vocab_size;
  auto be = cpu::NewCpuTrainBackend(spec, B, T);
  std::vector<float> w(be->layout().total, 0.0f);
  be->SetParams(w.data());
  Batch batch = RandomBatch(B, T, V, 8, true);
  StepStats st = be->Step(batch, true, 1);
  double count = std::accumulate(batch.weights.begin(), batch.weights.end(), 0.0);
  EXPECT_NEAR(st.count, count, 1e-9);
  EXPECT_NEAR(st.loss_sum / st.count, std::log(double(V)), 1e-6);
  // Uniform softmax: argmax is token 0.
  double correct = 0;
  for (int i = 0; i < B * T; ++i) correct += batch.targets[i] == 0 ? batch.weights[i] : 0.0;
  EXPECT_NEAR(st.correct, correct, 1e-9);
  std::vector<float> g(be->layout().total);
  be->GetGrads(g.data());
  const auto& L = be->layout();
  for (int v = 0; v < V; ++v) {
    double expect = 0;
    for (int i = 0; i < B * T; ++i)
      expect += batch.weights[i] * (1.0 / V - (batch.targets[i] == v ? 1.0 : 0.0));
    EXPECT_NEAR(g[L.offset("dense.b") + v], expect / count, 1e-6) << "dense.b[" << v << "]";
  }
  // h = 0 everywhere, so every other gradient is exactly zero.
  for (size_t i = 0; i < L.offset("dense.b"); ++i) ASSERT_EQ(g[i], 0.0f) << i;
}

TEST(Optimizer, RmspropAndAdamMatchHandComputedSteps) {
  NetworkSpec spec = SmallSpec();
  auto be = cpu::NewCpuTrainBackend(spec, 1, 1);
  const size_t n = be->layout().total;
  std::vector<float> p0(n), g1(n), g2(n);
  Philox rng(4, 4);
  for (size_t i = 0; i < n; ++i) {
    p0[i] = rng.Uniform() - 0.5f;
    g1[i] = (rng.Uniform() - 0.5f) * 0.1f;
    g2[i] = (rng.Uniform() - 0.5f) * 0.1f;
  }
  for (const char* name : {"rmsprop", "adam"}) {
    OptimizerConfig opt;
    opt.name = name;
    opt.learning_rate = 0.01f;
    opt.epsilon = 1e-7f;
    be->SetParams(p0.data());
    ASSERT_TRUE(be->SetOptimizerState({}).ok());
    be->SetGrads(g1.data());
    be->ApplyOptimizer(opt, 1);
    be->SetGrads(g2.data());
    be->ApplyOptimizer(opt, 2);
    std::vector<float> p(n);
    be->GetParams(p.data());
    for (size_t i = 0; i < n; ++i) {
      double q = p0[i], m = 0, v = 0;
      for (int s = 1; s <= 2; ++s) {
        double g = s == 1 ? g1[i] : g2[i];
        if (std::string(name) == "rmsprop") {
          v = 0.9 * v + 0.1 * g * g;
          q -= 0.01 * g / std::sqrt(v + 1e-7);
        } else {
          m = 0.9 * m + 0.1 * g;
          v = 0.999 * v + 0.001 * g * g;
          double lr_t = 0.01 * std::sqrt(1 - std::pow(0.999, s)) / (1 - std::pow(0.9, s));
          q -= lr_t * m / (std::sqrt(v) + 1e-7);
        }
      }
      ASSERT_NEAR(p[i], q, 1e-6) << name << " " << i;
    }
    // State round trip: resuming from saved state gives the same third step.
    std::vector<float> state = be->GetOptimizerState();
    ASSERT_EQ(state.size(), 2 * n);
    std::vector<float> after2(n), a(n), b(n);
    be->GetParams(after2.data());
    be->ApplyOptimizer(opt, 3);
    be->GetParams(a.data());
    be->SetParams(after2.data());
    ASSERT_TRUE(be->SetOptimizerState(state).ok());
    be->ApplyOptimizer(opt, 3);
    be->GetParams(b.data());
    EXPECT_EQ(a, b);
    EXPECT_FALSE(be->SetOptimizerState(std::vector<float>(3)).ok());
  }
}

std::vector<float> Grads(TrainBackend& be) {
  std::vector<float> g(be.layout().total);
  be.GetGrads(g.data());
  return g;
}

double Norm(const std::vector<float>& g) {
  double s = 0;
  for (float x : g) s += double(x) * x;
  return std::sqrt(s);
}

Batch Example(const Batch& batch, int b) {
  Batch e;
  e.batch = 1;
  e.steps = batch.steps;
  const size_t T = batch.steps;
  e.inputs.assign(batch.inputs.begin() + b * T, batch.inputs.begin() + (b + 1) * T);
  e.targets.assign(batch.targets.begin() + b * T, batch.targets.begin() + (b + 1) * T);
  if (!batch.weights.empty())
    e.weights.assign(batch.weights.begin() + b * T, batch.weights.begin() + (b + 1) * T);
  return e;
}

// Per-example gradients by running each sequence alone, vs the Gram-trick norms
// and the clipped sum.
void ClipAgainstPerExampleRuns(int H, int threads, bool weighted) {
  NetworkSpec spec = SmallSpec(0.0f, H);
  const int B = 4, T = 7;
  auto be = cpu::NewCpuTrainBackend(spec, B, T);
  be->SetThreads(threads);
  std::vector<float> w = RandomParams(spec, 21);
  be->SetParams(w.data());
  Batch batch = RandomBatch(B, T, spec.vocab_size, 5, weighted);
  // Repeated tokens exercise the embedding pair term.
  batch.inputs[2] = batch.inputs[5];
  const size_t n = be->layout().total;
  std::vector<std::vector<float>> per(B);
  std::vector<double> norms(B);
  for (int b = 0; b < B; ++b) {
    be->Step(Example(batch, b), true, 0);
    per[b] = Grads(*be);
    norms[b] = Norm(per[b]);
  }
  for (float clip_value : {1e6f, float(0.5 * (norms[0] + norms[1]))}) {
    PerExampleClip clip;
    clip.l2_norm_clip = clip_value;
    std::vector<float> got_norms;
    clip.norms = &got_norms;
    StepStats st = be->Step(batch, true, 0, &clip);
    StepStats ref = be->Step(batch, false, 0);
    EXPECT_NEAR(st.loss_sum, ref.loss_sum, 1e-4 * std::abs(ref.loss_sum));
    be->Step(batch, true, 0, &clip);
    std::vector<float> g = Grads(*be);
    ASSERT_EQ(got_norms.size(), size_t(B));
    std::vector<double> expect(n, 0.0);
    for (int b = 0; b < B; ++b) {
      EXPECT_NEAR(got_norms[b], norms[b], 1e-4 * norms[b]) << "example " << b;
      const double s = std::min(1.0, clip_value / norms[b]);
      for (size_t i = 0; i < n; ++i) expect[i] += s * per[b][i];
    }
    double en = 0, dn = 0;
    for (size_t i = 0; i < n; ++i) {
      en += expect[i] * expect[i];
      dn += (expect[i] - g[i]) * (expect[i] - g[i]);
      ASSERT_NEAR(g[i], expect[i], 1e-5 + 1e-4 * std::abs(expect[i])) << "param " << i;
    }
    EXPECT_LT(std::sqrt(dn / en), 1e-5);
  }
  if (!weighted) {
    // A clip that never binds gives B x the unclipped mean gradient.
    PerExampleClip clip;
    clip.l2_norm_clip = 1e9f;
    be->Step(batch, true, 0, &clip);
    std::vector<float> gc = Grads(*be);
    be->Step(batch, true, 0);
    std::vector<float> gm = Grads(*be);
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(gc[i] / B, gm[i], 1e-6 + 1e-4 * std::abs(gm[i]));
  }
}

TEST_P(RnnMath, ClipMatchesPerExampleRuns) { ClipAgainstPerExampleRuns(4, 1, false); }
TEST_P(RnnMath, ClipMatchesPerExampleRunsWeighted) { ClipAgainstPerExampleRuns(4, 1, true); }
TEST_P(RnnMath, ClipMatchesPerExampleRunsTwoThreadsBlocked) {
  ClipAgainstPerExampleRuns(32, 2, true);
}

TEST_P(RnnMath, ClipExtremeExampleContributionIsBounded) {
  NetworkSpec spec = SmallSpec(0.0f, 4);
  const int B = 4, T = 6;
  auto be = cpu::NewCpuTrainBackend(spec, B, T);
  std::vector<float> w = RandomParams(spec, 3);
  // Large dense weights make every gradient big; example 0 is the outlier
  // (a constant input whose target always differs from the argmax).
  const auto& L = be->layout();
  for (size_t i = L.offset("dense.w"); i < L.offset("dense.b"); ++i) w[i] *= 50.0f;
  be->SetParams(w.data());
  Batch batch = RandomBatch(B, T, spec.vocab_size, 9, false);
  for (int t = 0; t < T; ++t) batch.inputs[t] = 1;
  Batch rest;
  rest.batch = B - 1;
  rest.steps = T;
  rest.inputs.assign(batch.inputs.begin() + T, batch.inputs.end());
  rest.targets.assign(batch.targets.begin() + T, batch.targets.end());
  const float c = 0.25f;
  PerExampleClip clip;
  clip.l2_norm_clip = c;
  std::vector<float> norms;
  clip.norms = &norms;
  be->Step(batch, true, 0, &clip);
  std::vector<float> with = Grads(*be);
  ASSERT_GT(norms[0], 10 * c) << "the example is not extreme";
  clip.norms = nullptr;
  be->Step(rest, true, 0, &clip);
  std::vector<float> without = Grads(*be);
  std::vector<float> diff(with.size());
  for (size_t i = 0; i < with.size(); ++i) diff[i] = with[i] - without[i];
  // Its contribution is exactly clipped to norm c (and never more).
  EXPECT_NEAR(Norm(diff), c, 1e-4);
  double total = Norm(with);
  EXPECT_LE(total, B * c * (1 + 1e-5));
}

// Training forward logits (teacher forced) vs the inference backend stepping
// each slot token by token, with slots advanced in an interleaved order.
void InferMatchesTraining(int H, int threads) {
  NetworkSpec spec = SmallSpec(0.2f, H);
  spec.vocab_size = 11;
  const int B = 5, T = 9, V = spec.vocab_size;
  auto be = cpu::NewCpuTrainBackend(spec, B, T);
  be->SetThreads(threads);
  std::vector<float> w = RandomParams(spec, 77);
  be->SetParams(w.data());
  Batch batch = RandomBatch(B, T, V, 12, false);
  std::vector<float> ref(size_t(B) * T * V);
  be->ForwardLogits(batch, ref.data());
  cpu::Buffer<float> params(be->layout().total);
  be->GetParams(params.data());
  const int slots = 8;
  auto inf = cpu::NewCpuInferBackend(spec, params.data(), slots, threads);
  // Example b lives in slot 7 - b; slots 0..2 carry unrelated traffic.
  std::vector<float> logits(size_t(slots) * V);
  for (int s = 0; s < slots; ++s) inf->ResetSlot(s);
  for (int t = 0; t < T; ++t) {
    int other_ids[3] = {0, 1, 2};
    int32_t other_tok[3] = {int32_t(t % V), 3, 4};
    inf->Step(other_ids, other_tok, 3, logits.data());
    // Odd steps: advance examples one at a time in reverse; even: all at once.
    if (t % 2) {
      for (int b = B - 1; b >= 0; --b) {
        int id = 7 - b;
        int32_t tok = batch.inputs[size_t(b) * T + t];
        inf->Step(&id, &tok, 1, logits.data());
        for (int v = 0; v < V; ++v)
          ASSERT_NEAR(logits[v], ref[(size_t(b) * T + t) * V + v], 2e-5)
              << "b=" << b << " t=" << t << " v=" << v;
      }
    } else {
      std::vector<int> ids;
      std::vector<int32_t> toks;
      for (int b = 0; b < B; ++b) {
        ids.push_back(7 - b);
        toks.push_back(batch.inputs[size_t(b) * T + t]);
      }
      inf->Step(ids.data(), toks.data(), B, logits.data());
      for (int b = 0; b < B; ++b)
        for (int v = 0; v < V; ++v)
          ASSERT_NEAR(logits[size_t(b) * V + v], ref[(size_t(b) * T + t) * V + v], 2e-5)
              << "b=" << b << " t=" << t << " v=" << v;
    }
  }
  // ResetSlot restarts a sequence: step 0 again gives step 0's logits.
  inf->ResetSlot(7);
  int id = 7;
  int32_t tok = batch.inputs[0];
  inf->Step(&id, &tok, 1, logits.data());
  for (int v = 0; v < V; ++v) EXPECT_NEAR(logits[v], ref[v], 2e-5);
}

TEST_P(RnnMath, InferStepEqualsTrainingForward) { InferMatchesTraining(4, 1); }
TEST_P(RnnMath, InferStepEqualsTrainingForwardBlockedTwoThreads) { InferMatchesTraining(48, 2); }

TEST_P(RnnMath, InferRowSplitAcrossThreadsMatchesOneThread) {
  NetworkSpec spec = SmallSpec(0.0f, 32);
  spec.vocab_size = 13;
  const int slots = 24, V = spec.vocab_size;
  ParamLayout lay = ParamLayout::For(spec);
  cpu::Buffer<float> params(lay.total);
  std::vector<float> w = RandomParams(spec, 8);
  std::memcpy(params.data(), w.data(), w.size() * sizeof(float));
  auto one = cpu::NewCpuInferBackend(spec, params.data(), slots, 1);
  auto two = cpu::NewCpuInferBackend(spec, params.data(), slots, 2);
  std::vector<int> ids(20);
  std::vector<int32_t> tok(20);
  std::vector<float> a(20 * V), b(20 * V);
  for (int step = 0; step < 4; ++step) {
    for (int i = 0; i < 20; ++i) {
      ids[i] = (7 * i + step) % slots;  // a different subset and order each step
      tok[i] = (i * 5 + step) % V;
    }
    one->Step(ids.data(), tok.data(), 20, a.data());
    two->Step(ids.data(), tok.data(), 20, b.data());
    for (int k = 0; k < 20 * V; ++k) ASSERT_NEAR(a[k], b[k], 1e-5) << step << " " << k;
  }
  int dup[2] = {3, 3};
  int32_t dtok[2] = {1, 2};
  EXPECT_THROW(two->Step(dup, dtok, 2, a.data()), Error);
  int bad = slots;
  EXPECT_THROW(two->Step(&bad, dtok, 1, a.data()), Error);
}

TEST_P(RnnMath, LossFromForwardLogitsMatchesStep) {
  NetworkSpec spec = SmallSpec(0.0f, 16);
  const int B = 3, T = 5, V = spec.vocab_size;
  auto be = cpu::NewCpuTrainBackend(spec, B, T);
  std::vector<float> w = RandomParams(spec, 1);
  be->SetParams(w.data());
  Batch batch = RandomBatch(B, T, V, 2, true);
  std::vector<float> lg(size_t(B) * T * V);
  be->ForwardLogits(batch, lg.data());
  double loss = 0;
  for (int i = 0; i < B * T; ++i) {
    double mx = -1e30, s = 0;
    for (int v = 0; v < V; ++v) mx = std::max(mx, double(lg[i * V + v]));
    for (int v = 0; v < V; ++v) s += std::exp(lg[i * V + v] - mx);
    loss += batch.weights[i] * (std::log(s) + mx - lg[i * V + batch.targets[i]]);
  }
  StepStats st = be->Step(batch, false, 0);
  EXPECT_NEAR(st.loss_sum, loss, 1e-5 * loss);
}

TEST_P(RnnMath, SameSeedSameGradsBitwise) {
  for (int threads : {1, 2}) {
    NetworkSpec spec = SmallSpec(0.25f, 32);
    const int B = 6, T = 8;
    auto a = cpu::NewCpuTrainBackend(spec, B, T);
    auto b = cpu::NewCpuTrainBackend(spec, B, T);
    a->SetThreads(threads);
    b->SetThreads(threads);
    std::vector<float> w = RandomParams(spec, 5);
    a->SetParams(w.data());
    b->SetParams(w.data());
    Batch batch = RandomBatch(B, T, spec.vocab_size, 6, true);
    StepStats sa = a->Step(batch, true, 42);
    StepStats sb = b->Step(batch, true, 42);
    EXPECT_EQ(sa.loss_sum, sb.loss_sum);
    std::vector<float> ga = Grads(*a), gb = Grads(*b);
    EXPECT_EQ(0, std::memcmp(ga.data(), gb.data(), ga.size() * sizeof(float)));
    a->Step(batch, true, 42);  // again on the same backend
    std::vector<float> ga2 = Grads(*a);
    EXPECT_EQ(0, std::memcmp(ga.data(), ga2.data(), ga.size() * sizeof(float)));
    a->Step(batch, true, 43);
    EXPECT_NE(Grads(*a), ga) << "dropout seed has no effect";
    // Without dropout, the thread count changes the result only by rounding.
  }
}

TEST_P(RnnMath, ThreadCountsAgreeToRounding) {
  NetworkSpec spec = SmallSpec(0.25f, 32);
  const int B = 6, T = 8;
  auto be = cpu::NewCpuTrainBackend(spec, B, T);
  std::vector<float> w = RandomParams(spec, 5);
  be->SetParams(w.data());
  Batch batch = RandomBatch(B, T, spec.vocab_size, 6, true);
  be->SetThreads(1);
  StepStats s1 = be->Step(batch, true, 42);
  std::vector<float> g1 = Grads(*be);
  be->SetThreads(2);
  StepStats s2 = be->Step(batch, true, 42);
  std::vector<float> g2 = Grads(*be);
  EXPECT_NEAR(s1.loss_sum, s2.loss_sum, 1e-5 * s1.loss_sum);
  for (size_t i = 0; i < g1.size(); ++i) ASSERT_NEAR(g1[i], g2[i], 1e-6 + 1e-4 * std::abs(g1[i]));
}

TEST(Dropout, VectorMaskEqualsScalarPhiloxStream) {
  for (size_t n :
       {size_t(1), size_t(2), size_t(127), size_t(128), size_t(129), size_t(1001), size_t(16384)}) {
    for (uint64_t seed : {uint64_t(0), uint64_t(42), uint64_t(0x123456789abcdefULL)}) {
      std::vector<uint8_t> a(n), b(n);
      cpu::DrawKeepMask(seed, 2, 77, 0.2f, a.data(), n);
      cpu::DrawKeepMaskReference(seed, 2, 77, 0.2f, b.data(), n);
      ASSERT_EQ(a, b) << "n=" << n << " seed=" << seed;
    }
  }
  std::vector<uint8_t> m(1 << 20);
  cpu::DrawKeepMask(9, 1, 3, 0.2f, m.data(), m.size());
  double keep = std::accumulate(m.begin(), m.end(), 0.0) / m.size();
  EXPECT_NEAR(keep, 0.8, 0.002);
}

TEST_P(RnnMath, LibraryThreadedGemmsAgreeWithSplitGemms) {
  NetworkSpec spec = SmallSpec(0.25f, 32);
  const int B = 6, T = 8;
  std::vector<float> w = RandomParams(spec, 5);
  Batch batch = RandomBatch(B, T, spec.vocab_size, 6, true);
  std::vector<float> g[2];
  for (int lib = 0; lib < 2; ++lib) {
    if (lib) setenv("DATASYNTH_CPU_GEMM_SPLIT", "0", 1);
    auto be = cpu::NewCpuTrainBackend(spec, B, T);
    unsetenv("DATASYNTH_CPU_GEMM_SPLIT");
    be->SetThreads(2);
    be->SetParams(w.data());
    be->Step(batch, true, 42);
    g[lib] = Grads(*be);
  }
  for (size_t i = 0; i < g[0].size(); ++i)
    ASSERT_NEAR(g[0][i], g[1][i], 1e-6 + 1e-4 * std::abs(g[0][i])) << i;
}

TEST_P(RnnMath, RejectsBadBatches) {
  NetworkSpec spec = SmallSpec();
  auto be = cpu::NewCpuTrainBackend(spec, 2, 3);
  Batch big = RandomBatch(3, 3, spec.vocab_size, 1, false);
  EXPECT_THROW(be->Step(big, true, 0), Error);
  Batch bad = RandomBatch(2, 3, spec.vocab_size, 1, false);
  bad.targets[4] = spec.vocab_size;
  EXPECT_THROW(be->Step(bad, true, 0), Error);
  EXPECT_FALSE(MakeCpuTrainBackend(NetworkSpec{}, 2, 3).ok());
}

INSTANTIATE_TEST_SUITE_P(Architectures, RnnMath, ::testing::ValuesIn(kAllArchitectures),
                         [](const ::testing::TestParamInfo<Architecture>& i) {
                           return std::string(ArchitectureName(i.param));
                         });

}  // namespace
}  // namespace ds
