// The datasynth network (the reference's default, docs/reference.md §1), with a
// choice of recurrent cell (NetworkSpec::architecture):
//
//   x_t   = E[tok_t]                                   embedding, E: [V, Emb]
//   x_t   = dropout(x_t)
//   for each layer l = 0..L-1 (input size In = Emb for l = 0, else H):
//     h_t = cell_l(x_t, state_{t-1})                   h_t: [H], state zero at t = 0
//     x_t = dropout(h_t)                               input of the next layer
//   logits_t = x_t Wd + bd                             Wd: [H, V], bd: [V]
//   loss = sum_t w_t * CE_t / sum_t w_t
//   CE_t = -log softmax(logits_t[lo_t : hi_t])[target_t - lo_t]
//
// [lo_t, hi_t) are the ids legal for target t (Batch::legal_lo/hi,
// tokenize/legal_ranges.h): for the field tokenizer, the ids of the target's
// (column, part), the range generation samples from; for char and
// SentencePiece, and batches without ranges, the whole vocabulary [0, V)
// (the plain softmax CE). Only the slice's logits enter the loss, so dWd and
// dbd are zero outside it and the dense GEMMs of a position cost H x (hi - lo)
// instead of H x V. model_params.json's "loss" says which: "legal" or "full".
//
// lstm (Keras LSTM), state (h, c), G = 4 gates in the order i, f, g, o:
//     z_t = x_t Wx + h_{t-1} Wh + b                    Wx: [In, 4H], Wh: [H, 4H], b: [4H]
//     i = sigmoid(z_i)  f = sigmoid(z_f)  g = tanh(z_g)  o = sigmoid(z_o)
//     c_t = f * c_{t-1} + i * g
//     h_t = o * tanh(c_t)
//
// gru (Keras GRU with reset_after = true, its default), state h, G = 3 gates in
// the order z (update), r (reset), n (candidate); b: [2, 3H], row 0 the input
// bias bx, row 1 the recurrent bias bh:
//     a_t = x_t Wx + bx                                Wx: [In, 3H], a: [3H]
//     u_t = h_{t-1} Wh + bh                            Wh: [H, 3H],  u: [3H]
//     z = sigmoid(a_z + u_z)  r = sigmoid(a_r + u_r)
//     n = tanh(a_n + r * u_n)                          (reset applied AFTER Wh)
//     h_t = z * h_{t-1} + (1 - z) * n
//
// Every parameter lives in ONE contiguous float buffer laid out by ParamLayout,
// a list of named tensors built per architecture (and the gradients in a second
// buffer of the same layout), so that an optimizer, a gradient all-reduce, a
// checksum, a device copy or a model file is a single loop / call over `total`
// floats, and code that needs names or shapes (model info, tests, gradient
// checks) iterates the list. All matrices are row-major.
//
// Initialisation (Keras defaults), per tensor (ParamTensor::init): embedding
// uniform(-0.05, 0.05); Wx glorot_uniform; Wh per `rnn_initializer`
// (glorot_uniform by default, orthogonal selectable); biases zero except the
// LSTM forget gate, which is 1; dense glorot_uniform, bias zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace ds {

enum class Architecture { kLstm, kGru };

// "lstm", "gru".
const char* ArchitectureName(Architecture a);
// For messages: "LSTM", "GRU".
const char* ArchitectureLabel(Architecture a);
// The inverse of ArchitectureName; kInvalidArgument naming the value otherwise.
Result<Architecture> ParseArchitecture(std::string_view name);
// Gates per unit: 4 (lstm), 3 (gru).
int GateCount(Architecture a);
// Every architecture, for tests and help texts.
inline constexpr Architecture kAllArchitectures[] = {Architecture::kLstm, Architecture::kGru};

struct NetworkSpec {
  int vocab_size = 0;      // V
  int embedding_dim = 256; // Emb
  int rnn_units = 256;     // H
  int num_layers = 2;      // L
  float dropout_rate = 0.2f;
  Architecture architecture = Architecture::kLstm;

  bool operator==(const NetworkSpec&) const = default;
};

// How InitParams fills one tensor. `stream` selects the Philox stream (one per
// tensor, so that changing one tensor's shape does not change the others).
struct InitRule {
  enum Kind {
    kZero,        // zeros
    kUniform005,  // uniform(-0.05, 0.05) (Keras Embedding)
    kGlorot,      // glorot_uniform with fan_in = shape[0], fan_out = shape[1]
    kRecurrent,   // glorot_uniform or orthogonal, per rnn_initializer
    kLstmBias,    // zeros, the forget-gate quarter [H, 2H) ones (unit_forget_bias)
  };
  Kind kind = kZero;
  uint64_t stream = 0;
};

// One named tensor of the parameter buffer.
struct ParamTensor {
  std::string name;            // "embedding", "lstm0.wx", "gru1.b", "dense.w", ...
  std::vector<int64_t> shape;  // row-major
  size_t offset = 0;           // in floats, into the buffer; a multiple of 16
  InitRule init;
  size_t size() const {
    size_t n = 1;
    for (auto d : shape) n *= size_t(d);
    return n;
  }
};

// The parameter buffer of a NetworkSpec: tensors in buffer order
//   embedding [V, Emb];
//   per layer l, prefix "<architecture><l>" (lstm0, gru0, ...):
//     .wx [In, G H], .wh [H, G H], .b [G H] (lstm) or [2, G H] (gru);
//   dense.w [H, V], dense.b [V].
// Each tensor starts on a 16-float (64-byte) boundary so that SIMD loads and
// device copies of a single tensor stay aligned; padding is zero.
struct ParamLayout {
  Architecture architecture = Architecture::kLstm;
  std::vector<ParamTensor> tensors;
  size_t total = 0;  // floats in the buffer, including alignment padding

  static ParamLayout For(const NetworkSpec& spec);

  // The tensor called `name`; throws ds::Error (kInternal) when absent.
  const ParamTensor& at(std::string_view name) const;
  size_t offset(std::string_view name) const { return at(name).offset; }

  // Offsets of recurrent layer l (what the backends index with).
  struct RnnLayer {
    size_t wx = 0;  // [In, G H]
    size_t wh = 0;  // [H, G H]
    size_t b = 0;   // [G H] (lstm) / [2, G H] (gru)
    int in = 0;     // In
  };
  RnnLayer layer(int l) const;
};

// Fills `params` ([layout.total]) by each tensor's InitRule.
// rnn_initializer: "glorot_uniform" or "orthogonal".
void InitParams(const NetworkSpec& spec, const std::string& rnn_initializer, uint64_t seed,
                float* params);

// Multiply-add FLOPs of one training step (forward + backward) per token,
// counting 2 per multiply-add, for GFLOP/s figures.
double TrainFlopsPerToken(const NetworkSpec& spec);
double InferFlopsPerToken(const NetworkSpec& spec);

}  // namespace ds
