#include "backend/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/kernels.h"

namespace ds {
namespace {

using cuda::DeviceBuffer;
using cuda::PinnedBuffer;

constexpr size_t kCublasWorkspace = 32u << 20;  // cuBLAS' recommendation for Hopper

Status ValidateSpec(const NetworkSpec& spec) {
  if (spec.vocab_size < 1 || spec.embedding_dim < 1 || spec.rnn_units < 1 || spec.num_layers < 1) {
    return DS_ERR(kInvalidArgument,
                  "network: vocab_size, embedding_dim, rnn_units and num_layers must be >= 1 "
                  "(got {}, {}, {}, {})",
                  spec.vocab_size, spec.embedding_dim, spec.rnn_units, spec.num_layers);
  }
  if (!(spec.dropout_rate >= 0.0f && spec.dropout_rate < 1.0f)) {
    return DS_ERR(kInvalidArgument, "network: dropout_rate must be in [0, 1), got {}",
                  spec.dropout_rate);
  }
  return Status::Ok();
}

// One device, one stream, one cuBLAS handle and the process allocator. Owned
// as the FIRST member of a backend so that it is destroyed last, after the
// backend's buffers went back to the allocator.
class CudaContext {
 public:
  explicit CudaContext(const CudaOptions& opt)
      : device_(opt.device), bf16_(opt.precision == Precision::kBf16) {
    try {
      DS_CUDA_CHECK(cudaSetDevice(device_));
      alloc_ = cuda::ProcessAllocator(device_, opt.memory).ValueOrThrow();
      DS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      DS_CUBLAS_CHECK(cublasCreate(&blas_));
      DS_CUBLAS_CHECK(cublasSetStream(blas_, stream_));
      DS_CUBLAS_CHECK(cublasSetMathMode(
          blas_, opt.allow_tf32 || bf16_ ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
      workspace_ = Buffer(kCublasWorkspace);
      DS_CUBLAS_CHECK(cublasSetWorkspace(blas_, workspace_.as<void>(), kCublasWorkspace));
    } catch (...) {
      Release();
      throw;
    }
  }
  ~CudaContext() { Release(); }
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  DeviceBuffer Buffer(size_t bytes) { return DeviceBuffer(alloc_, bytes, stream_); }
  cudaStream_t stream() const { return stream_; }
  AllocatorStats memory_stats() const { return alloc_->stats(); }
  void Activate() const { DS_CUDA_CHECK(cudaSetDevice(device_)); }
  void Sync() const { DS_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  // Row-major C[M, N] = alpha * op(A)[M, K] op(B)[K, N] + beta * C, computed
  // as the column-major C^T = op(B)^T op(A)^T.
  void Gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
            const float* B, int ldb, float beta, float* C, int ldc) const {
    if (M == 0 || N == 0) return;
    if (bf16_) {
      GemmBf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
      return;
    }
    DS_CUBLAS_CHECK(cublasSgemm(blas_, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ldb, A, lda,
                                &beta, C, ldc));
  }
  bool bf16() const { return bf16_; }
  // y[C] = column sums of the row-major A[R, C] (A^T ones).
  void ColumnSums(const float* A, int R, int C, const float* ones, float* y) const {
    const float one = 1.0f, zero = 0.0f;
    DS_CUBLAS_CHECK(cublasSgemv(blas_, CUBLAS_OP_N, C, R, &one, A, C, ones, 1, &zero, y, 1));
  }

 private:
  void Release() {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    if (blas_ != nullptr) cublasDestroy(blas_);
    blas_ = nullptr;
    workspace_.Reset();
    bf16_a_.Reset();
    bf16_b_.Reset();
    if (stream_ != nullptr) {
      if (alloc_ != nullptr) alloc_->MarkStreamIdle(reinterpret_cast<StreamId>(stream_));
      cudaStreamDestroy(stream_);
    }
    stream_ = nullptr;
  }

  // Gemm in bf16: both operands rounded into the scratch buffers (as stored:
  // rows x ld), then cublasGemmEx with fp32 accumulation and output.
  void GemmBf16(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
                const float* B, int ldb, float beta, float* C, int ldc) const {
    auto extent = [](size_t rows, size_t cols, size_t ld) {
      return rows == 0 ? size_t(0) : (rows - 1) * ld + cols;
    };
    const size_t na = extent(ta ? K : M, ta ? M : K, lda), nb = extent(tb ? N : K, tb ? K : N, ldb);
    if (bf16_a_.bytes() < na * 2) bf16_a_ = DeviceBuffer(alloc_, na * 2, stream_);
    if (bf16_b_.bytes() < nb * 2) bf16_b_ = DeviceBuffer(alloc_, nb * 2, stream_);
    cuda::RoundToBf16(A, na, bf16_a_.as<uint16_t>(), stream_);
    cuda::RoundToBf16(B, nb, bf16_b_.as<uint16_t>(), stream_);
    DS_CUBLAS_CHECK(cublasGemmEx(blas_, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha,
                                 bf16_b_.as<void>(), CUDA_R_16BF, ldb, bf16_a_.as<void>(),
                                 CUDA_R_16BF, lda, &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
  }

  int device_;
  bool bf16_ = false;
  mutable DeviceBuffer bf16_a_, bf16_b_;  // bf16 GEMM operand scratch (bf16_ only)
  CachingAllocator* alloc_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  DeviceBuffer workspace_;
};

// ---------------------------------------------------------------------------

class CudaTrainBackend final : public TrainBackend {
 public:
  CudaTrainBackend(const NetworkSpec& spec, int max_batch, int max_steps, const CudaOptions& opt)
      : ctx_(opt),
        spec_(spec),
        layout_(ParamLayout::For(spec)),
        gru_(spec.architecture == Architecture::kGru),
        max_b_(max_batch),
        max_t_(max_steps) {
    const size_t V = spec.vocab_size, E = spec.embedding_dim, H = spec.rnn_units;
    const size_t GH = size_t(GateCount(spec.architecture)) * H;
    const size_t L = spec.num_layers, N = size_t(max_batch) * max_steps;
    const size_t NB = size_t(max_steps + 1) * max_batch;  // rows incl. the initial state
    params_ = ctx_.Buffer(layout_.total * 4);
    grads_ = ctx_.Buffer(layout_.total * 4);
    state_ = ctx_.Buffer(2 * layout_.total * 4);
    DS_CUDA_CHECK(cudaMemsetAsync(state_.as(), 0, 2 * layout_.total * 4, ctx_.stream()));
    DS_CUDA_CHECK(cudaMemsetAsync(params_.as(), 0, layout_.total * 4, ctx_.stream()));
    DS_CUDA_CHECK(cudaMemsetAsync(grads_.as(), 0, layout_.total * 4, ctx_.stream()));
    ints_ = ctx_.Buffer((7 * N + 2) * 4);  // + legal lo [N], hi [N] at 5N + 2
    weights_ = ctx_.Buffer(N * 4);
    x0_ = ctx_.Buffer(N * E * 4);
    for (size_t l = 0; l < L; ++l) {
      lay_.push_back(layout_.layer(int(l)));
      gates_.push_back(ctx_.Buffer(N * GH * 4));
      if (gru_) us_.push_back(ctx_.Buffer(N * GH * 4));
      hs_.push_back(ctx_.Buffer(NB * H * 4));
      cs_.push_back(ctx_.Buffer(NB * H * 4));
      xo_.push_back(ctx_.Buffer(N * H * 4));
    }
    logits_ = ctx_.Buffer(N * V * 4);
    rows_ = ctx_.Buffer(2 * N * 4);
    ones_ = ctx_.Buffer(N * 4);
    dz_ = ctx_.Buffer(N * GH * 4);
    if (gru_) dzh_ = ctx_.Buffer(N * GH * 4);
    dxa_ = ctx_.Buffer(N * std::max(E, H) * 4);
    dxb_ = ctx_.Buffer(N * std::max(E, H) * 4);
    dc_ = ctx_.Buffer(size_t(max_batch) * H * 4);
    host_ints_ = std::make_unique<PinnedBuffer>((7 * N + 2) * 4);
    host_floats_ = std::make_unique<PinnedBuffer>(3 * N * 4);
    std::vector<float> ones(N, 1.0f);
    DS_CUDA_CHECK(
        cudaMemcpyAsync(ones_.as(), ones.data(), N * 4, cudaMemcpyHostToDevice, ctx_.stream()));
    slot_of_token_.assign(V, -1);
    ctx_.Sync();
  }

  ~CudaTrainBackend() override { cudaStreamSynchronize(ctx_.stream()); }

  std::string name() const override { return "cuda"; }
  Precision precision() const override { return ctx_.bf16() ? Precision::kBf16 : Precision::kFp32; }
  std::optional<AllocatorStats> memory_stats() const override {
    return ctx_.memory_stats();
  }
  const NetworkSpec& spec() const override { return spec_; }
  const ParamLayout& layout() const override { return layout_; }

  void SetParams(const float* host) override { Upload(params_, host); }
  void GetParams(float* host) const override { Download(params_, host); }
  void GetGrads(float* host) const override { Download(grads_, host); }
  void SetGrads(const float* host) override { Upload(grads_, host); }

  StepStats Step(const Batch& batch, bool train, uint64_t seed,
                 const PerExampleClip* clip) override;
  void ApplyOptimizer(const OptimizerConfig& opt, int64_t step) override;

  // State layout shared with the CPU backend (checkpoints move between them):
  // [m (total), v (total)]; Adam uses both, RMSprop keeps its ms in v.
  std::vector<float> GetOptimizerState() const override {
    std::vector<float> out(2 * layout_.total);
    ctx_.Activate();
    DS_CUDA_CHECK(cudaMemcpyAsync(out.data(), state_.as(), out.size() * 4, cudaMemcpyDeviceToHost,
                                  ctx_.stream()));
    ctx_.Sync();
    return out;
  }

  Status SetOptimizerState(const std::vector<float>& state) override {
    return Capture([&]() -> Status {
      const size_t n = state.size(), T = layout_.total;
      if (n != 0 && n != 2 * T) {
        return DS_ERR(kCorrupt, "optimizer state has {} floats, expected {} (2 x {} parameters)", n,
                      2 * T, T);
      }
      ctx_.Activate();
      if (n == 0) {
        DS_CUDA_CHECK(cudaMemsetAsync(state_.as(), 0, 2 * T * 4, ctx_.stream()));
      } else {
        DS_CUDA_CHECK(cudaMemcpyAsync(state_.as(), state.data(), n * 4, cudaMemcpyHostToDevice,
                                      ctx_.stream()));
      }
      ctx_.Sync();
      return Status::Ok();
    });
  }

 private:
  void Upload(DeviceBuffer& dst, const float* host) {
    ctx_.Activate();
    DS_CUDA_CHECK(
        cudaMemcpyAsync(dst.as(), host, layout_.total * 4, cudaMemcpyHostToDevice, ctx_.stream()));
    ctx_.Sync();
  }
  void Download(const DeviceBuffer& src, float* host) const {
    ctx_.Activate();
    DS_CUDA_CHECK(
        cudaMemcpyAsync(host, src.as(), layout_.total * 4, cudaMemcpyDeviceToHost, ctx_.stream()));
    ctx_.Sync();
  }
  const float* P(size_t off) const { return params_.as() + off; }
  float* G(size_t off) const { return grads_.as() + off; }
  // Step's parts (device views of one uploaded batch).
  struct DeviceRows {
    double count = 0;  // weight sum
    int U = 0;         // distinct input tokens (train)
    const int32_t *tok, *tgt, *uniq, *off, *pos, *lo, *hi;
  };
  void ValidateBatch(const Batch& batch) const;
  double StageRows(const Batch& batch, int32_t* h_ints, float* h_w) const;
  int GroupByToken(int32_t* h_tok, size_t N);
  DeviceRows UploadBatch(const Batch& batch, bool train);
  const float* Forward(const DeviceRows& d, int B, int T, bool train, uint64_t seed,
                       float* h_rows);
  void Backward(const DeviceRows& d, const float* top, int B, int T, uint64_t seed);
  // Layer l over all T steps: in [N, In] -> hs_[l], xo_[l].
  void ForwardLayer(int l, const float* in, int In, int B, int T, float rate, uint64_t seed);
  // Layer l backward: dh [N, H] = dL/d(xo_[l]) (overwritten) -> grads, dx [N, In].
  void BackwardLayer(int l, float* dh, float* dx, int B, int T, float rate, uint64_t seed);
  void LstmRecurrenceBackward(int l, float* dh, int B, int T);
  void GruRecurrenceBackward(int l, float* dh, int B, int T);

  CudaContext ctx_;  // first: destroyed last
  NetworkSpec spec_;
  ParamLayout layout_;
  bool gru_;                                // architecture gru (else lstm)
  std::vector<ParamLayout::RnnLayer> lay_;  // per layer offsets
  int max_b_, max_t_;
  DeviceBuffer params_, grads_;  // [total] each
  DeviceBuffer state_;           // [2, total]: m, v (RMSprop: ms in v)
  DeviceBuffer ints_;            // tokens [N], targets [N], uniq [U], offsets [U+1], positions [N];
                                 // at 5N + 2: legal lo [N], hi [N] (Batch::legal_lo/hi)
  DeviceBuffer weights_;         // [N]
  DeviceBuffer x0_;              // [N, E]   dropped embedding output
  // G = 4 (lstm) or 3 (gru) gates; GH = G * H.
  std::vector<DeviceBuffer> gates_;  // per layer [N, GH]   pre-activations -> gates
  std::vector<DeviceBuffer> us_;     // per layer [N, GH]   gru: h_{t-1} Wh (n third: + bh_n)
  std::vector<DeviceBuffer> hs_;     // per layer [(T+1) * B, H]  h_{-1} = 0, h_0 .. h_{T-1}
  std::vector<DeviceBuffer> cs_;     // per layer [(T+1) * B, H]  c_{-1} = 0, c_0 .. c_{T-1}
  std::vector<DeviceBuffer> xo_;     // per layer [N, H]   dropout(h): next layer's input
  DeviceBuffer logits_;              // [N, V]   logits, then dL/dlogits
  DeviceBuffer rows_;                // [2, N]   w * CE, w * correct
  DeviceBuffer ones_;                // [N]      for bias gradients
  DeviceBuffer dz_;                  // [N, GH]  dL/d(gate pre-activations, x side) of a layer
  DeviceBuffer dzh_;                 // [N, GH]  gru: dL/d(h-side pre-activations)
  DeviceBuffer dxa_, dxb_;           // [N, max(E, H)]  dL/d(layer output), dL/d(layer input)
  DeviceBuffer dc_;                  // [B, H]   carried backwards: dL/dc (lstm), dh z (gru)
  std::unique_ptr<PinnedBuffer> host_ints_;    // staging for ints_
  std::unique_ptr<PinnedBuffer> host_floats_;  // weights [N], then rows [2N]
  std::vector<int32_t> slot_of_token_;         // [V] scratch for grouping, -1 = unseen
};

// Checks a batch against this backend's capacity and vocabulary (before any copy).
void CudaTrainBackend::ValidateBatch(const Batch& batch) const {
  const int B = batch.batch, T = batch.steps;
  if (B < 1 || T < 1 || B > max_b_ || T > max_t_) {
    DS_THROW(kInvalidArgument, "batch of {} x {} steps outside this backend's {} x {}", B, T,
             max_b_, max_t_);
  }
  const size_t N = size_t(B) * T;
  if (batch.inputs.size() != N || batch.targets.size() != N ||
      (!batch.weights.empty() && batch.weights.size() != N)) {
    DS_THROW(kInvalidArgument, "batch {} x {}: inputs/targets/weights have {}/{}/{} entries", B, T,
             batch.inputs.size(), batch.targets.size(), batch.weights.size());
  }
  ValidateLegalRanges(batch, spec_.vocab_size);
}

// Host staging, time-major (row r = t * B + b, as the logits rows): tokens h_ints[0, N),
// targets [N, 2N), weights h_w[0, N), legal lo/hi at h_ints[5N + 2, 7N + 2). Returns the
// weight sum.
double CudaTrainBackend::StageRows(const Batch& batch, int32_t* h_ints, float* h_w) const {
  const int B = batch.batch, T = batch.steps, V = spec_.vocab_size;
  const size_t N = size_t(B) * T;
  const bool ranged = !batch.legal_lo.empty();
  double count = 0;
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      size_t src = size_t(b) * T + t, r = size_t(t) * B + b;
      int32_t x = batch.inputs[src], y = batch.targets[src];
      if (x < 0 || x >= V || y < 0 || y >= V) {
        DS_THROW(kInvalidArgument, "batch row {}, step {}: token id {} / target {} outside [0, {})",
                 b, t, x, y, V);
      }
      float w = batch.weights.empty() ? 1.0f : batch.weights[src];
      h_ints[r] = x;
      h_ints[N + r] = y;
      h_w[r] = w;
      if (ranged) {
        h_ints[5 * N + 2 + r] = batch.legal_lo[src];
        h_ints[6 * N + 2 + r] = batch.legal_hi[src];
      }
      count += w;
    }
  }
  return count;
}

// Counting sort of the N positions by token, for the embedding gradient: writes
// uniq [U], offsets [U+1], positions [N] at h_tok + 2N and returns U.
int CudaTrainBackend::GroupByToken(int32_t* h_tok, size_t N) {
  std::vector<int32_t> uniq, counts;
  for (size_t r = 0; r < N; ++r) {
    int32_t& slot = slot_of_token_[h_tok[r]];
    if (slot < 0) {
      slot = int32_t(uniq.size());
      uniq.push_back(h_tok[r]);
      counts.push_back(0);
    }
    ++counts[slot];
  }
  const int U = int(uniq.size());
  int32_t* h_uniq = h_tok + 2 * N;
  int32_t* h_off = h_uniq + U;
  int32_t* h_pos = h_off + U + 1;
  h_off[0] = 0;
  for (int u = 0; u < U; ++u) {
    h_uniq[u] = uniq[u];
    h_off[u + 1] = h_off[u] + counts[u];
  }
  std::vector<int32_t> fill(h_off, h_off + U);
  for (size_t r = 0; r < N; ++r) h_pos[fill[slot_of_token_[h_tok[r]]]++] = int32_t(r);
  for (int32_t v : uniq) slot_of_token_[v] = -1;
  return U;
}

// Stages the batch on the host and uploads it; the device views into ints_ / weights_.
CudaTrainBackend::DeviceRows CudaTrainBackend::UploadBatch(const Batch& batch, bool train) {
  const size_t N = size_t(batch.batch) * batch.steps;
  const bool ranged = !batch.legal_lo.empty();
  cudaStream_t s = ctx_.stream();
  int32_t* hi = host_ints_->as<int32_t>();
  float* h_w = host_floats_->as<float>();
  DeviceRows d;
  d.count = StageRows(batch, hi, h_w);
  d.U = train ? GroupByToken(hi, N) : 0;
  const size_t n_ints = train ? 2 * N + d.U + (d.U + 1) + N : 2 * N;
  DS_CUDA_CHECK(cudaMemcpyAsync(ints_.as(), hi, n_ints * 4, cudaMemcpyHostToDevice, s));
  DS_CUDA_CHECK(cudaMemcpyAsync(weights_.as(), h_w, N * 4, cudaMemcpyHostToDevice, s));
  if (ranged)
    DS_CUDA_CHECK(cudaMemcpyAsync(ints_.as<int32_t>() + 5 * N + 2, hi + 5 * N + 2, 2 * N * 4,
                                  cudaMemcpyHostToDevice, s));
  d.lo = ranged ? ints_.as<int32_t>() + 5 * N + 2 : nullptr;
  d.hi = ranged ? d.lo + N : nullptr;
  d.tok = ints_.as<int32_t>();
  d.tgt = d.tok + N;
  d.uniq = d.tok + 2 * N;
  d.off = d.uniq + d.U;
  d.pos = d.off + d.U + 1;
  return d;
}

// Embedding, layers and the dense layer; leaves dL/dlogits (train) in logits_ and copies
// the per-row w * CE and w * correct to the host (h_rows [2N]). Returns the top layer's
// output [N, H].
const float* CudaTrainBackend::Forward(const DeviceRows& d, int B, int T, bool train,
                                       uint64_t seed, float* h_rows) {
  const int V = spec_.vocab_size, E = spec_.embedding_dim, H = spec_.rnn_units;
  const size_t N = size_t(B) * T;
  const float rate = train ? spec_.dropout_rate : 0.0f;
  cudaStream_t s = ctx_.stream();
  const size_t off_emb = layout_.offset("embedding"), off_dw = layout_.offset("dense.w");
  const size_t off_db = layout_.offset("dense.b");
  cuda::EmbeddingDropoutForward(P(off_emb), d.tok, T, B, E, rate, seed, train, x0_.as(), s);
  const float* in = x0_.as();
  int In = E;
  for (int l = 0; l < spec_.num_layers; ++l) {
    ForwardLayer(l, in, In, B, T, rate, seed);
    in = xo_[l].as();
    In = H;
  }
  float* logits = logits_.as();
  ctx_.Gemm(false, false, int(N), V, H, 1.0f, in, H, P(off_dw), V, 0.0f, logits, V);
  float* rows = rows_.as();
  const float scale = d.count > 0 ? float(1.0 / d.count) : 0.0f;
  cuda::SoftmaxCrossEntropy(logits, P(off_db), d.tgt, weights_.as(), d.lo, d.hi, int(N), V,
                            train, scale, rows, rows + N, s);
  DS_CUDA_CHECK(cudaMemcpyAsync(h_rows, rows, 2 * N * 4, cudaMemcpyDeviceToHost, s));
  return in;
}

// Gradients into grads_ from dL/dlogits in logits_ and the top layer's output `top`.
void CudaTrainBackend::Backward(const DeviceRows& d, const float* top, int B, int T,
                                uint64_t seed) {
  const int V = spec_.vocab_size, E = spec_.embedding_dim, H = spec_.rnn_units;
  const size_t N = size_t(B) * T;
  const float rate = spec_.dropout_rate;
  cudaStream_t s = ctx_.stream();
  DS_CUDA_CHECK(cudaMemsetAsync(grads_.as(), 0, layout_.total * 4, s));
  if (d.count <= 0) return;
  const size_t off_emb = layout_.offset("embedding"), off_dw = layout_.offset("dense.w");
  const size_t off_db = layout_.offset("dense.b");
  const float* logits = logits_.as();
  ctx_.Gemm(true, false, H, V, int(N), 1.0f, top, H, logits, V, 0.0f, G(off_dw), V);
  ctx_.ColumnSums(logits, int(N), V, ones_.as(), G(off_db));
  float* dxa = dxa_.as();
  float* dxb = dxb_.as();
  ctx_.Gemm(false, true, int(N), H, V, 1.0f, logits, V, P(off_dw), V, 0.0f, dxa, H);
  for (int l = spec_.num_layers - 1; l >= 0; --l) {
    BackwardLayer(l, dxa, dxb, B, T, rate, seed);
    std::swap(dxa, dxb);
  }
  cuda::EmbeddingBackward(dxa, d.uniq, d.off, d.pos, d.U, T, B, E, rate, seed, true, G(off_emb),
                          s);
}

StepStats CudaTrainBackend::Step(const Batch& batch, bool train, uint64_t seed,
                                 const PerExampleClip* clip) {
  if (clip != nullptr) {
    DS_THROW(kUnavailable,
             "per-example gradient clipping (DP-SGD) is not implemented on the CUDA backend yet; "
             "train with the CPU backend (--device cpu) when dp is on");
  }
  ValidateBatch(batch);
  const int B = batch.batch, T = batch.steps;
  const size_t N = size_t(B) * T;
  ctx_.Activate();
  const DeviceRows d = UploadBatch(batch, train);
  float* h_rows = host_floats_->as<float>() + N;
  const float* top = Forward(d, B, T, train, seed, h_rows);
  if (train) Backward(d, top, B, T, seed);
  ctx_.Sync();

  StepStats st;
  for (size_t r = 0; r < N; ++r) {
    st.loss_sum += h_rows[r];
    st.correct += h_rows[N + r];
  }
  st.count = d.count;
  return st;
}

void CudaTrainBackend::ForwardLayer(int l, const float* in, int In, int B, int T, float rate,
                                    uint64_t seed) {
  const int H = spec_.rnn_units, GH = GateCount(spec_.architecture) * H;
  const size_t N = size_t(B) * T;
  cudaStream_t s = ctx_.stream();
  const auto& ly = lay_[l];
  float* z = gates_[l].as();
  float* hs = hs_[l].as();
  ctx_.Gemm(false, false, int(N), GH, In, 1.0f, in, In, P(ly.wx), GH, 0.0f, z, GH);
  DS_CUDA_CHECK(cudaMemsetAsync(hs, 0, size_t(B) * H * 4, s));
  if (gru_) {
    float* u = us_[l].as();
    for (int t = 0; t < T; ++t) {
      float* ut = u + size_t(t) * B * GH;
      ctx_.Gemm(false, false, B, GH, H, 1.0f, hs + size_t(t) * B * H, H, P(ly.wh), GH, 0.0f, ut,
                GH);
      cuda::GruCellForward(z + size_t(t) * B * GH, ut, P(ly.b), hs + size_t(t) * B * H,
                           hs + size_t(t + 1) * B * H, B, H, s);
    }
  } else {
    float* cs = cs_[l].as();
    DS_CUDA_CHECK(cudaMemsetAsync(cs, 0, size_t(B) * H * 4, s));
    for (int t = 0; t < T; ++t) {
      float* zt = z + size_t(t) * B * GH;
      if (t > 0) {
        ctx_.Gemm(false, false, B, GH, H, 1.0f, hs + size_t(t) * B * H, H, P(ly.wh), GH, 1.0f, zt,
                  GH);
      }
      cuda::LstmCellForward(zt, P(ly.b), cs + size_t(t) * B * H, cs + size_t(t + 1) * B * H,
                            hs + size_t(t + 1) * B * H, B, H, s);
    }
  }
  cuda::Dropout(hs + size_t(B) * H, xo_[l].as(), T, B, H, rate, seed, uint64_t(l + 1), s);
}

// dz_ (and for the gru dzh_) of layer l from dh = dL/dh (all T steps).
void CudaTrainBackend::LstmRecurrenceBackward(int l, float* dh_all, int B, int T) {
  const int H = spec_.rnn_units, H4 = 4 * H;
  const float* gates = gates_[l].as();
  const float* cs = cs_[l].as();
  float* dz = dz_.as();
  for (int t = T - 1; t >= 0; --t) {
    float* dh = dh_all + size_t(t) * B * H;
    if (t < T - 1) {
      ctx_.Gemm(false, true, B, H, H4, 1.0f, dz + size_t(t + 1) * B * H4, H4, P(lay_[l].wh), H4,
                1.0f, dh, H);
    }
    cuda::LstmCellBackward(gates + size_t(t) * B * H4, cs + size_t(t + 1) * B * H,
                           cs + size_t(t) * B * H, dh, dc_.as(), dz + size_t(t) * B * H4, B, H,
                           ctx_.stream());
  }
}

void CudaTrainBackend::GruRecurrenceBackward(int l, float* dh_all, int B, int T) {
  const int H = spec_.rnn_units, H3 = 3 * H;
  const float* gates = gates_[l].as();
  const float* u = us_[l].as();
  const float* hs = hs_[l].as();
  float* dz = dz_.as();
  float* dzh = dzh_.as();
  for (int t = T - 1; t >= 0; --t) {
    float* dh = dh_all + size_t(t) * B * H;
    if (t < T - 1) {
      ctx_.Gemm(false, true, B, H, H3, 1.0f, dzh + size_t(t + 1) * B * H3, H3, P(lay_[l].wh), H3,
                1.0f, dh, H);
    }
    const size_t o = size_t(t) * B * H3;
    cuda::GruCellBackward(gates + o, u + o, hs + size_t(t) * B * H, dh, dc_.as(), dz + o, dzh + o,
                          B, H, ctx_.stream());
  }
}

void CudaTrainBackend::BackwardLayer(int l, float* dh, float* dx, int B, int T, float rate,
                                     uint64_t seed) {
  const int E = spec_.embedding_dim, H = spec_.rnn_units, GH = GateCount(spec_.architecture) * H;
  const int N = B * T;
  cudaStream_t s = ctx_.stream();
  const auto& ly = lay_[l];
  const float* lin = l == 0 ? x0_.as() : xo_[l - 1].as();
  const int lIn = l == 0 ? E : H;
  const float* ones = ones_.as();
  cuda::Dropout(dh, dh, T, B, H, rate, seed, uint64_t(l + 1), s);  // dL/dh
  DS_CUDA_CHECK(cudaMemsetAsync(dc_.as(), 0, size_t(B) * H * 4, s));
  if (gru_) {
    GruRecurrenceBackward(l, dh, B, T);
  } else {
    LstmRecurrenceBackward(l, dh, B, T);
  }
  const float* dz = dz_.as();
  const float* dzh = gru_ ? dzh_.as() : dz;  // h-side pre-activation gradient
  ctx_.Gemm(true, false, lIn, GH, N, 1.0f, lin, lIn, dz, GH, 0.0f, G(ly.wx), GH);
  ctx_.Gemm(true, false, H, GH, N, 1.0f, hs_[l].as(), H, dzh, GH, 0.0f, G(ly.wh), GH);
  ctx_.ColumnSums(dz, N, GH, ones, G(ly.b));
  if (gru_) ctx_.ColumnSums(dzh, N, GH, ones, G(ly.b) + GH);
  ctx_.Gemm(false, true, N, lIn, GH, 1.0f, dz, GH, P(ly.wx), GH, 0.0f, dx, lIn);
}

void CudaTrainBackend::ApplyOptimizer(const OptimizerConfig& opt, int64_t step) {
  ctx_.Activate();
  const size_t T = layout_.total;
  // With opt.range (src/dist's sharded optimizer): the slice [a, a + n) from
  // the host gradient given, its updated params copied back to the host.
  const OptimizerRange* range = opt.range;
  if (range && !(range->begin <= range->end && range->end <= T))
    DS_THROW(kInvalidArgument, "optimizer range [{}, {}) outside the {} parameters", range->begin,
             range->end, T);
  const size_t a = range ? range->begin : 0, n = range ? range->end - range->begin : T;
  if (n == 0) return;
  if (range)
    DS_CUDA_CHECK(cudaMemcpyAsync(grads_.as() + a, range->grads, n * 4, cudaMemcpyHostToDevice,
                                  ctx_.stream()));
  if (opt.name == "rmsprop") {
    cuda::RmspropUpdate(params_.as() + a, grads_.as() + a, state_.as() + T + a, n,
                        opt.learning_rate, opt.rho, opt.epsilon, ctx_.stream());
  } else if (opt.name == "adam") {
    if (step < 1) DS_THROW(kInvalidArgument, "adam: step counts from 1, got {}", step);
    double c1 = 1.0 - std::pow(double(opt.beta1), double(step));
    double c2 = 1.0 - std::pow(double(opt.beta2), double(step));
    float lr_t = float(opt.learning_rate * std::sqrt(c2) / c1);
    cuda::AdamUpdate(params_.as() + a, grads_.as() + a, state_.as() + a, state_.as() + T + a, n,
                     lr_t, opt.beta1, opt.beta2, opt.epsilon, ctx_.stream());
  } else {
    DS_THROW(kInvalidArgument, "unknown optimizer '{}' (expected rmsprop or adam)", opt.name);
  }
  if (range)
    DS_CUDA_CHECK(cudaMemcpyAsync(range->params_out, params_.as() + a, n * 4,
                                  cudaMemcpyDeviceToHost, ctx_.stream()));
  ctx_.Sync();
}

// ---------------------------------------------------------------------------

class CudaInferBackend final : public InferBackend {
 public:
  CudaInferBackend(const NetworkSpec& spec, const float* host_params, int slots,
                   const CudaOptions& opt)
      : ctx_(opt),
        spec_(spec),
        layout_(ParamLayout::For(spec)),
        gru_(spec.architecture == Architecture::kGru),
        slots_(slots) {
    const size_t V = spec.vocab_size, E = spec.embedding_dim, H = spec.rnn_units;
    const size_t GH = size_t(GateCount(spec.architecture)) * H;
    const size_t L = spec.num_layers, S = slots;
    params_ = ctx_.Buffer(layout_.total * 4);
    DS_CUDA_CHECK(cudaMemcpyAsync(params_.as(), host_params, layout_.total * 4,
                                  cudaMemcpyHostToDevice, ctx_.stream()));
    state_ = ctx_.Buffer(L * 2 * S * H * 4);
    DS_CUDA_CHECK(cudaMemsetAsync(state_.as(), 0, L * 2 * S * H * 4, ctx_.stream()));
    ids_ = ctx_.Buffer(2 * S * 4);
    xa_ = ctx_.Buffer(S * std::max(E, H) * 4);
    xb_ = ctx_.Buffer(S * H * 4);
    hprev_ = ctx_.Buffer(S * H * 4);
    z_ = ctx_.Buffer(S * GH * 4);
    if (gru_) zh_ = ctx_.Buffer(S * GH * 4);
    logits_ = ctx_.Buffer(S * V * 4);
    host_ids_ = std::make_unique<PinnedBuffer>(2 * S * 4);
    seen_.assign(S, 0);
    ctx_.Sync();
  }
  ~CudaInferBackend() override { cudaStreamSynchronize(ctx_.stream()); }

  const NetworkSpec& spec() const override { return spec_; }
  int slots() const override { return slots_; }
  Precision precision() const override { return ctx_.bf16() ? Precision::kBf16 : Precision::kFp32; }
  std::optional<AllocatorStats> memory_stats() const override {
    return ctx_.memory_stats();
  }

  void ResetSlot(int slot) override {
    if (slot < 0 || slot >= slots_)
      DS_THROW(kInvalidArgument, "slot {} outside [0, {})", slot, slots_);
    ctx_.Activate();
    const size_t H = spec_.rnn_units;
    for (int l = 0; l < spec_.num_layers; ++l) {
      DS_CUDA_CHECK(cudaMemsetAsync(H_(l) + slot * H, 0, H * 4, ctx_.stream()));
      DS_CUDA_CHECK(cudaMemsetAsync(C_(l) + slot * H, 0, H * 4, ctx_.stream()));
    }
  }

  void Step(const int* slot_ids, const int32_t* tokens, int n, float* logits) override {
    if (n < 0 || n > slots_)
      DS_THROW(kInvalidArgument, "{} slots stepped, backend has {}", n, slots_);
    if (n == 0) return;
    const int V = spec_.vocab_size, E = spec_.embedding_dim, H = spec_.rnn_units;
    const int GH = GateCount(spec_.architecture) * H;
    int32_t* h_ids = host_ids_->as<int32_t>();
    for (int k = 0; k < n; ++k) {
      int sl = slot_ids[k];
      if (sl < 0 || sl >= slots_ || seen_[sl]) {
        for (int j = 0; j < k; ++j) seen_[slot_ids[j]] = 0;
        DS_THROW(kInvalidArgument, "slot id {} at position {}: outside [0, {}) or repeated", sl, k,
                 slots_);
      }
      seen_[sl] = 1;
      if (tokens[k] < 0 || tokens[k] >= V) {
        for (int j = 0; j <= k; ++j) seen_[slot_ids[j]] = 0;
        DS_THROW(kInvalidArgument, "token id {} at position {} outside [0, {})", tokens[k], k, V);
      }
      h_ids[k] = sl;
      h_ids[n + k] = tokens[k];
    }
    for (int k = 0; k < n; ++k) seen_[slot_ids[k]] = 0;
    ctx_.Activate();
    cudaStream_t s = ctx_.stream();
    DS_CUDA_CHECK(cudaMemcpyAsync(ids_.as(), h_ids, size_t(2) * n * 4, cudaMemcpyHostToDevice, s));
    const int32_t* d_slots = ids_.as<int32_t>();
    const int32_t* d_tok = d_slots + n;
    const float* P = params_.as();
    float* in = xa_.as();
    float* out = xb_.as();
    cuda::GatherRows(P + layout_.offset("embedding"), d_tok, n, E, in, s);
    int In = E;
    for (int l = 0; l < spec_.num_layers; ++l) {
      const auto ly = layout_.layer(l);
      cuda::GatherRows(H_(l), d_slots, n, H, hprev_.as(), s);
      ctx_.Gemm(false, false, n, GH, In, 1.0f, in, In, P + ly.wx, GH, 0.0f, z_.as(), GH);
      if (gru_) {
        ctx_.Gemm(false, false, n, GH, H, 1.0f, hprev_.as(), H, P + ly.wh, GH, 0.0f, zh_.as(), GH);
        cuda::GruCellInfer(z_.as(), zh_.as(), P + ly.b, d_slots, H_(l), out, n, H, s);
      } else {
        ctx_.Gemm(false, false, n, GH, H, 1.0f, hprev_.as(), H, P + ly.wh, GH, 1.0f, z_.as(), GH);
        cuda::LstmCellInfer(z_.as(), P + ly.b, d_slots, H_(l), C_(l), out, n, H, s);
      }
      std::swap(in, out);
      In = H;
    }
    cuda::BroadcastRow(P + layout_.offset("dense.b"), n, V, logits_.as(), s);
    ctx_.Gemm(false, false, n, V, H, 1.0f, in, H, P + layout_.offset("dense.w"), V, 1.0f,
              logits_.as(), V);
    DS_CUDA_CHECK(
        cudaMemcpyAsync(logits, logits_.as(), size_t(n) * V * 4, cudaMemcpyDeviceToHost, s));
    ctx_.Sync();
  }

 private:
  // Recurrent state of layer l: h [S, H] then c [S, H].
  float* H_(int l) const { return state_.as() + size_t(l) * 2 * slots_ * spec_.rnn_units; }
  float* C_(int l) const { return H_(l) + size_t(slots_) * spec_.rnn_units; }

  CudaContext ctx_;  // first: destroyed last
  NetworkSpec spec_;
  ParamLayout layout_;
  bool gru_;  // architecture gru (else lstm; the gru leaves the c half of state_ unused)
  int slots_;
  DeviceBuffer params_;   // [total]
  DeviceBuffer state_;    // [L, 2, S, H]
  DeviceBuffer ids_;      // slot ids [n], tokens [n]
  DeviceBuffer xa_, xb_;  // [S, max(E, H)], [S, H]  layer inputs/outputs (ping-pong)
  DeviceBuffer hprev_;    // [S, H]   gathered h_{t-1} of the stepped slots
  DeviceBuffer z_;        // [S, GH]  gate pre-activations (gru: x side)
  DeviceBuffer zh_;       // [S, GH]  gru: h_prev Wh
  DeviceBuffer logits_;   // [S, V]
  std::unique_ptr<PinnedBuffer> host_ids_;  // [2S]
  std::vector<char> seen_;                  // [S] duplicate check scratch
};

}  // namespace

Result<std::unique_ptr<TrainBackend>> MakeCudaTrainBackend(const NetworkSpec& spec, int max_batch,
                                                           int max_steps,
                                                           const CudaOptions& options) {
  DS_RETURN_IF_ERROR(ValidateSpec(spec));
  if (max_batch < 1 || max_steps < 1) {
    return DS_ERR(kInvalidArgument, "max_batch and max_steps must be >= 1 (got {}, {})", max_batch,
                  max_steps);
  }
  std::unique_ptr<TrainBackend> out;
  Status s = Capture(
      [&] { out = std::make_unique<CudaTrainBackend>(spec, max_batch, max_steps, options); });
  if (!s.ok()) return s.WithContext("creating the CUDA training backend");
  return out;
}

Result<std::unique_ptr<InferBackend>> MakeCudaInferBackend(const NetworkSpec& spec,
                                                           const float* host_params, int slots,
                                                           const CudaOptions& options) {
  DS_RETURN_IF_ERROR(ValidateSpec(spec));
  if (slots < 1) return DS_ERR(kInvalidArgument, "slots must be >= 1, got {}", slots);
  if (host_params == nullptr) return DS_ERR(kInvalidArgument, "no parameters given");
  std::unique_ptr<InferBackend> out;
  Status s =
      Capture([&] { out = std::make_unique<CudaInferBackend>(spec, host_params, slots, options); });
  if (!s.ok()) return s.WithContext("creating the CUDA inference backend");
  return out;
}

AllocatorStats CudaAllocatorStats(int device) {
  CachingAllocator* a = cuda::ExistingProcessAllocator(device);
  return a != nullptr ? a->stats() : AllocatorStats{};
}

}  // namespace ds
