// Backends against the network's equations and against each other.
//
// * BackendTest/<cpu|cuda>_<lstm|gru>: one test body per operation, run on
//   every backend of the registry (backend/registry.h) for every
//   architecture, each checked against a host reference of the equations in
//   model/network.h and backend/backend.h (double precision) or against
//   finite differences.
// * CudaVsCpuTest/<lstm|gru>: the CUDA backend against the CPU backend (the
//   oracle) on whole training/sampling steps, dropout included.
// * CudaKernelTest: the fused kernels (LSTM and GRU cells, softmax, dropout)
//   one by one against host references.
// Tests needing a GPU skip with "no GPU: <reason>" when CudaAvailable() is
// false (no CUDA build, no device, driver too old).
#include "batch_fixtures.h"
#include "backend/backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backend/device.h"
#include "backend/module.h"
#include "backend/registry.h"
#include "model/network.h"
#include "util/rng.h"
#ifdef DS_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernels.h"
#endif

namespace ds {
namespace {

#define DS_REQUIRE_GPU()                                           \
  do {                                                             \
    std::string _why;                                              \
    if (!CudaAvailable(&_why)) GTEST_SKIP() << "no GPU: " << _why; \
  } while (0)

// ---- helpers ---------------------------------------------------------------

struct AlignedFree {
  void operator()(float* p) const { std::free(p); }
};
using AlignedParams = std::unique_ptr<float[], AlignedFree>;

AlignedParams Aligned(const std::vector<float>& v) {
  size_t bytes = (v.size() * sizeof(float) + 63) / 64 * 64;
  AlignedParams p(static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64))));
  std::copy(v.begin(), v.end(), p.get());
  return p;
}

// The architecture of the running parameterised case (set by the fixtures).
Architecture g_arch = Architecture::kLstm;

NetworkSpec Spec(int V, int E, int H, int L, float dropout) {
  NetworkSpec s;
  s.architecture = g_arch;
  s.vocab_size = V;
  s.embedding_dim = E;
  s.rnn_units = H;
  s.num_layers = L;
  s.dropout_rate = dropout;
  return s;
}

std::vector<float> RandomParams(const NetworkSpec& spec, uint64_t seed, float scale = 0.5f) {
  ParamLayout layout = ParamLayout::For(spec);
  std::vector<float> p(layout.total, 0.0f);
  Philox rng(seed, 1);
  for (const auto& t : layout.tensors) {
    for (size_t i = 0; i < t.size(); ++i) p[t.offset + i] = scale * (2 * rng.Uniform() - 1);
  }
  return p;
}

Batch RandomBatch(int B, int T, int V, uint64_t seed, bool weights) {
  if (!weights) return testing::RandomBatch(B, T, V, seed, 2);
  return testing::RandomBatch(B, T, V, seed, 2, [](int i, Philox&) {
    return i % 7 == 3 ? 0.0f : (i % 5 == 1 ? 2.0f : 1.0f);
  });
}

DeviceKind Kind(const std::string& name) {
  return name == "cuda" ? DeviceKind::kCuda : DeviceKind::kCpu;
}

// Through the registry, as the trainer and the generator construct them.
std::unique_ptr<TrainBackend> MakeTrain(const std::string& name, const NetworkSpec& spec, int B,
                                        int T) {
  return MakeTrainBackend(Kind(name), spec, B, T).ValueOrThrow();
}

std::unique_ptr<InferBackend> MakeInfer(const std::string& name, const NetworkSpec& spec,
                                        const float* params, int slots) {
  return MakeInferBackend(Kind(name), spec, params, slots).ValueOrThrow();
}

// The network of model/network.h on the host, in double, without dropout.
class Reference {
 public:
  Reference(const NetworkSpec& spec, const std::vector<float>& params)
      : s_(spec), l_(ParamLayout::For(spec)), p_(params) {}
  struct State {
    std::vector<std::vector<double>> h, c;
  };
  State Zero() const {
    State st;
    st.h.assign(s_.num_layers, std::vector<double>(s_.rnn_units, 0.0));
    st.c = st.h;
    return st;
  }
  // Advances `st` by token `tok`; returns the logits [V].
  std::vector<double> Step(State& st, int tok) const {
    const int H = s_.rnn_units, V = s_.vocab_size;
    std::vector<double> x(s_.embedding_dim);
    for (int j = 0; j < s_.embedding_dim; ++j)
      x[j] = p_[l_.offset("embedding") + size_t(tok) * s_.embedding_dim + j];
    for (int l = 0; l < s_.num_layers; ++l) {
      if (s_.architecture == Architecture::kGru) {
        GruLayer(l, x, st.h[l]);
      } else {
        LstmLayer(l, x, st.h[l], st.c[l]);
      }
      x = st.h[l];
    }
    std::vector<double> logits(V);
    for (int v = 0; v < V; ++v) {
      double a = p_[l_.offset("dense.b") + v];
      for (int j = 0; j < H; ++j) a += x[j] * p_[l_.offset("dense.w") + size_t(j) * V + v];
      logits[v] = a;
    }
    return logits;
  }
  // Sums over the batch, each sequence from the zero state.
  StepStats Loss(const Batch& b) const {
    StepStats st;
    for (int r = 0; r < b.batch; ++r) {
      State s = Zero();
      for (int t = 0; t < b.steps; ++t) {
        size_t i = size_t(r) * b.steps + t;
        auto lg = Step(s, b.inputs[i]);
        double m = *std::max_element(lg.begin(), lg.end());
        double sum = 0;
        for (double v : lg) sum += std::exp(v - m);
        double w = b.weights.empty() ? 1.0 : b.weights[i];
        st.loss_sum += w * (std::log(sum) + m - lg[b.targets[i]]);
        st.correct += w * (std::max_element(lg.begin(), lg.end()) - lg.begin() == b.targets[i]);
        st.count += w;
      }
    }
    return st;
  }
  static double Sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }

 private:
  // out[k] = bias[k] + in W[:, k] for the [rows, cols] matrix at offset w.
  std::vector<double> Affine(const std::vector<double>& in, size_t w, const float* bias,
                             int cols) const {
    std::vector<double> out(cols);
    for (int k = 0; k < cols; ++k) {
      double a = bias ? bias[k] : 0.0;
      for (size_t i = 0; i < in.size(); ++i) a += in[i] * p_[w + i * cols + k];
      out[k] = a;
    }
    return out;
  }
  void LstmLayer(int l, const std::vector<double>& x, std::vector<double>& h,
                 std::vector<double>& c) const {
    const int H = s_.rnn_units;
    const auto ly = l_.layer(l);
    std::vector<double> z = Affine(x, ly.wx, p_.data() + ly.b, 4 * H);
    std::vector<double> zh = Affine(h, ly.wh, nullptr, 4 * H);
    for (int k = 0; k < 4 * H; ++k) z[k] += zh[k];
    for (int j = 0; j < H; ++j) {
      double i = Sig(z[j]), f = Sig(z[H + j]), g = std::tanh(z[2 * H + j]), o = Sig(z[3 * H + j]);
      c[j] = f * c[j] + i * g;
      h[j] = o * std::tanh(c[j]);
    }
  }
  // Keras GRU, reset_after (model/network.h).
  void GruLayer(int l, const std::vector<double>& x, std::vector<double>& h) const {
    const int H = s_.rnn_units;
    const auto ly = l_.layer(l);
    std::vector<double> a = Affine(x, ly.wx, p_.data() + ly.b, 3 * H);
    std::vector<double> u = Affine(h, ly.wh, p_.data() + ly.b + 3 * H, 3 * H);
    for (int j = 0; j < H; ++j) {
      double z = Sig(a[j] + u[j]), r = Sig(a[H + j] + u[H + j]);
      double n = std::tanh(a[2 * H + j] + r * u[2 * H + j]);
      h[j] = z * h[j] + (1 - z) * n;
    }
  }

  NetworkSpec s_;
  ParamLayout l_;
  std::vector<float> p_;
};

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, double atol,
                 double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double tol = atol + rtol * std::fabs(want[i]);
    if (!(std::fabs(double(got[i]) - want[i]) <= tol) && ++bad <= 5) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " differ";
}

