// The datasynth network (the reference's default, ANCHOR.md section 1):
//
//   x_t   = E[tok_t]                                   embedding, E: [V, Emb]
//   x_t   = dropout(x_t)
//   for each layer l = 0..L-1 (input size In = Emb for l = 0, else H):
//     z_t = x_t Wx_l + h_{t-1} Wh_l + b_l              z: [4H], gate order i, f, g, o
//     i = sigmoid(z_i)  f = sigmoid(z_f)  g = tanh(z_g)  o = sigmoid(z_o)
//     c_t = f * c_{t-1} + i * g
//     h_t = o * tanh(c_t)
//     x_t = dropout(h_t)                               input of the next layer
//   logits_t = x_t Wd + bd                             Wd: [H, V]
//   loss = sum_t w_t * CE(softmax(logits_t), target_t) / sum_t w_t
//
// Every parameter lives in ONE contiguous float buffer laid out by ParamLayout
// (and the gradients in a second buffer of the same layout), so that an
// optimizer, a gradient all-reduce (MPI), a checksum or a device copy is a
// single loop / call over `total` floats. All matrices are row-major.
//
// Initialisation (Keras defaults): embedding uniform(-0.05, 0.05); Wx
// glorot_uniform; Wh per `rnn_initializer` (glorot_uniform by default,
// orthogonal selectable); biases zero except the forget gate, which is 1;
// dense glorot_uniform, bias zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ds {

struct NetworkSpec {
  int vocab_size = 0;      // V
  int embedding_dim = 256; // Emb
  int rnn_units = 256;     // H
  int num_layers = 2;      // L
  float dropout_rate = 0.2f;

  bool operator==(const NetworkSpec&) const = default;
};

// Offsets (in floats) of each tensor inside the flat parameter buffer. Each
// tensor starts on a 16-float (64-byte) boundary so that SIMD loads and device
// copies of a single tensor stay aligned.
struct ParamLayout {
  struct Layer {
    size_t wx = 0;  // [In, 4H]
    size_t wh = 0;  // [H, 4H]
    size_t b = 0;   // [4H]
    int in = 0;     // In
  };
  size_t embedding = 0;  // [V, Emb]
  std::vector<Layer> layers;
  size_t dense_w = 0;  // [H, V]
  size_t dense_b = 0;  // [V]
  size_t total = 0;    // floats in the buffer, including alignment padding

  static ParamLayout For(const NetworkSpec& spec);

  // Named views, for model files, `info`, tests and gradient checks.
  struct Tensor {
    std::string name;  // "embedding", "lstm0.wx", ..., "dense.b"
    size_t offset;
    std::vector<int64_t> shape;
    size_t size() const {
      size_t n = 1;
      for (auto d : shape) n *= size_t(d);
      return n;
    }
  };
  std::vector<Tensor> Tensors(const NetworkSpec& spec) const;
};

// Fills `params` ([layout.total]) with the initial weights described above.
// rnn_initializer: "glorot_uniform" or "orthogonal".
void InitParams(const NetworkSpec& spec, const std::string& rnn_initializer, uint64_t seed,
                float* params);

// Multiply-add FLOPs of one training step (forward + backward) per token,
// counting 2 per multiply-add, for GFLOP/s figures.
double TrainFlopsPerToken(const NetworkSpec& spec);
double InferFlopsPerToken(const NetworkSpec& spec);

}  // namespace ds
