// The CPU backend (the oracle every other backend is tested against), with the
// few extras beyond backend.h that tests, benchmarks and tools use.
//
// Training step (TrainBackend::Step), B sequences of T steps, R = T*B rows kept
// TIME-MAJOR internally (row r = t*B + b, so that one timestep is one
// contiguous [B, .] block):
//
//   forward   x0 = dropout0(E[tok])                                [R, Emb]
//             per layer l: Zx = X_l Wx_l            ONE GEMM        [R, 4H]
//                          for t: z_t = Zx_t + h_{t-1} Wh_l + b     per-step GEMM [B, 4H]
//                                 gates, c_t, h_t                  fused elementwise
//                          X_{l+1} = dropout_{l+1}(H_l)
//             logits = X_L Wd + bd, softmax cross-entropy           row chunks per thread
//               (legal ranges: rows grouped by range, each group's logits
//               only over its ids, X_g Wd[:, lo:hi], and its gradients on
//               that column slice; DenseStage / PlanDense)
//   backward  dlogits = w_r (softmax - onehot) / sum_r w_r
//             dWd = X_L^T dlogits, dbd = colsum, dX_L = dlogits Wd^T
//             per layer (top down): for t = T-1..0:
//                          dh_t = dropout'(dX_{l+1})_t + dz_{t+1} Wh^T   per-step GEMM
//                          dc_t, dz_t                                  fused elementwise
//                          dWh = H_{prev}^T dZ, dWx = X_l^T dZ, dX_l = dZ Wx^T,
//                          db = colsum dZ                             big GEMMs after the loop
//             dE[tok_r] += dropout0'(dX_0)_r
//
// The GRU (architecture gru, model/network.h) runs the same scheme with G = 3
// gates: Zx = X Wx as one GEMM; per step and thread, its columns of
// U = h_{t-1} Wh go to a separate [B, 3H] buffer (the reset gate multiplies
// U's n part, so it cannot be summed into Zx), then the fused GruCell; the
// backward keeps two gradients, dZx (x side: dWx, dX, bx) and dZh (h side:
// dWh, the recurrent dh, bh), and carries dh_t * z_t to t-1 in place of the
// LSTM's dc. Everything below says 4H for the LSTM; read G H.
//
// Internally the 4H gate columns of Wx, Wh, b, Z and dZ are permuted into
// unit blocks of `ub` units ([block][gate i,f,g,o][unit]), so that each thread
// of the recurrence owns a contiguous column range holding all four gates of
// its units: one single-threaded GEMM plus the cell update per thread and step,
// one barrier per step (a yielding SpinBarrier, see barrier.h), and Wh's slice
// stays in that core's L2. Gradients are permuted back into the standard
// layout of ParamLayout. Transposed copies of the permuted Wx, Wh and of Wd are
// refreshed with the weights so that every backward GEMM is a plain NN GEMM
// (measured faster than the transposed-B form, bench/gemm_bench.cc). The big
// GEMMs over all timesteps are split by rows or columns into one serial GEMM
// per thread (DATASYNTH_CPU_GEMM_SPLIT=0: the library's threading instead).
// DATASYNTH_CPU_PROFILE=1 (wall) or =cpu (CPU time) prints time per phase to
// stderr when the backend is destroyed.
//
// Dropout (train only, rate p > 0): inverted dropout, keep with probability
// 1 - p and scale by 1 / (1 - p). Site s (0 = embedding output, l + 1 = output
// of layer l) at timestep t draws its [B, width] mask from
// Philox(dropout_seed, stream = s << 32 | t), 16 bits per element (keep iff
// bits >= round(p * 65536)). Masks therefore do not depend on the thread count.
//
// Gradients (train = true):
//  - without clip: grads = d(loss_sum / count) / d(params), count = sum_r w_r
//    (all zeros when count = 0).
//  - with PerExampleClip: example b's gradient is g_b = d(L_b)/d(params) with
//    L_b = sum_t w_bt CE_bt / sum_t w_bt (its own weighted MEAN loss; g_b = 0 when
//    its weights sum to 0). norms[b] = ||g_b|| (all parameters), computed without
//    materialising g_b: for every weight gradient of the form sum_t a_t^T d_t,
//    ||.||^2 = sum_{t,s} (a_t.a_s)(d_t.d_s) (T x T Gram matrices per example);
//    biases ||sum_t d_t||^2; embedding sum over position pairs with equal token
//    of (dx_t.dx_s), taken as sum_k ||sum_{t: tok_t = k} dx_t||^2. Example
//    b's rows past its last weighted position are zero and skipped (its Grams
//    are [T_b, T_b]). Then each example's output-gradient rows (dlogits, dZ of
//    every layer, dX_0) are scaled by s_b = min(1, clip / (||g_b|| + e_b)) before the
//    weight-gradient GEMMs (ONE GEMM per weight over all examples), so grads =
//    sum_b s_b g_b (NOT divided by B); e_b = 0 in fp32, and in bf16 the bound
//    on the rounding of the recurrent weight-gradient GEMMs' operands
//    ((2u + u^2) sum_t ||a_t|| ||d_t||, u = 2^-8), so that each example's
//    summed contribution has norm <= clip at both precisions (the dense
//    clipped GEMMs run fp32); the recurrent biases from per-example
//    sums of dZ. With all weights 1 and a clip that never binds, grads / B
//    equals the unclipped gradient. With legal ranges (and their dlogits
//    within 256 MiB) the dense pass runs the rows grouped by range as the
//    plain path does (X_g Wd[:, lo:hi]), keeps each row's dlogits over its
//    range, and the dense norm sum_{t,s} (x_t.x_s + 1)(d_t.d_s) needs only the
//    diagonal and the pairs of overlapping ranges; without ranges the dense
//    logits are full-width per example and computed twice (norm pass and
//    gradient pass) instead of keeping [R, V] dlogits.
//
// Threads: SetThreads(n), or omp_get_max_threads() at each Step. Workspaces
// are allocated at construction for max_batch x max_steps (per-thread dense
// scratch on the first Step at a given thread count), not per step.
//
// Determinism: for a given thread count, Step is bitwise reproducible
// (static work partitions, reductions in a fixed order, oneDNN GEMMs).
//
// Precision (NewCpuTrainBackend's `precision`, docs/precision.md): kBf16 runs
// every GEMM above with bf16 operands and fp32 accumulation (gemm.h
// BgemmSerial / BgemmSplit / PackedBgemm); weights, gradients, optimizer
// state, cells, softmax and the clip path's norms stay fp32. Rounded copies:
// the weights once per optimizer step (RefreshPermuted; each recurrence
// thread's Wh slice packed by oneDNN), the layer inputs in Forward, h_t and
// dz_t by the cells that produce them.
//
// Optimizers (ApplyOptimizer; state = two [layout.total] slots m, v):
//   rmsprop (Keras/TF2): v = rho v + (1 - rho) g^2;  p -= lr g / sqrt(v + eps)
//   adam (Keras):        m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//                        p -= lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)
#pragma once