// ---- every backend against the equations ------------------------------------

// Parameter: (device name, architecture).
class BackendTest : public ::testing::TestWithParam<std::tuple<std::string, Architecture>> {
 protected:
  void SetUp() override {
    g_arch = std::get<1>(GetParam());
    if (Device() == "cuda") DS_REQUIRE_GPU();
  }
  void TearDown() override { g_arch = Architecture::kLstm; }
  std::string Device() const { return std::get<0>(GetParam()); }
};

// RMSprop (Keras semantics as the project defines them) and state round trip.
TEST_P(BackendTest, Optimizer) {
  NetworkSpec spec = Spec(13, 4, 3, 2, 0.0f);
  auto be = MakeTrain(Device(), spec, 2, 3);
  const size_t n = be->layout().total;
  std::vector<float> p = RandomParams(spec, 1);
  be->SetParams(p.data());
  OptimizerConfig opt;  // rmsprop, lr 0.01, rho 0.9, eps 1e-7
  std::vector<double> ref(p.begin(), p.end()), ms(n, 0.0);
  for (int step = 1; step <= 3; ++step) {
    std::vector<float> g = RandomParams(spec, 100 + step, 1.0f);
    be->SetGrads(g.data());
    be->ApplyOptimizer(opt, step);
    for (size_t i = 0; i < n; ++i) {
      ms[i] = opt.rho * ms[i] + (1 - opt.rho) * double(g[i]) * g[i];
      ref[i] -= opt.learning_rate * g[i] / std::sqrt(ms[i] + opt.epsilon);
    }
  }
  std::vector<float> got(n), want(ref.begin(), ref.end());
  be->GetParams(got.data());
  ExpectClose(got, want, 1e-6, 1e-5, "rmsprop params");
  // Grads are an input of the update, never changed by it.
  std::vector<float> g3 = RandomParams(spec, 103, 1.0f), gg(n);
  be->GetGrads(gg.data());
  ExpectClose(gg, g3, 0, 0, "grads");
  // State: save, perturb, restore, and the next update matches.
  std::vector<float> state = be->GetOptimizerState();
  EXPECT_FALSE(state.empty());
  auto be2 = MakeTrain(Device(), spec, 2, 3);
  ASSERT_TRUE(be2->SetOptimizerState(state).ok());
  be2->SetParams(got.data());
  be2->SetGrads(g3.data());
  be->ApplyOptimizer(opt, 4);
  be2->ApplyOptimizer(opt, 4);
  std::vector<float> a(n), b(n);
  be->GetParams(a.data());
  be2->GetParams(b.data());
  ExpectClose(b, a, 0, 0, "params after restored state");
}

// The optimizer on slices (mpirun's sharded optimizer, src/dist): slices that
// cover [0, total), at boundaries off the vector width, give the weights and
// state of the whole update bit for bit; each slice's params are copied out
// and the rest is untouched.
TEST_P(BackendTest, OptimizerOnSlices) {
  NetworkSpec spec = Spec(13, 4, 3, 2, 0.0f);
  for (std::string name : {"rmsprop", "adam"}) {
    auto whole = MakeTrain(Device(), spec, 2, 3), sliced = MakeTrain(Device(), spec, 2, 3);
    const size_t n = whole->layout().total;
    const std::vector<size_t> cut = {0, 7, n / 2 + 3, n / 2 + 3, n};  // one empty slice
    std::vector<float> p = RandomParams(spec, 1);
    whole->SetParams(p.data());
    sliced->SetParams(p.data());
    OptimizerConfig opt;
    opt.name = name;
    for (int step = 1; step <= 3; ++step) {
      std::vector<float> g = RandomParams(spec, 100 + step, 1.0f), out(n, -7.0f);
      whole->SetGrads(g.data());
      whole->ApplyOptimizer(opt, step);
      std::vector<float> before(n);
      sliced->GetParams(before.data());
      for (size_t c = 0; c + 1 < cut.size(); ++c) {
        const OptimizerRange range{cut[c], cut[c + 1], g.data() + cut[c], out.data() + cut[c]};
        OptimizerConfig o = opt;
        o.range = &range;
        sliced->ApplyOptimizer(o, step);
        if (c == 0) {  // the first slice alone: the rest is untouched
          std::vector<float> now(n);
          sliced->GetParams(now.data());
          EXPECT_TRUE(std::equal(now.begin() + long(cut[1]), now.end(), before.begin() + long(cut[1])))
              << name;
        }
      }
      std::vector<float> a(n), b(n);
      whole->GetParams(a.data());
      sliced->GetParams(b.data());
      ExpectClose(b, a, 0, 0, name + " params on slices");
      ExpectClose(out, a, 0, 0, name + " params copied out");
    }
    std::vector<float> sa = whole->GetOptimizerState(), sb = sliced->GetOptimizerState();
    ExpectClose(sb, sa, 0, 0, name + " state on slices");
  }
  auto be = MakeTrain(Device(), spec, 2, 3);
  std::vector<float> g(4), out(4);
  const OptimizerRange bad{1, be->layout().total + 1, g.data(), out.data()};
  OptimizerConfig o;
  o.range = &bad;
  EXPECT_THROW(be->ApplyOptimizer(o, 1), Error);
}

// SetParamsExcept (mpirun's gathered weights around the rank's own slice):
// the weights and the next step's loss are those of one whole SetParams.
TEST_P(BackendTest, ParamsExceptOwnSlice) {
  NetworkSpec spec = Spec(13, 4, 3, 2, 0.0f);
  auto whole = MakeTrain(Device(), spec, 2, 3), part = MakeTrain(Device(), spec, 2, 3);
  const size_t n = whole->layout().total, lo = 5, hi = n / 2 + 1;
  std::vector<float> p = RandomParams(spec, 1), q = RandomParams(spec, 2);
  for (size_t i = lo; i < hi; ++i) q[i] = p[i];  // the caller's promise: the slice is current
  Batch batch = RandomBatch(2, 3, 13, 4, /*weights=*/false);
  part->SetParams(p.data());
  part->Step(batch, /*train=*/false, 0);  // caches of p's weights in use
  part->SetParamsExcept(q.data(), lo, hi);
  whole->SetParams(q.data());
  std::vector<float> a(n), b(n);
  whole->GetParams(a.data());
  part->GetParams(b.data());
  ExpectClose(b, a, 0, 0, "params");
  EXPECT_EQ(part->Step(batch, false, 0).loss_sum, whole->Step(batch, false, 0).loss_sum);
  if (Device() == "cpu") {
    EXPECT_THROW(part->SetParamsExcept(q.data(), 1, n + 1), Error);
  }
}

