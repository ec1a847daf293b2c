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

const char* ArchitectureName(Architecture a) {
  switch (a) {
    case Architecture::kLstm:
      return "lstm";
    case Architecture::kGru:
      return "gru";
  }
  return "?";
}

const char* ArchitectureLabel(Architecture a) { return a == Architecture::kGru ? "GRU" : "LSTM"; }

Result<Architecture> ParseArchitecture(std::string_view name) {
  for (Architecture a : kAllArchitectures)
    if (name == ArchitectureName(a)) return a;
  return DS_ERR(kInvalidArgument, "architecture: unknown value '{}' (lstm, gru)", name);
}

int GateCount(Architecture a) { return a == Architecture::kGru ? 3 : 4; }

ParamLayout ParamLayout::For(const NetworkSpec& spec) {
  ParamLayout p;
  p.architecture = spec.architecture;
  const int64_t V = spec.vocab_size, E = spec.embedding_dim, H = spec.rnn_units;
  const int64_t GH = GateCount(spec.architecture) * H;
  const bool gru = spec.architecture == Architecture::kGru;
  size_t off = 0;
  auto add = [&](std::string name, std::vector<int64_t> shape, InitRule init) {
    ParamTensor t{std::move(name), std::move(shape), off, init};
    off = Align16(off + t.size());
    p.tensors.push_back(std::move(t));
  };
  add("embedding", {V, E}, {InitRule::kUniform005, kEmbStream});
  for (int l = 0; l < spec.num_layers; ++l) {
    const std::string pre = ArchitectureName(spec.architecture) + std::to_string(l);
    const int64_t in = l == 0 ? E : H;
    const uint64_t s = kLayerStream + 3 * uint64_t(l);
    add(pre + ".wx", {in, GH}, {InitRule::kGlorot, s});
    add(pre + ".wh", {H, GH}, {InitRule::kRecurrent, s + 1});
    if (gru) {
      add(pre + ".b", {2, GH}, {InitRule::kZero, 0});
    } else {
      add(pre + ".b", {GH}, {InitRule::kLstmBias, 0});
    }
  }
  add("dense.w", {H, V}, {InitRule::kGlorot, kDenseStream});
  add("dense.b", {V}, {InitRule::kZero, 0});
  p.total = off;
  return p;
}

const ParamTensor& ParamLayout::at(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return t;
  DS_THROW(kInternal, "parameter layout ({}) has no tensor '{}'", ArchitectureName(architecture),
           name);
}

ParamLayout::RnnLayer ParamLayout::layer(int l) const {
  const std::string pre = ArchitectureName(architecture) + std::to_string(l);
  const ParamTensor& wx = at(pre + ".wx");
  return {wx.offset, offset(pre + ".wh"), offset(pre + ".b"), int(wx.shape[0])};
}

void InitParams(const NetworkSpec& spec, const std::string& rnn_initializer, uint64_t seed,
                float* params) {
  if (rnn_initializer != "glorot_uniform" && rnn_initializer != "orthogonal") {
    DS_THROW(kInvalidArgument, "rnn_initializer: unknown value '{}' (glorot_uniform, orthogonal)",
             rnn_initializer);
  }
  const ParamLayout p = ParamLayout::For(spec);
  for (size_t i = 0; i < p.total; ++i) params[i] = 0.0f;  // padding and zero tensors
  for (const ParamTensor& t : p.tensors) {
    float* out = params + t.offset;
    Philox rng(seed, t.init.stream);
    switch (t.init.kind) {
      case InitRule::kZero:
        break;
      case InitRule::kUniform005:
        FillUniform(rng, -0.05f, 0.05f, out, t.size());
        break;
      case InitRule::kGlorot:
        Glorot(rng, int(t.shape[0]), int(t.shape[1]), out, t.size());
        break;
      case InitRule::kRecurrent:
        if (rnn_initializer == "orthogonal") {
          Orthogonal(rng, int(t.shape[0]), int(t.shape[1]), out);
        } else {
          Glorot(rng, int(t.shape[0]), int(t.shape[1]), out, t.size());
        }
        break;
      case InitRule::kLstmBias: {
        const size_t H = t.size() / 4;
        for (size_t u = H; u < 2 * H; ++u) out[u] = 1.0f;
        break;
      }
    }
  }
}

// Multiply-adds per token of the forward pass: per layer x Wx and h Wh
// (G H (In + H), G = GateCount), and the dense layer (H V). The backward pass costs twice the
// forward (dX = dZ W^T and dW = X^T dZ for every matrix, including layer 0's dX
// which feeds the embedding gradient), so training = 3 x forward. Elementwise
// work, softmax and the embedding lookup are not counted.
double InferFlopsPerToken(const NetworkSpec& spec) {
  double H = spec.rnn_units, G = GateCount(spec.architecture), macs = 0;
  for (int l = 0; l < spec.num_layers; ++l) {
    double in = l == 0 ? spec.embedding_dim : spec.rnn_units;
    macs += G * H * (in + H);
  }
  macs += H * spec.vocab_size;
  return 2 * macs;
}

double TrainFlopsPerToken(const NetworkSpec& spec) { return 3 * InferFlopsPerToken(spec); }

}  // namespace ds