#include <memory>

#include "backend/backend.h"

namespace ds::cpu {

class CpuTrainBackend : public TrainBackend {
 public:
  // Teacher-forced forward without dropout: logits [B, T, V] (batch-major, the
  // layout of Batch), bias included.
  virtual void ForwardLogits(const Batch& batch, float* logits) = 0;
  // Threads used by Step and ApplyOptimizer; 0 (default) = omp_get_max_threads()
  // at each call.
  virtual void SetThreads(int threads) = 0;
};

// Throws ds::Error (kInvalidArgument) on a bad spec; MakeCpuTrainBackend is
// the Status-returning form.
std::unique_ptr<CpuTrainBackend> NewCpuTrainBackend(const NetworkSpec& spec, int max_batch,
                                                    int max_steps,
                                                    Precision precision = Precision::kFp32);

// Inference: per slot and layer h, c [H] (the GRU: h only, and two GEMMs per
// layer, x Wx and h Wh). Step gathers the n listed slots'
// state and tokens, runs one timestep as ONE GEMM per layer
// ([x, h] [n, In+H] x [Wx; Wh] [In+H, 4H], valid because Wh follows Wx
// contiguously in ParamLayout whenever 4H*In is a multiple of 16, otherwise
// two GEMMs), the fused cell, scatters h, c back, then logits = h Wd + bd.
// `threads` = 0 uses omp_get_max_threads() at each Step (so a worker process
// that set omp_set_num_threads(1) runs single-threaded); > 0 fixes it.
class CpuInferBackend : public InferBackend {
 public:
  virtual void SetThreads(int threads) = 0;
};

// Inference fast path (fast = true, the default; fp32 whatever the
// precision): layer 0's x side comes from a table [V, G H] = E Wx_0 + b built
// at construction (one row gather per token instead of the x part of the
// GEMM), and StepRange computes a row's logits only over its id range: the
// rows of a step that share a range as one register-blocked kernel over them
// (RangedDense, ranged_dense.h: each logit a fixed-order fp32 sum, the same
// whatever rows share it; rows with the full range use the GEMM). The table
// is built only when it fits in 64 MiB. fast = false runs
// the plain path (every GEMM, every logit), the reference for tests; the two
// agree to fp32 rounding (the sums are ordered differently), not bit for bit.
struct InferOptions {
  Precision precision = Precision::kFp32;
  bool fast = true;
};

std::unique_ptr<CpuInferBackend> NewCpuInferBackend(const NetworkSpec& spec, const float* params,
                                                    int slots, int threads = 0,
                                                    const InferOptions& options = {});

}  // namespace ds::cpu