// StepInto (mpirun's shards) writes every element of the gradient Step and
// GetGrads give, with dropout, into the caller's buffer, and leaves the
// backend's own gradient as it was.
TEST_P(BackendTest, StepIntoWritesTheWholeGradient) {
  NetworkSpec spec = Spec(13, 4, 3, 2, 0.25f);
  auto a = MakeTrain(Device(), spec, 3, 4), b = MakeTrain(Device(), spec, 3, 4);
  const size_t n = a->layout().total;
  std::vector<float> p = RandomParams(spec, 3);
  a->SetParams(p.data());
  b->SetParams(p.data());
  Batch first = RandomBatch(3, 4, 13, 5, /*weights=*/true), batch = RandomBatch(3, 4, 13, 6, true);
  // Legal ids around each target (the field tokenizer's ranged dense stage).
  for (int32_t t : batch.targets) {
    batch.legal_lo.push_back(std::max(0, t - 2));
    batch.legal_hi.push_back(std::min(13, t + 3));
  }
  a->Step(first, /*train=*/true, 7);
  std::vector<float> own(n), want(n), got(n, std::numeric_limits<float>::quiet_NaN()), after(n);
  a->GetGrads(own.data());
  const StepStats sa = a->StepInto(batch, 11, got.data());
  const StepStats sb = b->Step(batch, /*train=*/true, 11);
  b->GetGrads(want.data());
  EXPECT_EQ(sa.loss_sum, sb.loss_sum);
  EXPECT_EQ(sa.count, sb.count);
  ExpectClose(got, want, 0, 0, "StepInto's gradient");
  a->GetGrads(after.data());
  if (Device() == "cpu") ExpectClose(after, own, 0, 0, "the backend's own gradient");
}

// Softmax cross-entropy, weights and accuracy: with Wd = 0 the logits are the
// dense bias, so loss, accuracy and d/d(bias) have closed forms.
TEST_P(BackendTest, SoftmaxCrossEntropy) {
  const int V = 9, B = 3, T = 4;
  NetworkSpec spec = Spec(V, 5, 4, 1, 0.0f);
  auto be = MakeTrain(Device(), spec, B, T);
  const ParamLayout& L = be->layout();
  std::vector<float> p = RandomParams(spec, 2);
  for (int i = 0; i < 4 * V; ++i) p[L.offset("dense.w") + i] = 0.0f;
  std::vector<double> bias(V);
  for (int v = 0; v < V; ++v) bias[v] = p[L.offset("dense.b") + v] = 0.3f * v - 0.1f * (v % 3) * v;
  be->SetParams(p.data());
  Batch batch = RandomBatch(B, T, V, 3, /*weights=*/true);
  batch.targets[0] = int32_t(std::max_element(bias.begin(), bias.end()) - bias.begin());
  double m = *std::max_element(bias.begin(), bias.end()), sum = 0;
  for (double b : bias) sum += std::exp(b - m);
  double lse = m + std::log(sum);
  StepStats want;
  std::vector<double> dbias(V, 0.0);
  for (int i = 0; i < B * T; ++i) {
    double w = batch.weights[i];
    int y = batch.targets[i];
    want.loss_sum += w * (lse - bias[y]);
    want.correct += w * (bias[y] == m);
    want.count += w;
    for (int v = 0; v < V; ++v) dbias[v] += w * (std::exp(bias[v] - lse) - (v == y));
  }
  StepStats got = be->Step(batch, /*train=*/true, 7);
  EXPECT_NEAR(got.loss_sum, want.loss_sum, 1e-4 * want.loss_sum);
  EXPECT_DOUBLE_EQ(got.correct, want.correct);
  EXPECT_GT(got.correct, 0);
  EXPECT_DOUBLE_EQ(got.count, want.count);
  std::vector<float> g(L.total), gb(V), wb(V);
  be->GetGrads(g.data());
  for (int v = 0; v < V; ++v) {
    gb[v] = g[L.offset("dense.b") + v];
    wb[v] = float(dbias[v] / want.count);
  }
  ExpectClose(gb, wb, 1e-6, 1e-4, "d loss / d dense.b");
  // Eval mode gives the same statistics and leaves the gradients alone.
  std::vector<float> sentinel(L.total, 0.25f);
  be->SetGrads(sentinel.data());
  StepStats ev = be->Step(batch, /*train=*/false, 7);
  EXPECT_NEAR(ev.loss_sum, want.loss_sum, 1e-4 * want.loss_sum);
  be->GetGrads(g.data());
  ExpectClose(g, sentinel, 0, 0, "grads after an eval step");
}

// Recurrent forward: sampling steps (slots in any order, subsets, resets) and the
// training-mode loss against the host reference.
TEST_P(BackendTest, RnnForward) {
  NetworkSpec spec = Spec(17, 6, 5, 2, 0.3f);
  std::vector<float> p = RandomParams(spec, 4);
  AlignedParams ap = Aligned(p);
  Reference ref(spec, p);
  const int S = 4, V = spec.vocab_size;
  auto inf = MakeInfer(Device(), spec, ap.get(), S);
  EXPECT_EQ(inf->slots(), S);
  std::vector<Reference::State> st(S, ref.Zero());
  Philox rng(5, 0);
  for (int round = 0; round < 6; ++round) {
    std::vector<int> ids;
    for (int s = 0; s < S; ++s) {
      if ((s + round) % 3 != 0) ids.insert(ids.begin(), s);  // subsets, reversed order
    }
    if (round == 3) {
      inf->ResetSlot(1);
      st[1] = ref.Zero();
    }
    std::vector<int32_t> tok;
    for (size_t k = 0; k < ids.size(); ++k) tok.push_back(int32_t(rng.Below(V)));
    std::vector<float> logits(ids.size() * V);
    inf->Step(ids.data(), tok.data(), int(ids.size()), logits.data());
    for (size_t k = 0; k < ids.size(); ++k) {
      auto want = ref.Step(st[ids[k]], tok[k]);
      std::vector<float> g(logits.begin() + k * V, logits.begin() + (k + 1) * V);
      ExpectClose(g, std::vector<float>(want.begin(), want.end()), 1e-5, 1e-4,
                  "logits round " + std::to_string(round));
    }
  }
  auto tr = MakeTrain(Device(), spec, 3, 5);
  tr->SetParams(p.data());
  Batch batch = RandomBatch(3, 5, V, 6, true);
  StepStats got = tr->Step(batch, /*train=*/false, 0);
  StepStats want = ref.Loss(batch);
  EXPECT_NEAR(got.loss_sum, want.loss_sum, 1e-5 * want.loss_sum);
  EXPECT_DOUBLE_EQ(got.correct, want.correct);
  EXPECT_DOUBLE_EQ(got.count, want.count);
}

