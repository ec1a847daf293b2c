// The CUDA backend's fused kernels, as host-callable launchers. All pointers
// are DEVICE pointers; every launch is asynchronous on `stream` and checked
// with DS_CUDA_CHECK_LAUNCH (throws ds::Error). This header has no CUDA
// includes so that tests and .cc files compiled by the host compiler can use it.
//
// Activations of a [B, T] batch are stored TIME-MAJOR, row r = t * B + b, so
// that the rows of one time step are contiguous for the recurrent GEMM.
//
// Dropout masks (the CPU backend's scheme, so both backends drop the same
// units): dropout site s (0 = the embedding output, l + 1 = the output of LSTM
// layer l) at time step t of a step with seed S uses the counter-based stream
// ds::Philox(S, (s << 32) | t). Within that step the [B, W] activations are
// numbered i = b * W + j; element i uses the (i / 2)-th 32-bit draw of the
// stream, its low 16 bits for even i and its high 16 bits for odd i, and is
// kept iff those 16 bits >= lround(rate * 65536). Kept values are scaled by
// 1 / (1 - rate). Each element's draw is computed independently (draw k is
// word k % 4 of the Philox block with counter k / 4), so the masks do not
// depend on the launch configuration, and the backward pass recomputes them
// instead of storing them.
#pragma once

#include <cstddef>
#include <cstdint>

struct CUstream_st;

