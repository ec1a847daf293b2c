#include "model/network.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "util/rng.h"
#include "util/status.h"

namespace ds {
namespace {

size_t Align16(size_t n) { return (n + 15) & ~size_t(15); }

// Philox streams of InitParams, one per tensor so that changing one tensor's
// shape does not change the draws of the others.
enum InitStream : uint64_t { kEmbStream = 1, kDenseStream = 2, kLayerStream = 16 };

void FillUniform(Philox& rng, float lo, float hi, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = lo + (hi - lo) * rng.Uniform();
}

void Glorot(Philox& rng, int fan_in, int fan_out, float* out, size_t n) {
  float limit = std::sqrt(6.0f / float(fan_in + fan_out));
  FillUniform(rng, -limit, limit, out, n);
}

// Keras Orthogonal(gain 1) for a [rows, cols] matrix: a normal [max, min]
// matrix is orthonormalised (QR with sign(diag(R)) folded in, which is what
// modified Gram-Schmidt yields), transposed when rows < cols.
void Orthogonal(Philox& rng, int rows, int cols, float* out) {
  int big = std::max(rows, cols), small = std::min(rows, cols);
  std::vector<double> a(size_t(big) * small);  // [big, small], columns get orthonormalised
  for (auto& x : a) x = rng.Normal();
  for (int j = 0; j < small; ++j) {
    for (int k = 0; k < j; ++k) {
      double dot = 0;
      for (int i = 0; i < big; ++i) dot += a[size_t(i) * small + j] * a[size_t(i) * small + k];
      for (int i = 0; i < big; ++i) a[size_t(i) * small + j] -= dot * a[size_t(i) * small + k];
    }
    double norm = 0;
    for (int i = 0; i < big; ++i) norm += a[size_t(i) * small + j] * a[size_t(i) * small + j];
    norm = std::sqrt(norm);
    for (int i = 0; i < big; ++i) a[size_t(i) * small + j] /= norm;
  }
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      out[size_t(r) * cols + c] =
          float(rows >= cols ? a[size_t(r) * small + c] : a[size_t(c) * small + r]);
}

}  // namespace

ParamLayout ParamLayout::For(const NetworkSpec& spec) {
  ParamLayout p;
  const size_t V = spec.vocab_size, E = spec.embedding_dim, H = spec.rnn_units;
  size_t off = 0;
  p.embedding = off;
  off = Align16(off + V * E);
  for (int l = 0; l < spec.num_layers; ++l) {
    Layer layer;
    layer.in = l == 0 ? int(E) : int(H);
    layer.wx = off;
    off = Align16(off + size_t(layer.in) * 4 * H);
    layer.wh = off;
    off = Align16(off + H * 4 * H);
    layer.b = off;
    off = Align16(off + 4 * H);
    p.layers.push_back(layer);
  }
  p.dense_w = off;
  off = Align16(off + H * V);
  p.dense_b = off;
  off = Align16(off + V);
  p.total = off;
  return p;
}

std::vector<ParamLayout::Tensor> ParamLayout::Tensors(const NetworkSpec& spec) const {
  const int64_t V = spec.vocab_size, E = spec.embedding_dim, H = spec.rnn_units;
  std::vector<Tensor> t;
  t.push_back({"embedding", embedding, {V, E}});
  for (size_t l = 0; l < layers.size(); ++l) {
    std::string p = "lstm" + std::to_string(l);
    t.push_back({p + ".wx", layers[l].wx, {layers[l].in, 4 * H}});
    t.push_back({p + ".wh", layers[l].wh, {H, 4 * H}});
    t.push_back({p + ".b", layers[l].b, {4 * H}});
  }
  t.push_back({"dense.w", dense_w, {H, V}});
  t.push_back({"dense.b", dense_b, {V}});
  return t;
}

void InitParams(const NetworkSpec& spec, const std::string& rnn_initializer, uint64_t seed,
                float* params) {
  if (rnn_initializer != "glorot_uniform" && rnn_initializer != "orthogonal") {
    DS_THROW(kInvalidArgument, "rnn_initializer: unknown value '{}' (glorot_uniform, orthogonal)",
             rnn_initializer);
  }
  const ParamLayout p = ParamLayout::For(spec);
  const int V = spec.vocab_size, E = spec.embedding_dim, H = spec.rnn_units;
  for (size_t i = 0; i < p.total; ++i) params[i] = 0.0f;  // padding and biases
  {
    Philox rng(seed, kEmbStream);
    FillUniform(rng, -0.05f, 0.05f, params + p.embedding, size_t(V) * E);
  }
  for (int l = 0; l < spec.num_layers; ++l) {
    const auto& L = p.layers[l];
    Philox rx(seed, kLayerStream + 3 * l), rh(seed, kLayerStream + 3 * l + 1);
    Glorot(rx, L.in, 4 * H, params + L.wx, size_t(L.in) * 4 * H);
    if (rnn_initializer == "orthogonal") {
      Orthogonal(rh, H, 4 * H, params + L.wh);
    } else {
      Glorot(rh, H, 4 * H, params + L.wh, size_t(H) * 4 * H);
    }
    for (int u = 0; u < H; ++u) params[L.b + H + u] = 1.0f;  // forget gate (unit_forget_bias)
  }
  Philox rd(seed, kDenseStream);
  Glorot(rd, H, V, params + p.dense_w, size_t(H) * V);
}

// Multiply-adds per token of the forward pass: per layer x Wx and h Wh
// (4H (In + H)), and the dense layer (H V). The backward pass costs twice the
// forward (dX = dZ W^T and dW = X^T dZ for every matrix, including layer 0's dX
// which feeds the embedding gradient), so training = 3 x forward. Elementwise
// work, softmax and the embedding lookup are not counted.
double InferFlopsPerToken(const NetworkSpec& spec) {
  double H = spec.rnn_units, macs = 0;
  for (int l = 0; l < spec.num_layers; ++l) {
    double in = l == 0 ? spec.embedding_dim : spec.rnn_units;
    macs += 4 * H * (in + H);
  }
  macs += H * spec.vocab_size;
  return 2 * macs;
}

double TrainFlopsPerToken(const NetworkSpec& spec) { return 3 * InferFlopsPerToken(spec); }

}  // namespace ds