// Checks `per_tensor` entries of every tensor's gradient `g` (taken at `p` on
// `batch`) against central differences (eps 1e-2) of the eval-mode loss / count;
// the entries are drawn from Philox(seed), an embedding entry in the row of the
// batch's k-th input at column embedding_col(k, rng). Returns the entries checked.
template <typename Col>
int CheckAgainstDifferences(TrainBackend* be, const NetworkSpec& spec, const Batch& batch,
                            const std::vector<float>& p, const std::vector<float>& g,
                            uint64_t seed, int per_tensor, Col embedding_col) {
  auto loss = [&](const std::vector<float>& q) {
    be->SetParams(q.data());
    StepStats s = be->Step(batch, /*train=*/false, 1);
    return s.loss_sum / s.count;
  };
  Philox rng(seed, 0);
  int checked = 0;
  for (const auto& t : be->layout().tensors) {
    for (int k = 0; k < per_tensor; ++k) {
      size_t i = t.offset + rng.Below(t.size());
      if (t.name == "embedding")
        i = t.offset + size_t(batch.inputs[size_t(k)]) * spec.embedding_dim + embedding_col(k, rng);
      const float eps = 1e-2f;
      std::vector<float> q = p;
      q[i] = p[i] + eps;
      const double up = loss(q);
      q[i] = p[i] - eps;
      const double down = loss(q);
      const double fd = (up - down) / (2.0 * eps);
      EXPECT_NEAR(g[i], fd, 1e-3 + 1e-2 * std::fabs(fd)) << t.name << " at " << i - t.offset;
      ++checked;
    }
  }
  return checked;
}

// Recurrent (and embedding, dense) backward: gradients against central finite
// differences of the eval-mode loss / count, on a few entries of every tensor.
TEST_P(BackendTest, RnnBackward) {
  NetworkSpec spec = Spec(7, 4, 3, 2, 0.0f);
  const int B = 3, T = 4;
  auto be = MakeTrain(Device(), spec, B, T);
  std::vector<float> p = RandomParams(spec, 8);
  Batch batch = RandomBatch(B, T, spec.vocab_size, 9, true);
  be->SetParams(p.data());
  StepStats st = be->Step(batch, /*train=*/true, 1);
  std::vector<float> g(be->layout().total);
  be->GetGrads(g.data());
  const int checked = CheckAgainstDifferences(be.get(), spec, batch, p, g, 10, 4,
                                              [](int k, Philox&) { return size_t(k % 4); });
  EXPECT_GE(checked, 36);
  EXPECT_GT(st.count, 0);
  // Rows of tokens absent from the batch get no gradient.
  std::vector<bool> seen(spec.vocab_size, false);
  for (int32_t x : batch.inputs) seen[x] = true;
  for (int v = 0; v < spec.vocab_size; ++v) {
    if (seen[v]) continue;
    for (int j = 0; j < spec.embedding_dim; ++j) {
      EXPECT_EQ(g[be->layout().offset("embedding") + size_t(v) * spec.embedding_dim + j], 0.0f);
    }
  }
}

// The backward GEMMs read transposed copies of the weights refreshed after
// every update (the CPU backend: full 16 x 16 tiles transposed in AVX-512
// registers, the edges in scalar code). With E = 16, H = 32 (Wx [16, 128], Wh
// [32, 128]: full tiles) and V = 37 (Wd [32, 37]: full tiles and edges), after
// an optimizer step: every tensor's gradient against central differences of
// the eval-mode loss (which reads no transposed copy).
TEST_P(BackendTest, BackwardAfterAnUpdateWithFullTiles) {
  NetworkSpec spec = Spec(37, 16, 32, 2, 0.0f);
  const int B = 4, T = 5;
  auto be = MakeTrain(Device(), spec, B, T);
  std::vector<float> p = RandomParams(spec, 31, 0.3f);
  be->SetParams(p.data());
  std::vector<float> g0 = RandomParams(spec, 32, 1.0f);
  be->SetGrads(g0.data());
  OptimizerConfig opt;
  be->ApplyOptimizer(opt, 1);
  be->GetParams(p.data());
  Batch batch = RandomBatch(B, T, spec.vocab_size, 33, true);
  StepStats st = be->Step(batch, /*train=*/true, 1);
  std::vector<float> g(be->layout().total);
  be->GetGrads(g.data());
  const int checked = CheckAgainstDifferences(be.get(), spec, batch, p, g, 34, 6,
                                              [](int, Philox& rng) { return size_t(rng.Below(16)); });
  EXPECT_GE(checked, 6 * 8);
  EXPECT_GT(st.count, 0);
}

// Dropout: active only in training, reproducible from the seed, different
// across seeds, and the loss of an all-zero-weight batch is zero.
TEST_P(BackendTest, Dropout) {
  NetworkSpec spec = Spec(11, 8, 8, 2, 0.5f);
  auto be = MakeTrain(Device(), spec, 4, 6);
  std::vector<float> p = RandomParams(spec, 11);
  be->SetParams(p.data());
  Batch batch = RandomBatch(4, 6, spec.vocab_size, 12, false);
  const size_t n = be->layout().total;
  StepStats a = be->Step(batch, true, 42);
  std::vector<float> ga(n), gb(n);
  be->GetGrads(ga.data());
  StepStats b = be->Step(batch, true, 42);
  be->GetGrads(gb.data());
  EXPECT_EQ(a.loss_sum, b.loss_sum);
  ExpectClose(gb, ga, 0, 0, "grads with the same dropout seed");
  StepStats c = be->Step(batch, true, 43);
  EXPECT_NE(c.loss_sum, a.loss_sum);
  StepStats ev = be->Step(batch, false, 42);
  StepStats ev2 = be->Step(batch, false, 43);
  EXPECT_EQ(ev.loss_sum, ev2.loss_sum);  // no dropout in eval mode
  EXPECT_NE(ev.loss_sum, a.loss_sum);
  EXPECT_NEAR(ev.loss_sum, Reference(spec, p).Loss(batch).loss_sum, 1e-5 * ev.loss_sum);
}

// A full training step plus updates is deterministic and reduces the loss of a
// batch it keeps seeing (sanity of the whole pipeline).
TEST_P(BackendTest, TrainStepLearns) {
  NetworkSpec spec = Spec(12, 8, 16, 2, 0.1f);
  auto be = MakeTrain(Device(), spec, 4, 8);
  std::vector<float> p(be->layout().total);
  InitParams(spec, "glorot_uniform", 13, p.data());
  be->SetParams(p.data());
  Batch batch = RandomBatch(4, 8, spec.vocab_size, 14, false);
  OptimizerConfig opt;
  double first = 0, last = 0;
  for (int step = 1; step <= 100; ++step) {
    StepStats s = be->Step(batch, true, step);
    be->ApplyOptimizer(opt, step);
    if (step == 1) first = s.loss_sum / s.count;
    last = s.loss_sum / s.count;
  }
  EXPECT_LT(last, 0.6 * first) << "first " << first << ", last " << last;
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendTest,
                         ::testing::Combine(::testing::Values("cpu", "cuda"),
                                            ::testing::ValuesIn(kAllArchitectures)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  ArchitectureName(std::get<1>(info.param));
                         });

// Every architecture has a CPU backend; a CUDA build has CUDA ones too, and a
// missing entry is a clear kUnavailable naming what is missing.
TEST(BackendRegistry, CoversEveryArchitecture) {
  for (Architecture a : kAllArchitectures) {
    EXPECT_NE(FindBackend(a, DeviceKind::kCpu), nullptr) << ArchitectureName(a);
#ifdef DS_HAVE_CUDA
    EXPECT_NE(FindBackend(a, DeviceKind::kCuda), nullptr) << ArchitectureName(a);
#else
    Status st = BackendAvailable(a, DeviceKind::kCuda);
    EXPECT_EQ(st.code(), Code::kUnavailable);
    EXPECT_NE(st.message().find("no cuda backend"), std::string::npos) << st.message();
#endif
  }
  NetworkSpec spec = Spec(5, 4, 4, 1, 0.0f);
  spec.architecture = Architecture::kGru;
  auto be = MakeTrainBackend(DeviceKind::kCpu, spec, 2, 3);
  ASSERT_TRUE(be.ok()) << be.status().message();
  EXPECT_EQ((*be)->layout().architecture, Architecture::kGru);
  EXPECT_EQ((*be)->layout().tensors[1].name, "gru0.wx");
}