namespace ds::cuda {

using Stream = CUstream_st*;

// x[r, :] = E[tokens[r], :] * mask(seed, site 0), r = t * B + b.
// table [V, E], tokens [T*B], out [T*B, E]. rate 0 (or !train) copies.
void EmbeddingDropoutForward(const float* table, const int32_t* tokens, int T, int B, int E,
                             float rate, uint64_t seed, bool train, float* out, Stream stream);

// dst[i] = src[i] rounded to bfloat16 (nearest even; its 16-bit pattern), for
// the bf16 GEMMs of precision bf16 (backend/precision.h).
void RoundToBf16(const float* src, size_t n, uint16_t* dst, Stream stream);

// out = in * mask(seed, site) (in may equal out). in/out [T*B, W] time-major.
// Also the dropout backward (the same mask applied to the gradient).
void Dropout(const float* in, float* out, int T, int B, int W, float rate, uint64_t seed,
             uint64_t site, Stream stream);

// One LSTM time step, forward. z [B, 4H] holds x Wx + h_prev Wh (no bias) on
// entry and the activated gates (i, f, g, o) on exit; bias [4H];
// c_prev, c, h [B, H]:  c = f * c_prev + i * g,  h = o * tanh(c).
void LstmCellForward(float* z, const float* bias, const float* c_prev, float* c, float* h, int B,
                     int H, Stream stream);

// One LSTM time step, backward. gates [B, 4H] (activated, from the forward),
// c, c_prev [B, H]; dh [B, H] = dL/dh_t (all paths); dc [B, H]: dL/dc_t from
// step t+1 on entry, dL/dc_{t-1} on exit; dz [B, 4H] = dL/d(pre-activations).
void LstmCellBackward(const float* gates, const float* c, const float* c_prev, const float* dh,
                      float* dc, float* dz, int B, int H, Stream stream);

// One GRU time step, forward (model/network.h: Keras, reset_after, gates z, r,
// n). a [B, 3H] holds x Wx (no bias) on entry and the activated z, r, n on
// exit; u [B, 3H] holds h_prev Wh (no bias) on entry and, in its n third,
// u_n + bh_n on exit (the backward's dr needs it); bias [2, 3H] = bx, bh;
// h_prev, h [B, H]:  h = z * h_prev + (1 - z) * n.
void GruCellForward(float* a, float* u, const float* bias, const float* h_prev, float* h, int B,
                    int H, Stream stream);

// One GRU time step, backward. gates [B, 3H] and u [B, 3H] as left by the
// forward, h_prev [B, H]; dh [B, H] = dL/dh_t from the layer above and the
// recurrent GEMM; carry [B, H]: dh_{t+1} z_{t+1} on entry, dh_t z_t on exit
// (the direct path to h_{t-1}); dzx, dzh [B, 3H] = dL/d(x-side, h-side
// pre-activations): dzx = [dz, dr, dn], dzh = [dz, dr, dn * r].
void GruCellBackward(const float* gates, const float* u, const float* h_prev, const float* dh,
                     float* carry, float* dzx, float* dzh, int B, int H, Stream stream);

// Softmax cross-entropy over rows of logits [N, V] (without bias; bias [V] is
// added here). targets [N], weights [N] (nullptr = all ones). Writes
// row_loss[r] = w_r * CE_r and row_correct[r] = w_r * [argmax_r == target_r]
// (argmax: the lowest index among equal maxima). With want_grad, overwrites
// logits with dL/dlogits = grad_scale * w_r * (softmax_r - onehot(target_r)).
// lo, hi [N] (both nullptr = the whole vocabulary): row r's softmax runs over
// ids [lo_r, hi_r) only (the logits outside count as -inf: their dlogits are
// 0 and they never win the argmax), the "legal" loss of model/network.h.
void SoftmaxCrossEntropy(float* logits, const float* bias, const int32_t* targets,
                         const float* weights, const int32_t* lo, const int32_t* hi, int N, int V,
                         bool want_grad, float grad_scale, float* row_loss, float* row_correct,
                         Stream stream);

// Embedding gradient without atomics (deterministic): token uniq[u] gets
// dtable[uniq[u], :] = sum over p in [offsets[u], offsets[u+1]) of
// dx[positions[p], :] * mask(seed, site 0). dx [T*B, E] is the gradient w.r.t.
// the dropped embedding output; rows of tokens absent from the batch are not
// written (zero them first).
void EmbeddingBackward(const float* dx, const int32_t* uniq, const int32_t* offsets,
                       const int32_t* positions, int U, int T, int B, int E, float rate,
                       uint64_t seed, bool train, float* dtable, Stream stream);

// RMSprop as the project defines it (Keras semantics, no momentum):
//   ms = rho * ms + (1 - rho) * g^2;   p -= lr * g / sqrt(ms + eps)
void RmspropUpdate(float* p, const float* g, float* ms, size_t n, float lr, float rho, float eps,
                   Stream stream);

// Adam (Keras): m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
//   p -= lr_t * m / (sqrt(v) + eps), lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t).
void AdamUpdate(float* p, const float* g, float* m, float* v, size_t n, float lr_t, float b1,
                float b2, float eps, Stream stream);

// dst[k, :] = src[idx[k], :]; src [S, W], idx [n], dst [n, W].
void GatherRows(const float* src, const int32_t* idx, int n, int W, float* dst, Stream stream);

// Inference LSTM step for n slots: z [n, 4H] (x Wx + h_prev Wh, no bias),
// bias [4H], slots [n]; reads c_state[slots[k]], writes h_state/c_state rows
// of slots[k] ([S, H] each) and x_out[k, :] = h ([n, H]).
void LstmCellInfer(const float* z, const float* bias, const int32_t* slots, float* h_state,
                   float* c_state, float* x_out, int n, int H, Stream stream);

// Inference GRU step for n slots: a [n, 3H] = x Wx, u [n, 3H] = h_prev Wh (no
// biases), bias [2, 3H], slots [n]; reads and writes h_state[slots[k]] ([S, H])
// and x_out[k, :] = h ([n, H]).
void GruCellInfer(const float* a, const float* u, const float* bias, const int32_t* slots,
                  float* h_state, float* x_out, int n, int H, Stream stream);

// out[k, :] = row[:] for k < n; row [W], out [n, W].
void BroadcastRow(const float* row, int n, int W, float* out, Stream stream);

}  // namespace ds::cuda