// ---- device selection (runs everywhere) ------------------------------------

TEST(DeviceTest, ParseAndResolve) {
  EXPECT_EQ(ParseDevice("auto").value(), DeviceRequest::kAuto);
  EXPECT_EQ(ParseDevice("CPU").value(), DeviceRequest::kCpu);
  EXPECT_EQ(ParseDevice("cuda").value(), DeviceRequest::kCuda);
  EXPECT_EQ(ParseDevice("gpu").value(), DeviceRequest::kCuda);
  auto bad = ParseDevice("tpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected auto, cpu or cuda"), std::string::npos);

  std::string why, warning;
  bool gpu = CudaAvailable(&why);
  EXPECT_EQ(ResolveDevice(DeviceRequest::kCpu, &warning).value(), DeviceKind::kCpu);
  EXPECT_TRUE(warning.empty());
  auto cuda = ResolveDevice(DeviceRequest::kCuda, &warning);
  auto autod = ResolveDevice(DeviceRequest::kAuto, &warning);
  if (gpu) {
    EXPECT_TRUE(why.empty());
    EXPECT_EQ(cuda.value(), DeviceKind::kCuda);
    EXPECT_EQ(autod.value(), DeviceKind::kCuda);
    EXPECT_TRUE(warning.empty());
    auto limit = DefaultWorkerLimit(4);
    ASSERT_TRUE(limit.ok()) << limit.status().message();
    EXPECT_LE(*limit, CudaMemory().value().free_bytes / 4);
    EXPECT_GT(*limit, 0u);
  } else {
    EXPECT_FALSE(why.empty());
    ASSERT_FALSE(cuda.ok());
    EXPECT_EQ(cuda.status().code(), Code::kUnavailable);
    EXPECT_NE(cuda.status().message().find(why), std::string::npos) << cuda.status().message();
    EXPECT_EQ(autod.value(), DeviceKind::kCpu);
    EXPECT_NE(warning.find(why), std::string::npos) << warning;
    EXPECT_EQ(warning.find('\n'), std::string::npos);  // one line
    EXPECT_EQ(DefaultWorkerLimit(4).status().code(), Code::kUnavailable);
  }
}

#ifdef DS_HAVE_CUDA

// ---- CUDA against the CPU oracle ---------------------------------------------

struct Compared {
  StepStats cpu, cuda;
  std::vector<float> gcpu, gcuda;
};

class CudaVsCpuTest : public ::testing::TestWithParam<Architecture> {
 protected:
  void SetUp() override { g_arch = GetParam(); }
  void TearDown() override { g_arch = Architecture::kLstm; }
};

Compared CompareStep(const NetworkSpec& spec, const Batch& batch, uint64_t seed, bool train) {
  auto cpu = MakeTrain("cpu", spec, batch.batch, batch.steps);
  auto gpu = MakeTrain("cuda", spec, batch.batch, batch.steps);
  std::vector<float> p = RandomParams(spec, 20);
  cpu->SetParams(p.data());
  gpu->SetParams(p.data());
  Compared c;
  c.cpu = cpu->Step(batch, train, seed);
  c.cuda = gpu->Step(batch, train, seed);
  c.gcpu.resize(cpu->layout().total);
  c.gcuda.resize(cpu->layout().total);
  cpu->GetGrads(c.gcpu.data());
  gpu->GetGrads(c.gcuda.data());
  return c;
}

void ExpectStatsClose(const StepStats& got, const StepStats& want) {
  EXPECT_NEAR(got.loss_sum, want.loss_sum, 1e-5 * std::fabs(want.loss_sum) + 1e-6);
  EXPECT_NEAR(got.correct, want.correct, 1e-9);
  EXPECT_DOUBLE_EQ(got.count, want.count);
}

TEST_P(CudaVsCpuTest, TrainStepWithoutDropout) {
  DS_REQUIRE_GPU();
  NetworkSpec spec = Spec(37, 16, 24, 2, 0.0f);
  Compared c = CompareStep(spec, RandomBatch(5, 9, 37, 21, true), 3, true);
  ExpectStatsClose(c.cuda, c.cpu);
  ExpectClose(c.gcuda, c.gcpu, 1e-6, 1e-3, "grads");
}

// Both backends draw the dropout masks by the scheme in backend/cuda/kernels.h.
TEST_P(CudaVsCpuTest, TrainStepWithDropoutSharesMasks) {
  DS_REQUIRE_GPU();
  NetworkSpec spec = Spec(37, 16, 24, 2, 0.25f);
  Compared c = CompareStep(spec, RandomBatch(5, 9, 37, 22, true), 99, true);
  ExpectStatsClose(c.cuda, c.cpu);
  ExpectClose(c.gcuda, c.gcpu, 1e-6, 1e-3, "grads");
}

TEST_P(CudaVsCpuTest, OptimizerStepsAndAdam) {
  DS_REQUIRE_GPU();
  NetworkSpec spec = Spec(23, 8, 12, 2, 0.2f);
  for (std::string name : {"rmsprop", "adam"}) {
    auto cpu = MakeTrain("cpu", spec, 3, 7);
    auto gpu = MakeTrain("cuda", spec, 3, 7);
    std::vector<float> p = RandomParams(spec, 30);
    cpu->SetParams(p.data());
    gpu->SetParams(p.data());
    OptimizerConfig opt;
    opt.name = name;
    opt.learning_rate = name == "adam" ? 0.001f : 0.01f;
    std::vector<float> g = RandomParams(spec, 31, 0.1f);
    for (int step = 1; step <= 5; ++step) {
      cpu->SetGrads(g.data());
      gpu->SetGrads(g.data());
      cpu->ApplyOptimizer(opt, step);
      gpu->ApplyOptimizer(opt, step);
    }
    std::vector<float> a(p.size()), b(p.size());
    cpu->GetParams(a.data());
    gpu->GetParams(b.data());
    ExpectClose(b, a, 1e-6, 1e-5, name + " params");
    ExpectClose(gpu->GetOptimizerState(), cpu->GetOptimizerState(), 1e-7, 1e-5, name + " state");
  }
}

TEST_P(CudaVsCpuTest, InferStep) {
  DS_REQUIRE_GPU();
  NetworkSpec spec = Spec(300, 32, 48, 2, 0.2f);
  std::vector<float> p = RandomParams(spec, 40, 0.2f);
  AlignedParams ap = Aligned(p);
  const int S = 8, V = spec.vocab_size;
  auto cpu = MakeInfer("cpu", spec, ap.get(), S);
  auto gpu = MakeInfer("cuda", spec, ap.get(), S);
  Philox rng(41, 0);
  for (int step = 0; step < 10; ++step) {
    std::vector<int> ids;
    for (int s = 0; s < S; ++s) {
      if (rng.Below(4) != 0) ids.push_back(s);
    }
    std::vector<int32_t> tok;
    for (size_t k = 0; k < ids.size(); ++k) tok.push_back(int32_t(rng.Below(V)));
    std::vector<float> a(ids.size() * V), b(ids.size() * V);
    cpu->Step(ids.data(), tok.data(), int(ids.size()), a.data());
    gpu->Step(ids.data(), tok.data(), int(ids.size()), b.data());
    ExpectClose(b, a, 1e-5, 1e-4, "logits step " + std::to_string(step));
    if (step == 5) {
      cpu->ResetSlot(2);
      gpu->ResetSlot(2);
    }
  }
}

// The default network (docs/reference.md §1) at the default batch shape.
TEST_P(CudaVsCpuTest, DefaultNetworkStep) {
  DS_REQUIRE_GPU();
  NetworkSpec spec;
  spec.vocab_size = 100;
  spec.architecture = g_arch;
  Batch batch = RandomBatch(64, 100, 100, 50, false);
  auto cpu = MakeTrain("cpu", spec, 64, 100);
  auto gpu = MakeTrain("cuda", spec, 64, 100);
  std::vector<float> p(cpu->layout().total);
  InitParams(spec, "glorot_uniform", 51, p.data());
  cpu->SetParams(p.data());
  gpu->SetParams(p.data());
  StepStats a = cpu->Step(batch, true, 52), b = gpu->Step(batch, true, 52);
  ExpectStatsClose(b, a);
  std::vector<float> ga(p.size()), gb(p.size());
  cpu->GetGrads(ga.data());
  gpu->GetGrads(gb.data());
  ExpectClose(gb, ga, 1e-6, 1e-2, "grads");
}

// --precision bf16 on CUDA (cublasGemmEx, bf16 operands, fp32 accumulation)
// against the CPU's fp32 oracle: within bf16's tolerances of
// tests/precision_test.cc (gradient tensors 2% relative RMS, loss 1e-4), and
// the backend says it runs bf16. Inference logits likewise (1.5%).
TEST_P(CudaVsCpuTest, Bf16StepAndInferWithinBf16Tolerance) {
  DS_REQUIRE_GPU();
  NetworkSpec spec = Spec(37, 16, 32, 2, 0.0f);
  const Batch batch = RandomBatch(6, 12, 37, 23, true);
  BackendOptions o;
  o.precision = Precision::kBf16;
  auto cpu = MakeTrain("cpu", spec, batch.batch, batch.steps);
  auto gpu = MakeTrainBackend(DeviceKind::kCuda, spec, batch.batch, batch.steps, o).ValueOrThrow();
  EXPECT_EQ(gpu->precision(), Precision::kBf16);
  std::vector<float> p = RandomParams(spec, 24);
  cpu->SetParams(p.data());
  gpu->SetParams(p.data());
  const StepStats a = cpu->Step(batch, true, 5), b = gpu->Step(batch, true, 5);
  EXPECT_NEAR(b.loss_sum / b.count, a.loss_sum / a.count, 1e-4 * a.loss_sum / a.count);
  std::vector<float> ga(p.size()), gb(p.size());
  cpu->GetGrads(ga.data());
  gpu->GetGrads(gb.data());
  for (const auto& t : cpu->layout().tensors) {
    double d = 0, r = 0;
    for (size_t i = t.offset; i < t.offset + t.size(); ++i) {
      d += double(gb[i] - ga[i]) * (gb[i] - ga[i]);
      r += double(ga[i]) * ga[i];
    }
    EXPECT_LT(std::sqrt(d / std::max(r, 1e-30)), 2e-2) << t.name;
  }
  AlignedParams ap = Aligned(p);
  auto ci = MakeInfer("cpu", spec, ap.get(), 4);
  auto gi = MakeInferBackend(DeviceKind::kCuda, spec, ap.get(), 4, o).ValueOrThrow();
  int ids[4] = {0, 1, 2, 3};
  int32_t tok[4] = {1, 5, 9, 30};
  std::vector<float> la(4 * 37), lb(4 * 37);
  ci->Step(ids, tok, 4, la.data());
  gi->Step(ids, tok, 4, lb.data());
  double d = 0, r = 0;
  for (size_t i = 0; i < la.size(); ++i) {
    d += double(lb[i] - la[i]) * (lb[i] - la[i]);
    r += double(la[i]) * la[i];
  }
  EXPECT_LT(std::sqrt(d / r), 1.5e-2);
}

INSTANTIATE_TEST_SUITE_P(Architectures, CudaVsCpuTest, ::testing::ValuesIn(kAllArchitectures),
                         [](const auto& info) {
                           return std::string(ArchitectureName(info.param));
                         });

TEST(CudaBackendTest, PerExampleClippingIsUnavailable) {
  DS_REQUIRE_GPU();
  NetworkSpec spec = Spec(5, 4, 4, 1, 0.0f);
  auto gpu = MakeTrain("cuda", spec, 2, 2);
  std::vector<float> norms;
  PerExampleClip clip{1.0f, &norms};
  try {
    gpu->Step(RandomBatch(2, 2, 5, 1, false), true, 1, &clip);
    ADD_FAILURE() << "expected kUnavailable";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), Code::kUnavailable);
  }
}

TEST(CudaBackendTest, BadInputsAreErrors) {
  DS_REQUIRE_GPU();
  NetworkSpec spec = Spec(5, 4, 4, 1, 0.0f);
  auto gpu = MakeTrain("cuda", spec, 2, 2);
  Batch b = RandomBatch(2, 2, 5, 1, false);
  b.inputs[3] = 5;
  EXPECT_THROW(gpu->Step(b, true, 1), Error);
  EXPECT_THROW(gpu->Step(RandomBatch(3, 2, 5, 1, false), true, 1), Error);  // > max_batch
  std::vector<float> p = RandomParams(spec, 1);
  auto inf = MakeInfer("cuda", spec, p.data(), 2);
  int ids[2] = {1, 1};
  int32_t tok[2] = {0, 0};
  std::vector<float> logits(10);
  EXPECT_THROW(inf->Step(ids, tok, 2, logits.data()), Error);  // repeated slot
  EXPECT_FALSE(MakeTrainBackend(DeviceKind::kCuda, Spec(0, 4, 4, 1, 0), 2, 2).ok());
}

// Memory comes from the process's caching allocator and goes back to it.
TEST(CudaBackendTest, AllocatorAccounting) {
  DS_REQUIRE_GPU();
  NetworkSpec spec = Spec(1000, 64, 64, 2, 0.2f);
  size_t before;
  {
    auto warm = MakeTrain("cuda", spec, 2, 2);  // creates the process allocator
    before = CudaModuleAllocatorStats().allocated_bytes;
    auto gpu = MakeTrain("cuda", spec, 16, 32);
    AllocatorStats s = CudaModuleAllocatorStats();
    // At least params, grads and the logits [16*32, 1000] are resident.
    size_t expect = (2 * gpu->layout().total + 16 * 32 * 1000) * sizeof(float);
    EXPECT_GE(s.allocated_bytes - before, expect);
    EXPECT_GE(s.reserved_bytes, s.allocated_bytes);
  }
  AllocatorStats after = CudaModuleAllocatorStats();
  EXPECT_EQ(after.allocated_bytes, 0u);
  EXPECT_GT(after.reserved_bytes, 0u);  // cached for the next backend
  EXPECT_GT(before, 0u);
}

// With a GPU, the CUDA rows come from the module (backend/module.h), loaded
// by the probe, of this build.
TEST(CudaBackendTest, BackendsComeFromTheModule) {
  DS_REQUIRE_GPU();
  const BackendModule* m = LoadedBackendModule(DeviceKind::kCuda);
  ASSERT_NE(m, nullptr);
  EXPECT_STREQ(m->name, "cuda");
  EXPECT_STREQ(m->build_id, BackendModuleBuildId());
  EXPECT_EQ(MakeTrain("cuda", Spec(5, 4, 4, 1, 0), 2, 2)->name(), "cuda");
}

// ---- kernels against host references ------------------------------------------

template <typename T>
class Dev {
 public:
  explicit Dev(size_t n) : n_(n) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p_), std::max<size_t>(n, 1) * sizeof(T)),
              cudaSuccess);
  }
  explicit Dev(const std::vector<T>& v) : Dev(v.size()) {
    EXPECT_EQ(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~Dev() { cudaFree(p_); }
  T* get() const { return p_; }
  std::vector<T> Get() const {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<T> v(n_);
    EXPECT_EQ(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

std::vector<float> Rand(size_t n, uint64_t seed, float scale = 1.0f) {
  Philox r(seed, 3);
  std::vector<float> v(n);
  for (auto& x : v) x = scale * (2 * r.Uniform() - 1);
  return v;
}

// The dropout mask scheme of backend/cuda/kernels.h (the CPU backend's): keep
// flags of the [B, W] elements of site `site` at step t, drawn sequentially.
std::vector<uint8_t> HostMask(uint64_t seed, uint64_t site, int t, int B, int W, float rate) {
  Philox rng(seed, (site << 32) | uint32_t(t));
  const uint32_t thr = uint32_t(std::lround(double(rate) * 65536.0));
  std::vector<uint8_t> m(size_t(B) * W);
  for (size_t i = 0; i < m.size(); i += 2) {
    uint32_t r = rng.NextU32();
    m[i] = (r & 0xFFFFu) >= thr;
    if (i + 1 < m.size()) m[i + 1] = (r >> 16) >= thr;
  }
  return m;
}

TEST(CudaKernelTest, DropoutMasksFollowThePhiloxScheme) {
  DS_REQUIRE_GPU();
  const int T = 7, B = 5, W = 33;  // B * W odd: the last element of a step uses a fresh draw
  const float rate = 0.3f, scale = 1.0f / (1.0f - rate);
  const uint64_t seed = 0x123456789abcULL, site = 2;
  std::vector<float> x = Rand(size_t(T) * B * W, 1);
  Dev<float> in(x), out(x.size());
  cuda::Dropout(in.get(), out.get(), T, B, W, rate, seed, site, nullptr);
  std::vector<float> got = out.Get();
  int dropped = 0;
  for (int t = 0; t < T; ++t) {
    std::vector<uint8_t> m = HostMask(seed, site, t, B, W, rate);
    for (int i = 0; i < B * W; ++i) {
      size_t r = size_t(t) * B * W + i;
      float want = m[i] ? x[r] * scale : 0.0f;
      dropped += !m[i];
      ASSERT_EQ(got[r], want) << "t " << t << " i " << i;
    }
  }
  EXPECT_NEAR(double(dropped) / x.size(), rate, 0.05);
  // In place (the backward pass) gives the same.
  cuda::Dropout(in.get(), in.get(), T, B, W, rate, seed, site, nullptr);
  EXPECT_EQ(in.Get(), got);
  // The embedding gather uses site 0 with the same scheme.
  const int V = 6, E = 33;
  std::vector<float> table = Rand(size_t(V) * E, 2);
  std::vector<int32_t> tok(size_t(T) * B);
  for (size_t r = 0; r < tok.size(); ++r) tok[r] = int32_t(r % V);
  Dev<float> dt(table), de(size_t(T) * B * E);
  Dev<int32_t> dtok(tok);
  cuda::EmbeddingDropoutForward(dt.get(), dtok.get(), T, B, E, rate, seed, true, de.get(), nullptr);
  std::vector<float> emb = de.Get();
  for (int t = 0; t < T; ++t) {
    std::vector<uint8_t> m = HostMask(seed, 0, t, B, E, rate);
    for (int b = 0; b < B; ++b) {
      for (int j = 0; j < E; ++j) {
        size_t r = size_t(t) * B + b;
        float want = m[size_t(b) * E + j] ? table[tok[r] * E + j] * scale : 0.0f;
        ASSERT_EQ(emb[r * E + j], want);
      }
    }
  }
}

// Cell forward against the equations; cell backward against finite
// differences of S = sum(dh * h) + sum(dc_in * c) (in double).
TEST(CudaKernelTest, LstmCell) {
  DS_REQUIRE_GPU();
  const int B = 3, H = 37;
  std::vector<float> z = Rand(size_t(B) * 4 * H, 3, 2.0f), bias = Rand(4 * H, 4),
                     cp = Rand(size_t(B) * H, 5), dh = Rand(size_t(B) * H, 6),
                     dcin = Rand(size_t(B) * H, 7);
  Dev<float> dz_(z), db(bias), dcp(cp), dc(size_t(B) * H), dhh(size_t(B) * H);
  cuda::LstmCellForward(dz_.get(), db.get(), dcp.get(), dc.get(), dhh.get(), B, H, nullptr);
  std::vector<float> gates = dz_.Get(), c = dc.Get(), h = dhh.Get();
  auto cell = [&](int b, int j, const double* zz, double cprev, double* cout) {
    double i = Reference::Sig(zz[0] + bias[j]), f = Reference::Sig(zz[1] + bias[H + j]);
    double g = std::tanh(zz[2] + bias[2 * H + j]), o = Reference::Sig(zz[3] + bias[3 * H + j]);
    *cout = f * cprev + i * g;
    return o * std::tanh(*cout);
  };
  for (int b = 0; b < B; ++b) {
    for (int j = 0; j < H; ++j) {
      double zz[4];
      for (int k = 0; k < 4; ++k) zz[k] = z[size_t(b) * 4 * H + k * H + j];
      double cc, hh = cell(b, j, zz, cp[b * H + j], &cc);
      EXPECT_NEAR(c[b * H + j], cc, 1e-6);
      EXPECT_NEAR(h[b * H + j], hh, 1e-6);
      EXPECT_NEAR(gates[size_t(b) * 4 * H + j], Reference::Sig(zz[0] + bias[j]), 1e-6);
    }
  }
  Dev<float> ddh(dh), ddc(dcin), ddz(size_t(B) * 4 * H), dgates(gates), dcc(c), dcp2(cp);
  cuda::LstmCellBackward(dgates.get(), dcc.get(), dcp2.get(), ddh.get(), ddc.get(), ddz.get(), B, H,
                         nullptr);
  std::vector<float> gz = ddz.Get(), gc = ddc.Get();
  for (int b = 0; b < B; ++b) {
    for (int j = 0; j < H; ++j) {
      const int e = b * H + j;
      auto S = [&](const double* zz, double cprev) {
        double cc, hh = cell(b, j, zz, cprev, &cc);
        return dh[e] * hh + dcin[e] * cc;
      };
      double zz[4];
      for (int k = 0; k < 4; ++k) zz[k] = z[size_t(b) * 4 * H + k * H + j];
      const double eps = 1e-6;
      for (int k = 0; k < 4; ++k) {
        double up[4], dn[4];
        std::copy(zz, zz + 4, up);
        std::copy(zz, zz + 4, dn);
        up[k] += eps;
        dn[k] -= eps;
        double fd = (S(up, cp[e]) - S(dn, cp[e])) / (2 * eps);
        EXPECT_NEAR(gz[size_t(b) * 4 * H + k * H + j], fd, 1e-5) << "gate " << k;
      }
      double fdc = (S(zz, cp[e] + eps) - S(zz, cp[e] - eps)) / (2 * eps);
      EXPECT_NEAR(gc[e], fdc, 1e-5);
    }
  }
}

// The GRU cell kernels (Keras, reset_after) against the formula of
// model/network.h and, for the backward, central differences of
// S = (dh + carry) * h with respect to a, u (bias-free) and h_prev's direct path.
TEST(CudaKernelTest, GruCell) {
  DS_REQUIRE_GPU();
  const int B = 3, H = 37, H3 = 3 * H;
  std::vector<float> a = Rand(size_t(B) * H3, 13, 2.0f), u = Rand(size_t(B) * H3, 14, 2.0f),
                     bias = Rand(2 * H3, 15), hp = Rand(size_t(B) * H, 16),
                     dh = Rand(size_t(B) * H, 17), cin = Rand(size_t(B) * H, 18);
  Dev<float> da(a), du(u), db(bias), dhp(hp), dho(size_t(B) * H);
  cuda::GruCellForward(da.get(), du.get(), db.get(), dhp.get(), dho.get(), B, H, nullptr);
  std::vector<float> gates = da.Get(), uo = du.Get(), h = dho.Get();
  auto cell = [&](int j, const double* aa, const double* uu, double hprev, double* g) {
    double z = Reference::Sig(aa[0] + bias[j] + uu[0] + bias[H3 + j]);
    double r = Reference::Sig(aa[1] + bias[H + j] + uu[1] + bias[H3 + H + j]);
    double n = std::tanh(aa[2] + bias[2 * H + j] + r * (uu[2] + bias[H3 + 2 * H + j]));
    if (g) g[0] = z, g[1] = r, g[2] = n;
    return z * hprev + (1 - z) * n;
  };
  auto load = [&](const std::vector<float>& v, int b, int j, double* out) {
    for (int k = 0; k < 3; ++k) out[k] = v[size_t(b) * H3 + k * H + j];
  };
  for (int b = 0; b < B; ++b) {
    for (int j = 0; j < H; ++j) {
      double aa[3], uu[3], g[3];
      load(a, b, j, aa);
      load(u, b, j, uu);
      EXPECT_NEAR(h[b * H + j], cell(j, aa, uu, hp[b * H + j], g), 1e-6);
      for (int k = 0; k < 3; ++k) EXPECT_NEAR(gates[size_t(b) * H3 + k * H + j], g[k], 1e-6);
      EXPECT_NEAR(uo[size_t(b) * H3 + 2 * H + j], uu[2] + bias[H3 + 2 * H + j], 1e-6);
    }
  }
  Dev<float> dg(gates), du2(uo), dhp2(hp), ddh(dh), dcarry(cin), dzx(size_t(B) * H3),
      dzh(size_t(B) * H3);
  cuda::GruCellBackward(dg.get(), du2.get(), dhp2.get(), ddh.get(), dcarry.get(), dzx.get(),
                        dzh.get(), B, H, nullptr);
  std::vector<float> gx = dzx.Get(), gh = dzh.Get(), carry = dcarry.Get();
  const double eps = 1e-6;
  for (int b = 0; b < B; ++b) {
    for (int j = 0; j < H; ++j) {
      const int e = b * H + j;
      const double D = double(dh[e]) + cin[e];
      double aa[3], uu[3];
      load(a, b, j, aa);
      load(u, b, j, uu);
      for (int k = 0; k < 3; ++k) {
        for (int side = 0; side < 2; ++side) {
          double* x = side == 0 ? aa : uu;
          const double keep = x[k];
          x[k] = keep + eps;
          double up = D * cell(j, aa, uu, hp[e], nullptr);
          x[k] = keep - eps;
          double dn = D * cell(j, aa, uu, hp[e], nullptr);
          x[k] = keep;
          const auto& got = side == 0 ? gx : gh;
          EXPECT_NEAR(got[size_t(b) * H3 + k * H + j], (up - dn) / (2 * eps), 1e-5)
              << (side == 0 ? "dzx" : "dzh") << " gate " << k;
        }
      }
      const double hi = cell(j, aa, uu, hp[e] + eps, nullptr);
      const double lo = cell(j, aa, uu, hp[e] - eps, nullptr);
      const double fd = D * (hi - lo) / (2 * eps);
      EXPECT_NEAR(carry[e], fd, 1e-5) << "carry (direct path to h_prev)";
    }
  }
}

// Softmax-CE on wide rows (V = 20000, as the default SentencePiece vocab),
// ties resolved to the lowest index, zero weights.
TEST(CudaKernelTest, SoftmaxCrossEntropyWideRows) {
  DS_REQUIRE_GPU();
  const int N = 4, V = 20000;
  std::vector<float> logits = Rand(size_t(N) * V, 8, 5.0f), bias = Rand(V, 9, 0.5f);
  for (int v = 0; v < V; ++v) logits[size_t(3) * V + v] = -bias[v];  // row 3: all equal
  std::vector<int32_t> tgt = {17, 19999, 0, 0};
  std::vector<float> w = {1.0f, 0.0f, 2.0f, 1.0f};
  Dev<float> dl(logits), db(bias), dw(w), rows(2 * N);
  Dev<int32_t> dt(tgt);
  const float scale = 0.25f;
  cuda::SoftmaxCrossEntropy(dl.get(), db.get(), dt.get(), dw.get(), nullptr, nullptr, N, V, true,
                            scale, rows.get(), rows.get() + N, nullptr);
  std::vector<float> grad = dl.Get(), r = rows.Get();
  for (int n = 0; n < N; ++n) {
    std::vector<double> l(V);
    for (int v = 0; v < V; ++v) l[v] = double(logits[size_t(n) * V + v]) + bias[v];
    double m = *std::max_element(l.begin(), l.end()), s = 0;
    for (double x : l) s += std::exp(x - m);
    int am = int(std::max_element(l.begin(), l.end()) - l.begin());  // first maximum
    EXPECT_NEAR(r[n], w[n] * (m + std::log(s) - l[tgt[n]]), 1e-4) << n;
    EXPECT_EQ(r[N + n], am == tgt[n] ? w[n] : 0.0f) << n;
    for (int v = 0; v < V; v += 97) {
      double want = scale * w[n] * (std::exp(l[v] - m) / s - (v == tgt[n]));
      EXPECT_NEAR(grad[size_t(n) * V + v], want, 1e-7) << n << "," << v;
    }
  }
  EXPECT_EQ(r[N + 3], 1.0f);  // all-equal row: argmax 0 == target
}

#else  // !DS_HAVE_CUDA

TEST(CudaBackendTest, NotBuilt) { GTEST_SKIP() << "no GPU: this datasynth was built without CUDA"; }

#endif

}  // namespace
}  // namespace ds
