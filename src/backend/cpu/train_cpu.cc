// CPU training backend: see the equations and policies in cpu_backend.h.
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "backend/cpu/barrier.h"
#include "backend/cpu/buffer.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/dropout.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/gram.h"
#include "backend/cpu/vmath.h"
#include "util/rng.h"
#include "util/status.h"

namespace ds {
namespace cpu {
namespace {

// Seconds per phase of Step, printed to stderr when the backend is destroyed if
// DATASYNTH_CPU_PROFILE is set (for bench/ and tuning): wall clock, or process
// CPU time with DATASYNTH_CPU_PROFILE=cpu (robust on a loaded machine).
enum Phase {
  kRefresh,
  kEmbed,
  kFwdGemm,
  kFwdRec,
  kDropout,
  kDense,
  kBwdRec,
  kBwdDx,
  kBwdDw,
  kEmbGrad,
  kClip,
  kClipLayers,
  kClipGrads,
  kOptimizer,
  kNumPhases
};
const char* const kPhaseNames[kNumPhases] = {
    "weight copies",  "embed+mask0", "fwd x*Wx", "fwd recurrence", "dropout masks", "dense+softmax",
    "bwd recurrence", "bwd dX",      "bwd dW",   "embedding grad", "clip dense",    "clip layer norms",
    "clip grads",     "optimizer"};

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class Profile {
 public:
  Profile() {
    const char* e = std::getenv("DATASYNTH_CPU_PROFILE");
    on_ = e != nullptr;
    cpu_ = on_ && std::string(e) == "cpu";
  }
  ~Profile() {
    if (!on_ || steps_ == 0) return;
    double total = 0;
    for (double s : sec_) total += s;
    std::fprintf(stderr, "cpu backend profile, %ld train steps (ms per step):\n", long(steps_));
    for (int i = 0; i < kNumPhases; ++i)
      std::fprintf(stderr, "  %-16s %8.2f  %5.1f%%\n", kPhaseNames[i], 1e3 * sec_[i] / steps_,
                   100 * sec_[i] / total);
    std::fprintf(stderr, "  %-16s %8.2f\n", "total", 1e3 * total / steps_);
  }
  // Starts timing; Mark(p) charges the time since the last mark to p.
  void Start() {
    if (on_) t_ = Clock();
  }
  void Mark(Phase p) {
    if (!on_) return;
    const double n = Clock();
    sec_[p] += n - t_;
    t_ = n;
  }
  void CountStep() { ++steps_; }

 private:
  double Clock() const {
    if (!cpu_) return Now();
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
  }
  bool on_ = false, cpu_ = false;
  int64_t steps_ = 0;
  double t_ = 0;
  double sec_[kNumPhases] = {};
};

// Unit block of the internal gate permutation: 16 units (one AVX-512 vector per
// gate) when H allows, else the whole layer is one block.
int UnitBlock(int h) { return h % 16 == 0 ? 16 : h; }

#if defined(__AVX512F__)
// dst (row stride ldd) = the 16 x 16 block of src (row stride lds), transposed
// in registers (the weights' refresh after every update: the scalar tiles
// below cost about 1 ns per element). GCC 12 warns falsely inside the
// unpack intrinsics (their masked forms' unused source operand).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
inline void Transpose16x16(const float* src, size_t lds, float* dst, size_t ldd) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + size_t(i) * lds);
  for (int i = 0; i < 16; i += 2) {  // 32-bit pairs
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // 64-bit pairs
    const __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
    const __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int h = 0; h < 16; h += 8)  // 128-bit lanes, rows 4 apart
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
      t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
    }
  for (int i = 0; i < 8; ++i) {  // 128-bit lanes, rows 8 apart
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
  }
  for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + size_t(i) * ldd, r[i]);
}
#pragma GCC diagnostic pop
#endif

// dst [cols, rows] = src [rows, cols]^T, in 16 x 16 tiles (floats: full
// tiles in AVX-512 registers; the same values, only moved).
template <typename T>
void Transpose(const T* src, int rows, int cols, T* dst) {
  for (int r0 = 0; r0 < rows; r0 += 16)
    for (int c0 = 0; c0 < cols; c0 += 16) {
#if defined(__AVX512F__)
      if constexpr (std::is_same_v<T, float>) {
        if (r0 + 16 <= rows && c0 + 16 <= cols) {
          Transpose16x16(src + size_t(r0) * cols + c0, size_t(cols), dst + size_t(c0) * rows + r0,
                         size_t(rows));
          continue;
        }
      }
#endif
      for (int r = r0; r < std::min(rows, r0 + 16); ++r)
        for (int c = c0; c < std::min(cols, c0 + 16); ++c)
          dst[size_t(c) * rows + r] = src[size_t(r) * cols + c];
    }
}

// dst = bf16(src * keep * keep_scale), through a stack buffer.
void DropoutToBf16(const float* src, const uint8_t* keep, float keep_scale, size_t n,
                   uint16_t* dst) {
  float tmp[256];
  for (size_t i = 0; i < n; i += 256) {
    const size_t m = std::min<size_t>(256, n - i);
#pragma omp simd
    for (size_t k = 0; k < m; ++k) tmp[k] = src[i + k] * (float(keep[i + k]) * keep_scale);
    ToBf16(tmp, m, dst + i);
  }
}

// The AVX-512 bf16 cells of vmath.h (LstmBackCell16Bf16) are compiled in.
#if defined(__AVX512F__) && defined(__AVX512BF16__)
constexpr bool kVectorBf16Cells = true;
#else
constexpr bool kVectorBf16Cells = false;
#endif
// The backward cells also write dz in gemm.h's blocked layout (AVX512BW's
// 16-bit permutes): the weight-gradient GEMMs read it without a copy.
#if defined(__AVX512F__) && defined(__AVX512BF16__) && defined(__AVX512BW__)
constexpr bool kVnniDz = true;
#else
constexpr bool kVnniDz = false;
#endif

// One barrier per timestep of the recurrence: the yielding SpinBarrier when the
// team has the planned size, else (OpenMP gave fewer threads) an OpenMP one.
inline void StepBarrier(SpinBarrier& barrier, int team, int planned) {
  if (team == planned) {
    barrier.Wait();
  } else {
#pragma omp barrier
  }
}

class TrainImpl final : public CpuTrainBackend {
 public:
  TrainImpl(const NetworkSpec& spec, int max_batch, int max_steps, Precision precision)
      : spec_(spec),
        layout_(ParamLayout::For(spec)),
        gru_(spec.architecture == Architecture::kGru),
        G_(GateCount(spec.architecture)),
        bf16_(precision == Precision::kBf16),
        max_b_(max_batch),
        max_t_(max_steps) {
    const size_t R = size_t(max_batch) * max_steps;
    const int V = spec.vocab_size, E = spec.embedding_dim, H = spec.rnn_units, L = spec.num_layers;
    const size_t GH = size_t(G_) * H;
    ub_ = UnitBlock(H);
    off_emb_ = layout_.offset("embedding");
    off_dw_ = layout_.offset("dense.w");
    off_db_ = layout_.offset("dense.b");
    const size_t total = layout_.total;
    params_.Resize(total);
    grads_.Resize(total);
    opt_m_.Resize(total);
    opt_v_.Resize(total);
    params_.Zero();
    grads_.Zero();
    opt_m_.Zero();
    opt_v_.Zero();
    x0_.Resize(R * E);
    wdt_.Resize(size_t(V) * H);
    for (int l = 0; l < L; ++l) {
      lay_.push_back(layout_.layer(l));
      const int in = lay_[l].in;
      wxp_.emplace_back(size_t(in) * GH);
      whp_.emplace_back(size_t(H) * GH);
      wxpt_.emplace_back(size_t(in) * GH);
      whpt_.emplace_back(size_t(H) * GH);
      bp_.emplace_back((gru_ ? 2 : 1) * GH);
      gates_.emplace_back(R * GH);
      c_.emplace_back(gru_ ? 0 : R * H);
      tc_.emplace_back(gru_ ? 0 : R * H);
      hn_.emplace_back(gru_ ? R * H : 0);
      h_.emplace_back(R * H);
      dz_.emplace_back(R * GH);
      dzh_.emplace_back(gru_ ? R * GH : 0);
      xd_.emplace_back(spec.dropout_rate > 0 ? R * H : 0);  // dropout(h_l), input of l+1
    }
    if (gru_) hz_.Resize(size_t(max_batch) * GH);
    for (int s = 0; s <= L; ++s)
      mask_.emplace_back(spec.dropout_rate > 0 ? R * (s == 0 ? E : H) : 0);
    const size_t wmax = size_t(std::max(E, H));
    dx_[0].Resize(R * wmax);
    dx_[1].Resize(R * wmax);
    dhrec_.Resize(size_t(max_batch) * H);
    dcn_.Resize(size_t(max_batch) * H);
    zeros_.Resize(std::max({size_t(E), GH, size_t(V)}));
    zeros_.Zero();
    ones_.Resize(H);
    std::memset(ones_.data(), 1, H);
    wscratch_.Resize(wmax * GH);
    bscratch_.Resize(2 * GH);
    if (bf16_) {
      for (int l = 0; l < L; ++l) {
        const int in = lay_[l].in;
        wxp16_.emplace_back(size_t(in) * GH);
        wxpt16_.emplace_back(size_t(in) * GH);
        whp16_.emplace_back(size_t(H) * GH);
        whpt16_.emplace_back(size_t(H) * GH);
        x16_.emplace_back(l == 0 || spec.dropout_rate > 0 ? R * in : 0);
        // max_batch zero rows first: h_{-1} for the d Wh GEMM over all R rows.
        h16_.emplace_back((R + max_batch) * H);
        std::memset(h16_.back().data(), 0, size_t(max_batch) * H * sizeof(uint16_t));
      }
      x16_.emplace_back(spec.dropout_rate > 0 ? R * H : 0);  // the dense input
      wd16_.Resize(size_t(V) * H);
      wdt16_.Resize(size_t(PadV()) * H);  // rows V..PadV() stay zero
      wdt16_.Zero();
      dz16_.Resize(R * GH);
      if (!gru_ && kVnniDz) {
        dzv16_.Resize(VnniPadK(R) * GH);
        xt16_.Resize(wmax * LdT(int(R)));
      }
      if (gru_) dzh16_.Resize(R * GH);
      zs_.Resize(size_t(max_batch) * GH);
      pack_fwd_.resize(L);
      pack_fwdx_.resize(L);
      pack_bwd_.resize(L);
      pack_dx_.resize(L);
    }
  }

  std::string name() const override { return "cpu"; }
  Precision precision() const override { return bf16_ ? Precision::kBf16 : Precision::kFp32; }
  const NetworkSpec& spec() const override { return spec_; }
  const ParamLayout& layout() const override { return layout_; }

  void SetParams(const float* host) override {
    std::memcpy(params_.data(), host, layout_.total * sizeof(float));
    perm_dirty_ = true;
  }
  void SetParamsExcept(const float* host, size_t begin, size_t end) override {
    if (!(begin <= end && end <= layout_.total))
      DS_THROW(kInvalidArgument, "parameters [{}, {}) outside the {} parameters", begin, end,
               layout_.total);
    std::memcpy(params_.data(), host, begin * sizeof(float));
    std::memcpy(params_.data() + end, host + end, (layout_.total - end) * sizeof(float));
    perm_dirty_ = true;
  }
  void GetParams(float* host) const override {
    std::memcpy(host, params_.data(), layout_.total * sizeof(float));
  }
  void GetGrads(float* host) const override {
    std::memcpy(host, grads_.data(), layout_.total * sizeof(float));
  }
  void SetGrads(const float* host) override {
    std::memcpy(grads_.data(), host, layout_.total * sizeof(float));
  }
  void SetThreads(int threads) override { threads_ = std::max(0, threads); }

  StepStats Step(const Batch& batch, bool train, uint64_t dropout_seed,
                 const PerExampleClip* clip) override;
  // The gradient written straight into `grads` (no copy): the step writes
  // every tensor, the padding between them is zeroed here (grads_'s is zero).
  StepStats StepInto(const Batch& batch, uint64_t dropout_seed, float* grads) override {
    grads_out_ = grads;
    struct Reset {
      float** p;
      ~Reset() { *p = nullptr; }
    } reset{&grads_out_};
    const StepStats s = Step(batch, /*train=*/true, dropout_seed, nullptr);
    size_t end = 0;
    for (const ParamTensor& t : layout_.tensors) {
      std::fill(grads + end, grads + t.offset, 0.0f);
      end = t.offset + t.size();
    }
    std::fill(grads + end, grads + layout_.total, 0.0f);
    return s;
  }
  void ForwardLogits(const Batch& batch, float* logits) override;
  void ApplyOptimizer(const OptimizerConfig& opt, int64_t step) override;

  std::vector<float> GetOptimizerState() const override {
    std::vector<float> s(2 * layout_.total);
    std::memcpy(s.data(), opt_m_.data(), layout_.total * sizeof(float));
    std::memcpy(s.data() + layout_.total, opt_v_.data(), layout_.total * sizeof(float));
    return s;
  }
  Status SetOptimizerState(const std::vector<float>& state) override {
    if (state.empty()) {
      opt_m_.Zero();
      opt_v_.Zero();
      return Status::Ok();
    }
    if (state.size() != 2 * layout_.total) {
      return DS_ERR(kCorrupt, "optimizer state has {} floats, expected {} (2 x {} parameters)",
                    state.size(), 2 * layout_.total, layout_.total);
    }
    std::memcpy(opt_m_.data(), state.data(), layout_.total * sizeof(float));
    std::memcpy(opt_v_.data(), state.data() + layout_.total, layout_.total * sizeof(float));
    return Status::Ok();
  }

 private:
  // The big GEMMs over all timesteps: split by us into per-thread serial GEMMs
  // along `split` (default, measured faster on 2 cores) or, with
  // DATASYNTH_CPU_GEMM_SPLIT=0, threaded by the library.
  void BigGemm(char split, bool ta, bool tb, int m, int n, int k, float alpha, const float* a,
               int lda, const float* b, int ldb, float beta, float* c, int ldc) const {
    if (bf16_) {
      MixedGemmSplit(nt_, split, ta, tb, m, n, k, alpha, a, lda, b, nullptr, ldb, beta, c, ldc);
    } else if (split_big_gemms_) {
      SgemmSplit(nt_, split, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    } else {
      SgemmThreads(nt_, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
  }
  // One GEMM on the calling thread in the backend's precision; b16 is B
  // already rounded to bf16 (or null: rounded here), used only in bf16.
  void Gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
            const float* b, const uint16_t* b16, int ldb, float beta, float* c, int ldc) const {
    if (bf16_) {
      MixedGemmSerial(ta, tb, m, n, k, alpha, a, lda, b, b16, ldb, beta, c, ldc);
    } else {
      SgemmSerial(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
  }
  int Threads() const { return threads_ > 0 ? threads_ : std::max(1, omp_get_max_threads()); }
  void Validate(const Batch& batch) const;
  float W(const Batch& batch, int b, int t) const {
    return batch.weights.empty() ? 1.0f : batch.weights[size_t(b) * batch.steps + t];
  }
  // The legal ids [lo, hi) of target (b, t) (Batch::legal_lo/hi; unchanged
  // when the batch has none).
  static void Legal(const Batch& batch, int b, int t, int* lo, int* hi) {
    if (batch.legal_lo.empty()) return;
    *lo = batch.legal_lo[size_t(b) * batch.steps + t];
    *hi = batch.legal_hi[size_t(b) * batch.steps + t];
  }
  void RefreshPermuted();
  void Unpermute(const float* src, int rows, float* dst) const;
  const float* LayerInput(int l) const {
    if (l == 0) return x0_.data();
    return dropout_on_ ? xd_[l - 1].data() : h_[l - 1].data();
  }
  // bf16: LayerInput(l) rounded (l = L: the dense input), written where it
  // is produced (the embedding lookup, the dropout pass, the cells' h16_).
  const uint16_t* X16(int l) const {
    if (l == 0 || dropout_on_) return x16_[l].data();
    return H16(l - 1);
  }
  // bf16: [R, H] h_t of layer l rounded, preceded by max_b_ zero rows.
  uint16_t* H16(int l) { return h16_[l].data() + size_t(max_b_) * spec_.rnn_units; }
  const uint16_t* H16(int l) const { return h16_[l].data() + size_t(max_b_) * spec_.rnn_units; }
  // The vocabulary padded to 16: the K of the bf16 dense dX GEMM (oneDNN's
  // bf16 kernels run an odd K such as 69 several times slower).
  int PadV() const { return (spec_.vocab_size + 15) & ~15; }
  void Forward(const Batch& batch, uint64_t seed);
  void RecurrenceForward(int l);
  void StreamCells(int l, int t, int k0, int k1);
  void RecurrenceBackward(int l, const float* dh_above, bool accumulate_bias);
  void GruForward(int l);
  void GruBackward(int l, const float* dh_above, bool accumulate_bias);
  // dL/d(h-side pre-activations) of layer l: dz_ itself for the LSTM (one
  // pre-activation per gate), dzh_ for the GRU.
  float* DzH(int l) { return gru_ ? dzh_[l].data() : dz_[l].data(); }
  // rounded: use the bf16 copies of x, h and dz (bf16 only; not after the
  // clip path rescaled dz).
  void LayerWeightGrads(int l, bool rounded, const float* xscale = nullptr);
  void ScaledRowsBf16(const uint16_t* src, int width, const float* s, uint16_t* dst);
  void ScaledTransposeBf16(const uint16_t* src, int width, const float* s, uint16_t* dst, int ldd);
  void PairDzRows(size_t row, int b, int c, size_t kpad);
  void ClipBiasFromSums(const float* s);
  void ClipScaleRows(int l, const float* s);
  StepStats ClipStep(const Batch& batch, const PerExampleClip& clip);
  // dX_l = dZ_l Wx^T into dx (bf16: from the rounded dz and weights).
  void LayerInputGrad(int l, float* dx);
  StepStats DenseStage(const Batch& batch, bool train, double count, float* dxd, float* logits_out);
  // Dense rows dense_order_[pos, pos + n) (rows pos .. pos + n - 1 when
  // dense_direct_) with logits over ids [lo, hi).
  struct DenseRun {
    int pos, n, lo, hi;
  };
  void PlanDense(const Batch& batch, int nt, bool ranged);
  void DenseRunRows(const Batch& batch, const DenseRun& run, bool train, float inv_count, int j,
                    float* dw, float* db, float* dxd, float* logits_out, bool* first,
                    StepStats* st);
  StepStats DenseClipNorms(const Batch& batch, float* dxd, double* norm2);
  void DenseClipGrads(const Batch& batch, const double* scale);
  void SumDenseThreadGrads(int nt);
  bool PlanClipRanged(const Batch& batch);
  StepStats ClipRangedNorms(const Batch& batch, float* dxd, double* norm2);
  void ClipRangedPairs(const Batch& batch, double* norm2);
  void ClipRangedGrads(const Batch& batch, const float* s);
  // slack[b] += sum_t ||x_t|| ||dz_t|| + ||h_{t-1}|| ||dzh_t|| (bf16: the
  // rounding bound of the weight-gradient GEMMs, see ClipStep).
  void ClipLayerNorms(int l, double* norm2, double* slack);
  void ClipEmbeddingNorms(const Batch& batch, const float* dx0, double* norm2);
  void EmbeddingGrad(const Batch& batch, const float* dx0);
  void ApplyMaskInPlace(int site, float* x, int width);

  NetworkSpec spec_;
  ParamLayout layout_;
  bool gru_;                                // architecture gru (else lstm)
  int G_;                                   // gates per unit: 4 (lstm), 3 (gru)
  bool bf16_;                               // precision bf16 (docs/precision.md)
  std::vector<ParamLayout::RnnLayer> lay_;  // per layer offsets
  size_t off_emb_ = 0, off_dw_ = 0, off_db_ = 0;
  int max_b_, max_t_;
  int ub_ = 16;
  int threads_ = 0;
  // Per-step state, set by Step.
  int B_ = 0, T_ = 0, R_ = 0, nt_ = 1;
  bool dropout_on_ = false;
  // bf16 without the clip path: the fp32 copies of the dropped-out layer
  // inputs, of the embedding lookup and tanh(c) are not stored (only the clip
  // path and fp32 read them).
  bool lean_ = false;
  bool perm_dirty_ = true;
  const bool split_big_gemms_ = [] {
    const char* e = std::getenv("DATASYNTH_CPU_GEMM_SPLIT");
    return !(e && std::string(e) == "0");
  }();

  Buffer<float> params_, grads_;  // [total] ParamLayout
  float* grads_out_ = nullptr;    // StepInto's destination, else null
  // Where a training step writes its gradient: StepInto's buffer, else grads_.
  float* Grads() { return grads_out_ ? grads_out_ : grads_.data(); }
  Buffer<float> opt_m_, opt_v_;   // [total] optimizer slots
  // G = G_, GH = G * H. Gate columns permuted as described in cpu_backend.h.
  std::vector<Buffer<float>> wxp_;     // per layer [In, GH] Wx, gate columns permuted
  std::vector<Buffer<float>> whp_;     // per layer [H, GH]
  std::vector<Buffer<float>> wxpt_;    // per layer [GH, In] = wxp^T (dX = dZ wxpt: a plain NN GEMM)
  Buffer<float> wdt_;                  // [V, H] = Wd^T (dX = dlogits wdt: a plain NN GEMM)
  std::vector<Buffer<float>> whpt_;    // per layer [GH, H] = whp^T (per-step dz whpt)
  std::vector<Buffer<float>> bp_;      // per layer [GH] (lstm) / [2, GH] bx, bh (gru)
  Buffer<float> x0_;                   // [R, Emb] dropout(E[tok]), time-major rows
  std::vector<Buffer<float>> gates_;   // per layer [R, GH] permuted; x Wx, then activated
                                       // i,f,g,o (lstm) / z,r,n (gru)
  std::vector<Buffer<float>> c_;       // per layer [R, H] cell state c_t (lstm only)
  std::vector<Buffer<float>> tc_;      // per layer [R, H] tanh(c_t) (lstm only)
  std::vector<Buffer<float>> hn_;      // per layer [R, H] u_n = h_{t-1} Wh_n + bh_n (gru only)
  Buffer<float> hz_;                   // [maxB, GH] permuted h_{t-1} Wh of one step (gru only)
  std::vector<Buffer<float>> h_;       // per layer [R, H] h_t
  std::vector<Buffer<float>> xd_;      // per layer [R, H] dropout(h_t) (dropout > 0 only)
  std::vector<Buffer<uint8_t>> mask_;  // per site [R, width] keep flags (dropout > 0 only)
  std::vector<Buffer<float>> dz_;      // per layer [R, GH] permuted dL/d(x-side pre-activation)
  std::vector<Buffer<float>> dzh_;     // per layer [R, GH] permuted dL/d(h-side) (gru only)
  Buffer<float> dx_[2];                // [R, max(Emb, H)] ping-pong dL/d(layer input)
  Buffer<float> dhrec_;                // [maxB, H] dzh_{t+1} Wh^T
  Buffer<float> dcn_;                  // [maxB, H] carried to t-1: dL/dc_t (lstm), dh_t * z_t (gru)
  Buffer<uint8_t> ones_;               // [H] all-ones keep mask (no dropout)
  Buffer<float> zeros_;                // [max(Emb, GH, V)] zeros (c_{-1}, h_{-1}, ...)
  Buffer<float> wscratch_;             // [max(Emb, H), GH] permuted weight gradient
  Buffer<float> bscratch_;             // [2, GH] permuted bias gradient (row 1: gru's bh)
  // bf16 only: rounded copies of the weights (made by RefreshPermuted, once
  // per optimizer step) and of the activations and gradients the GEMMs read,
  // each rounded once where it is produced: the layer input by Forward, h_t
  // and dz_t by the cells of the recurrence (one step's rows are also the
  // left operand of the next step's recurrent GEMM).
  std::vector<Buffer<uint16_t>> wxp16_, wxpt16_, whp16_, whpt16_;  // per layer, as wxp_ ...
  Buffer<uint16_t> wd16_, wdt16_;                 // [H, V] Wd, [PadV, H] wdt_ (zero rows)
  std::vector<Buffer<uint16_t>> x16_;             // [L + 1] [R, In] LayerInput(l) (X16)
  std::vector<Buffer<uint16_t>> h16_;             // per layer [maxB + R, H] 0, h_t (H16)
  Buffer<uint16_t> dz16_;                         // [R, GH] dz of the layer in backward
  // The same in gemm.h's blocked layout ([VnniPadK(R), GH], VnniOffset), for
  // B of the lstm's dWh and dWx GEMMs; written when dzv_ok_ (RecurrenceBackward).
  Buffer<uint16_t> dzv16_;
  bool dzv_ok_ = false;
  // [max(Emb, H), LdT(R)] the A operand of those GEMMs (h_{t-1} or x), transposed.
  Buffer<uint16_t> xt16_;
  static int LdT(int r) { return r; }
  Buffer<uint16_t> dzh16_;                        // [R, GH] dzh (gru only)
  // Clip path, bf16 lstm (ClipStep): layer 0's weight gradients scale the A
  // side of the GEMMs (s_b x_t, s_b h_{t-1}) instead of dz, so that the
  // backward's own dz16_ / dzv16_ serve (no pass over dz); pbias_ holds each
  // example's sum_t dz_t, its bias gradient before the clip factor.
  bool clip_xs_ = false;
  Buffer<float> pbias_;    // [maxB, GH]
  Buffer<uint16_t> xs16_;  // [R, max(Emb, H)] s_b x_t or s_b h_{t-1}, rounded
  Buffer<float> zs_;                              // [maxB, GH] z_t of the lstm's step
  // bf16: each recurrence thread's slice of Wh (forward) and Wh^T (backward)
  // per layer, packed by oneDNN once per weights version and reused by the T
  // per-step GEMMs.
  struct PackedSlice {
    PackedBgemm gemm;
    uint64_t version = ~uint64_t(0);
    int col = -1;
  };
  std::vector<std::vector<PackedSlice>> pack_fwd_, pack_bwd_;  // [layer][thread]
  std::vector<std::vector<PackedSlice>> pack_fwdx_;            // Wx slices (lstm)
  std::vector<std::vector<PackedSlice>> pack_dx_;              // Wx^T row blocks (dX)
  uint64_t weights_version_ = 0;  // bumped by RefreshPermuted
  // The packed slice of thread j (packing it first when stale).
  PackedBgemm& Packed(std::vector<PackedSlice>& v, int j, int m, int n, int k, int lda, int ldc,
                      float beta, const uint16_t* b, int ldb, int col) {
    PackedSlice& ps = v[size_t(j)];
    if (ps.version != weights_version_ || ps.col != col ||
        !ps.gemm.Matches(m, n, k, lda, ldc, beta)) {
      ps.gemm.Pack(m, n, k, lda, ldc, beta, b + col, ldb);
      ps.version = weights_version_;
      ps.col = col;
    }
    return ps.gemm;
  }
  // Dense stage, per thread.
  std::vector<Buffer<float>> dense_logits_;  // per thread [rows_chunk, V]
  std::vector<Buffer<float>> dense_dw_;      // per thread [H, V] (thread 0: grads)
  std::vector<Buffer<float>> dense_db_;      // per thread [V]
  std::vector<Buffer<uint16_t>> dense_dl16_;  // per thread [rows_chunk, V] dlogits (bf16)
  std::vector<Buffer<float>> gram_;          // per thread [3, T, T] Gram scratch
  std::vector<Buffer<float>> dense_xg_, dense_dxg_;  // per thread [run rows, H] gathered X, dX
  std::vector<Buffer<uint16_t>> dense_xg16_;         // per thread [run rows, H] gathered X (bf16)
  std::vector<int> dense_order_;                     // [R] rows sorted by legal range
  // Clip path with legal ranges (PlanClipRanged): the dlogits of sorted row p
  // (dense_order_) at clip_dl_ + clip_off_[p] (its range's width; p = R: the
  // total); clip_row_off_[r] the same by row r.
  Buffer<float> clip_dl_;
  std::vector<int64_t> clip_off_, clip_row_off_;
  std::vector<double> clip_diag_;  // [R] (x_r.x_r + 1)(d_r.d_r) (ClipRangedNorms)
  std::vector<float> clip_inv_;  // [B] 1 / (example b's weight sum), 0 when none
  // Clip path: example b's rows t >= clip_len_[b] have weight 0, hence zero
  // gradients (the backward runs from later to earlier steps only).
  std::vector<int> clip_len_;
  std::vector<std::vector<DenseRun>> dense_runs_;    // per thread, by PlanDense
  bool dense_direct_ = true;                         // runs index rows, not dense_order_
  Profile prof_;
};

void TrainImpl::Validate(const Batch& batch) const {
  if (batch.batch <= 0 || batch.steps <= 0 || batch.batch > max_b_ || batch.steps > max_t_) {
    DS_THROW(kInvalidArgument, "batch {}x{} outside the backend's 1..{} x 1..{}", batch.batch,
             batch.steps, max_b_, max_t_);
  }
  const size_t n = size_t(batch.batch) * batch.steps;
  if (batch.inputs.size() != n || batch.targets.size() != n ||
      (!batch.weights.empty() && batch.weights.size() != n)) {
    DS_THROW(kInvalidArgument, "batch arrays do not match {}x{}", batch.batch, batch.steps);
  }
  for (size_t i = 0; i < n; ++i) {
    if (uint32_t(batch.inputs[i]) >= uint32_t(spec_.vocab_size) ||
        uint32_t(batch.targets[i]) >= uint32_t(spec_.vocab_size)) {
      DS_THROW(kInvalidArgument, "token id out of range [0, {}) at position {}", spec_.vocab_size,
               i);
    }
  }
  ValidateLegalRanges(batch, spec_.vocab_size);
}

// Standard gate-major column c = g*H + k*ub + u  <->  permuted k*G*ub + g*ub + u
// (G = 4 for the lstm, 3 for the gru).
void TrainImpl::RefreshPermuted() {
  if (!perm_dirty_) return;
  const int H = spec_.rnn_units, ub = ub_, nb = H / ub, G = G_, GH = G * H;
  auto permute = [&](const float* src, int rows, float* dst) {
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < nb; ++k)
        for (int g = 0; g < G; ++g)
          std::memcpy(dst + size_t(r) * GH + (k * G + g) * ub,
                      src + size_t(r) * GH + g * H + k * ub, ub * sizeof(float));
  };
  // The same permutation rounding to bf16 on the way (no fp32 copy).
  auto permute16 = [&](const float* src, int rows, uint16_t* dst) {
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < nb; ++k)
        for (int g = 0; g < G; ++g)
          ToBf16(src + size_t(r) * GH + g * H + k * ub, ub, dst + size_t(r) * GH + (k * G + g) * ub);
  };
  // bf16: the permuted weights only as bf16 (the fp32 forms are read only by
  // the fp32 GEMMs), transposed after rounding (the same values: rounding
  // commutes with permuting and transposing).
  for (int l = 0; l < spec_.num_layers; ++l) {
    const auto& L = lay_[l];
    permute(params_.data() + L.b, gru_ ? 2 : 1, bp_[l].data());
    if (bf16_) {
      permute16(params_.data() + L.wx, L.in, wxp16_[l].data());
      permute16(params_.data() + L.wh, H, whp16_[l].data());
      TransposeBf16Split(nt_, L.in, GH, wxp16_[l].data(), GH, wxpt16_[l].data(), L.in);
      TransposeBf16Split(nt_, H, GH, whp16_[l].data(), GH, whpt16_[l].data(), H);
    } else {
      permute(params_.data() + L.wx, L.in, wxp_[l].data());
      permute(params_.data() + L.wh, H, whp_[l].data());
      Transpose(wxp_[l].data(), L.in, GH, wxpt_[l].data());
      Transpose(whp_[l].data(), H, GH, whpt_[l].data());
    }
  }
  if (bf16_) {
    ToBf16(params_.data() + off_dw_, size_t(H) * spec_.vocab_size, wd16_.data());
    Transpose(wd16_.data(), H, spec_.vocab_size, wdt16_.data());
    ++weights_version_;
  } else {
    Transpose(params_.data() + off_dw_, H, spec_.vocab_size, wdt_.data());
  }
  perm_dirty_ = false;
}

void TrainImpl::Unpermute(const float* src, int rows, float* dst) const {
  const int H = spec_.rnn_units, ub = ub_, nb = H / ub, G = G_, GH = G * H;
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < nb; ++k)
      for (int g = 0; g < G; ++g)
        std::memcpy(dst + size_t(r) * GH + g * H + k * ub, src + size_t(r) * GH + (k * G + g) * ub,
                    ub * sizeof(float));
}

void TrainImpl::Forward(const Batch& batch, uint64_t seed) {
  const int B = B_, T = T_, E = spec_.embedding_dim, H = spec_.rnn_units;
  const float keep_scale = dropout_on_ ? 1.0f / (1.0f - spec_.dropout_rate) : 1.0f;
  const float* emb = params_.data() + off_emb_;
  // Embedding lookup (+ dropout site 0), one timestep per iteration.
#pragma omp parallel for num_threads(nt_) schedule(static)
  for (int t = 0; t < T; ++t) {
    uint8_t* m = dropout_on_ ? mask_[0].data() + size_t(t) * B * E : nullptr;
    if (m) DrawKeepMask(seed, 0, t, spec_.dropout_rate, m, size_t(B) * E);
    for (int b = 0; b < B; ++b) {
      const float* src = emb + size_t(batch.inputs[size_t(b) * T + t]) * E;
      if (lean_) {  // only the bf16 copy is read: rounded straight from the table
        uint16_t* d16 = x16_[0].data() + (size_t(t) * B + b) * E;
        if (m) {
          DropoutToBf16(src, m + size_t(b) * E, keep_scale, E, d16);
        } else {
          ToBf16(src, E, d16);
        }
        continue;
      }
      float* dst = x0_.data() + (size_t(t) * B + b) * E;
      if (m) {
        const uint8_t* mb = m + size_t(b) * E;
#pragma omp simd
        for (int e = 0; e < E; ++e) dst[e] = src[e] * (float(mb[e]) * keep_scale);
      } else {
        std::memcpy(dst, src, E * sizeof(float));
      }
    }
    if (bf16_ && !lean_)
      ToBf16(x0_.data() + size_t(t) * B * E, size_t(B) * E, x16_[0].data() + size_t(t) * B * E);
  }
  prof_.Mark(kEmbed);
  for (int l = 0; l < spec_.num_layers; ++l) {
    const int in = lay_[l].in, GH = G_ * H;
    if (bf16_) {
      // The lstm's recurrence computes x_t Wx per step itself.
      if (gru_)
        BgemmSplit(nt_, 'm', false, false, R_, GH, in, 1.0f, X16(l), in, wxp16_[l].data(), GH,
                   0.0f, gates_[l].data(), GH);
    } else {
      BigGemm('m', false, false, R_, GH, in, 1.0f, LayerInput(l), in, wxp_[l].data(), GH, 0.0f,
              gates_[l].data(), GH);
    }
    prof_.Mark(kFwdGemm);
    if (gru_) {
      GruForward(l);
    } else {
      RecurrenceForward(l);
    }
    prof_.Mark(kFwdRec);
    if (dropout_on_) {
#pragma omp parallel for num_threads(nt_) schedule(static)
      for (int t = 0; t < T; ++t) {
        const size_t off = size_t(t) * B * H, n = size_t(B) * H;
        uint8_t* m = mask_[l + 1].data() + off;
        DrawKeepMask(seed, l + 1, t, spec_.dropout_rate, m, n);
        const float* src = h_[l].data() + off;
        if (lean_) {
          DropoutToBf16(src, m, keep_scale, n, x16_[l + 1].data() + off);
          continue;
        }
        float* dst = xd_[l].data() + off;
#pragma omp simd
        for (size_t i = 0; i < n; ++i) dst[i] = src[i] * (float(m[i]) * keep_scale);
        if (bf16_) ToBf16(dst, n, x16_[l + 1].data() + off);
      }
      prof_.Mark(kDropout);
    }
  }
}

void TrainImpl::RecurrenceForward(int l) {
  const int B = B_, T = T_, H = spec_.rnn_units, ub = ub_, nb = H / ub, H4 = 4 * H;
  const int ntr = std::min(nt_, nb);
  float* gates = gates_[l].data();
  float* cbuf = c_[l].data();
  float* tcbuf = tc_[l].data();
  float* hbuf = h_[l].data();
  const float* whp = whp_[l].data();
  const float* bp = bp_[l].data();
  const float* zeros = zeros_.data();
  const uint16_t* whp16 = bf16_ ? whp16_[l].data() : nullptr;
  uint16_t* h16 = bf16_ ? H16(l) : nullptr;  // [R, H]
  // bf16: z_t = x_t Wx (+ h_{t-1} Wh) per step, while z_t is in cache (x16_
  // rounded by Forward), instead of one GEMM over all steps before.
  const int in = lay_[l].in;
  const uint16_t* x16 = bf16_ ? X16(l) : nullptr;  // [R, in]
  const uint16_t* wxp16 = bf16_ ? wxp16_[l].data() : nullptr;
  if (bf16_) pack_fwd_[l].resize(std::max<size_t>(pack_fwd_[l].size(), ntr));
  if (bf16_) pack_fwdx_[l].resize(std::max<size_t>(pack_fwdx_[l].size(), ntr));
  // bf16 with the vector cells: the GEMMs write z_t to the cache-resident
  // scratch zs_ and the cells stream the activations out (StreamCells).
  const bool stream = bf16_ && ub == 16 && kVectorBf16Cells;
  SpinBarrier barrier(ntr);
#pragma omp parallel num_threads(ntr)
  {
    const int j = omp_get_thread_num(), nj = omp_get_num_threads();
    const int k0 = j * nb / nj, k1 = (j + 1) * nb / nj;
    const int c0 = k0 * 4 * ub, nc = (k1 - k0) * 4 * ub;
    PackedBgemm* pg = whp16 && nc > 0 && T > 1
                          ? &Packed(pack_fwd_[l], j, B, nc, H, H, H4, 1.0f, whp16, H4, c0)
                          : nullptr;
    PackedBgemm* px = x16 && nc > 0
                          ? &Packed(pack_fwdx_[l], j, B, nc, in, in, H4, 0.0f, wxp16, H4, c0)
                          : nullptr;
    for (int t = 0; t < T; ++t) {
      float* z = gates + size_t(t) * B * H4;  // [B, 4H]
      float* zg = stream ? zs_.data() : z;     // where the GEMMs write z_t
      if (px) px->Run(x16 + size_t(t) * B * in, zg + c0);
      if (t > 0 && nc > 0) {
        if (whp16) {
          pg->Run(h16 + size_t(t - 1) * B * H, zg + c0);
        } else {
          SgemmSerial(false, false, B, nc, H, 1.0f, hbuf + size_t(t - 1) * B * H, H, whp + c0, H4,
                      1.0f, z + c0, H4);
        }
      }
      if (stream) {
        StreamCells(l, t, k0, k1);
        StepBarrier(barrier, nj, ntr);
        continue;
      }
      for (int b = 0; b < B; ++b) {
        const size_t row = size_t(t) * B + b;
        for (int k = k0; k < k1; ++k) {
          float* zr = z + size_t(b) * H4 + k * 4 * ub;  // [i f g o] x ub
          const float* bb = bp + k * 4 * ub;
          const float* cp = t > 0 ? cbuf + (row - B) * H + k * ub : zeros;
          float* cr = cbuf + row * H + k * ub;
          float* tcr = tcbuf + row * H + k * ub;
          float* hr = hbuf + row * H + k * ub;
          LstmCell(ub, zr, zr + ub, zr + 2 * ub, zr + 3 * ub, bb, bb + ub, bb + 2 * ub, bb + 3 * ub,
                   cp, cr, tcr, hr);
          if (h16) ToBf16(hr, ub, h16 + row * H + k * ub);
        }
      }
      StepBarrier(barrier, nj, ntr);
    }
  }
}

// The cells of step t, unit blocks k0..k1 (16 units each), from z_t in zs_
// (x_t Wx + h_{t-1} Wh) to gates_, c_, tc_, h_ and h16_ (LstmCell16Stream).
void TrainImpl::StreamCells(int l, int t, int k0, int k1) {
#if defined(__AVX512F__) && defined(__AVX512BF16__)
  const int B = B_, H = spec_.rnn_units, H4 = 4 * H;
  const float* bp = bp_[l].data();
  for (int b = 0; b < B; ++b) {
    const size_t row = size_t(t) * B + b;
    const float* zr = zs_.data() + size_t(b) * H4;
    float* gr = gates_[l].data() + row * H4;
    float* cr = c_[l].data() + row * H;
    const float* cp = t > 0 ? cr - size_t(B) * H : zeros_.data();
    float* tcr = lean_ ? nullptr : tc_[l].data() + row * H;  // lean_: recomputed
    float* hr = h_[l].data() + row * H;
    uint16_t* h16 = H16(l) + row * H;
    for (int k = k0; k < k1; ++k) {
      const int g = k * 64, u = k * 16;
      LstmCell16Stream(zr + g, bp + g, t > 0 ? cp + u : cp, gr + g, cr + u, tcr ? tcr + u : nullptr,
                       hr + u, h16 + u);
    }
  }
  _mm_sfence();
#else
  (void)l, (void)t, (void)k0, (void)k1;
  DS_CHECK(false);  // only called with the vector cells compiled in
#endif
}

// The threads' (or examples') statistics, summed in order.
StepStats SumStats(const std::vector<StepStats>& parts) {
  StepStats st;
  for (const auto& p : parts) {
    st.loss_sum += p.loss_sum;
    st.correct += p.correct;
    st.count += p.count;
  }
  return st;
}

// One block of ub units of the LSTM cell backward (network.h), fp32: from the gates
// i f g o (gr [4ub]), c_{t-1} (cp), tanh(c_t) (tcr), dL/dh from above (dha, masked by mr
// and scaled) plus the recurrent dL/dh (dhr) and the carried dL/dc (dcr, updated to
// dL/dc_{t-1}): dz [4ub] of the gate pre-activations.
inline void LstmBackCell(int ub, const float* gr, const float* cp, const float* tcr,
                         const float* dha, const uint8_t* mr, float keep_scale, const float* dhr,
                         float* dcr, float* dzr) {
#pragma omp simd
  for (int u = 0; u < ub; ++u) {
    float m = float(mr[u]) * keep_scale;
    float dh = dha[u] * m + dhr[u];
    float i = gr[u], f = gr[ub + u], g = gr[2 * ub + u], o = gr[3 * ub + u];
    float tch = tcr[u];
    float dc = dh * o * (1.0f - tch * tch) + dcr[u];
    dcr[u] = dc * f;
    dzr[u] = dc * g * i * (1.0f - i);
    dzr[ub + u] = dc * cp[u] * f * (1.0f - f);
    dzr[2 * ub + u] = dc * i * (1.0f - g * g);
    dzr[3 * ub + u] = dh * tch * o * (1.0f - o);
  }
}

// One block of ub units of the GRU cell backward (GruBackward's formulas), fp32: from the
// gates z r n (gr [3ub]), h_{t-1} (hp), u_n + bh_n (hn), dL/dh from above (dha, masked by
// mr and scaled) plus the recurrent dL/dh (dhr) and the carried dh z (cr, updated): the
// x-side (ax [3ub]) and h-side (ah [3ub]) gradients of the pre-activations.
inline void GruBackCell(int ub, const float* gr, const float* hp, const float* hn,
                        const float* dha, const uint8_t* mr, float keep_scale, const float* dhr,
                        float* cr, float* ax, float* ah) {
#pragma omp simd
  for (int u = 0; u < ub; ++u) {
    float dh = dha[u] * (float(mr[u]) * keep_scale) + dhr[u] + cr[u];
    float z = gr[u], r = gr[ub + u], n = gr[2 * ub + u];
    float dn = dh * (1.0f - z) * (1.0f - n * n);
    float dzz = dh * (hp[u] - n) * z * (1.0f - z);
    float dr = dn * hn[u] * r * (1.0f - r);
    cr[u] = dh * z;
    ax[u] = dzz;
    ax[ub + u] = dr;
    ax[2 * ub + u] = dn;
    ah[u] = dzz;
    ah[ub + u] = dr;
    ah[2 * ub + u] = dn * r;
  }
}

// Zeroes a thread's columns [u0, u0 + nu) of two [B, H] buffers (the recurrent dL/dh and
// the carried state gradient) before the backward pass through time.
inline void ZeroColumns(float* a, float* b, int B, int H, int u0, int nu) {
  for (int r = 0; r < B; ++r) {
    std::memset(a + size_t(r) * H + u0, 0, nu * sizeof(float));
    std::memset(b + size_t(r) * H + u0, 0, nu * sizeof(float));
  }
}

#if defined(__AVX512BW__)
// dzv16_'s row pair holding dz16_ row `row` (example b), columns c..c+63, once
// both rows exist: the backward writes rows from t = T - 1 down, b upwards, so
// an odd row pairs with row - 1 of its own timestep (b > 0), and the last row
// of a timestep (even) with row + 1 (b = 0 of t + 1, written earlier) or, past
// the end (odd R), with zeros.
void TrainImpl::PairDzRows(size_t row, int b, int c, size_t kpad) {
  alignas(64) static constexpr uint16_t kZero[64] = {};
  const size_t H4 = size_t(G_) * spec_.rnn_units;
  const uint16_t* d = dz16_.data() + c;
  uint16_t* v = dzv16_.data();
  if (row & 1) {
    if (b > 0) InterleaveBf16Pair64(d + (row - 1) * H4, d + row * H4, v + VnniOffset(row - 1, c, kpad));
  } else if (b == B_ - 1) {
    const uint16_t* next = row + 1 < size_t(R_) ? d + (row + 1) * H4 : kZero;
    InterleaveBf16Pair64(d + row * H4, next, v + VnniOffset(row, c, kpad));
  }
}
#endif

// dh_above: [R, H] dL/d(dropout(h_l)) (pre-mask) from the layer above / dense.
// Writes dz_[l]; with accumulate_bias, the permuted bias gradient to bscratch_.
void TrainImpl::RecurrenceBackward(int l, const float* dh_above, bool accumulate_bias) {
  const int B = B_, T = T_, H = spec_.rnn_units, ub = ub_, nb = H / ub, H4 = 4 * H;
  const int ntr = std::min(nt_, nb);
  const float* gates = gates_[l].data();
  const float* cbuf = c_[l].data();
  const float* tcbuf = tc_[l].data();
  const float* whpt = whpt_[l].data();
  const uint16_t* whpt16 = bf16_ ? whpt16_[l].data() : nullptr;
  uint16_t* dz16 = bf16_ ? dz16_.data() : nullptr;  // [R, 4H]
  if (bf16_) pack_bwd_[l].resize(std::max<size_t>(pack_bwd_[l].size(), ntr));
  const uint8_t* mask = dropout_on_ ? mask_[l + 1].data() : nullptr;
  const float keep_scale = dropout_on_ ? 1.0f / (1.0f - spec_.dropout_rate) : 1.0f;
  float* dz = dz_[l].data();
  float* dhrec = dhrec_.data();
  float* dcn = dcn_.data();
  float* db = bscratch_.data();
  const float* zeros = zeros_.data();
  const uint8_t* ones = ones_.data();
  // bf16 without the clip path: dz only as bf16 (all its readers take that),
  // from the vector cell, the bias gradient summed from its registers.
  [[maybe_unused]] const bool bf16_only = lean_ && ub == 16 && kVectorBf16Cells;
  // bf16 on the clip path: the same vector cell, also storing fp32 dz.
  [[maybe_unused]] const bool bf16_cell = bf16_ && ub == 16 && kVectorBf16Cells;
  // With an even batch, rows 2i and 2i + 1 of dz (the same timestep) also go
  // to dzv16_ as one row pair of the blocked layout; its padding rows zero.
  // The clip path's layer 0 under clip_xs_ (ClipStep): the same for any batch
  // (a pair may straddle two timesteps) and each example's sum_t dz_t into
  // pbias_ (the bias gradient before its clip factor).
  const bool xs = clip_xs_ && l == 0 && bf16_cell;
  dzv_ok_ = (bf16_only && kVnniDz && B % 2 == 0) || xs;
  float* pbias = xs ? pbias_.data() : nullptr;  // [B, 4H]
  [[maybe_unused]] uint16_t* dzv = dzv_ok_ ? dzv16_.data() : nullptr;
  [[maybe_unused]] const size_t kpad = VnniPadK(size_t(R_));
  if (dzv && kpad != size_t(R_))
    for (int c = 0; c < H4; c += 64)
      std::memset(dzv + VnniOffset(kpad - 32, c, kpad), 0, 32 * 64 * sizeof(uint16_t));
  SpinBarrier barrier(ntr);
#pragma omp parallel num_threads(ntr)
  {
    const int j = omp_get_thread_num(), nj = omp_get_num_threads();
    const int k0 = j * nb / nj, k1 = (j + 1) * nb / nj;
    const int u0 = k0 * ub, nu = (k1 - k0) * ub;
    PackedBgemm* pg = whpt16 && nu > 0 && T > 1
                          ? &Packed(pack_bwd_[l], j, B, nu, H4, H4, H, 0.0f, whpt16, H, u0)
                          : nullptr;
    ZeroColumns(dhrec, dcn, B, H, u0, nu);
    if (accumulate_bias) std::memset(db + 4 * u0, 0, 4 * nu * sizeof(float));
    if (pbias)
      for (int b = 0; b < B; ++b) std::memset(pbias + size_t(b) * H4 + 4 * u0, 0, 4 * nu * sizeof(float));
    for (int t = T - 1; t >= 0; --t) {
      float* dzt = dz + size_t(t) * B * H4;  // [B, 4H]
      if (t < T - 1 && nu > 0) {
        // dhrec[:, u0:u0+nu] = dz_{t+1} [B, 4H] x whpt[:, u0:u0+nu]
        if (whpt16) {
          pg->Run(dz16 + size_t(t + 1) * B * H4, dhrec + u0);
        } else {
          SgemmSerial(false, false, B, nu, H4, 1.0f, dzt + size_t(B) * H4, H4, whpt + u0, H, 0.0f,
                      dhrec + u0, H);
        }
      }
      for (int b = 0; b < B; ++b) {
        const size_t row = size_t(t) * B + b;
        for (int k = k0; k < k1; ++k) {
          const int uo = k * ub;
          const float* gr = gates + row * H4 + k * 4 * ub;
          float* dzr = dzt + size_t(b) * H4 + k * 4 * ub;
          [[maybe_unused]] const float* cr = cbuf + row * H + uo;  // the bf16 cell's
          const float* cp = t > 0 ? cbuf + (row - B) * H + uo : zeros;
          const float* tcr = tcbuf + row * H + uo;
          const float* dha = dh_above + row * H + uo;
          // Without dropout: all-ones mask (keep_scale 1), no branch in the loop.
          const uint8_t* mr = mask ? mask + row * H + uo : ones;
          float* dhr = dhrec + size_t(b) * H + uo;
          float* dcr = dcn + size_t(b) * H + uo;
          float* dbr = db + k * 4 * ub;
#if defined(__AVX512F__) && defined(__AVX512BF16__)
          if (bf16_only) {
            LstmBackCell16Bf16(gr, cp, lean_ ? nullptr : tcr, cr, dha, mr, keep_scale, dhr, dcr,
                               dz16 + row * H4 + k * 4 * ub, dbr);
#if defined(__AVX512BW__)
            if (dzv && (b & 1))
              InterleaveBf16Pair64(dz16 + (row - 1) * H4 + k * 64, dz16 + row * H4 + k * 64,
                                   dzv + VnniOffset(row - 1, size_t(k) * 64, kpad));
#endif
            continue;
          }
          if (bf16_cell) {
            float* sums = pbias ? pbias + size_t(b) * H4 + k * 4 * ub : accumulate_bias ? dbr : nullptr;
            // xs: no fp32 dz (the Grams read dz16_, the bias its sums).
            LstmBackCell16Bf16(gr, cp, tcr, cr, dha, mr, keep_scale, dhr, dcr,
                               dz16 + row * H4 + k * 4 * ub, sums, xs ? nullptr : dzr);
#if defined(__AVX512BW__)
            if (xs) PairDzRows(row, b, k * 64, kpad);
#endif
            continue;
          }
#endif
          LstmBackCell(ub, gr, cp, tcr, dha, mr, keep_scale, dhr, dcr, dzr);
          if (dz16) ToBf16(dzr, 4 * ub, dz16 + row * H4 + k * 4 * ub);
          if (accumulate_bias) {
#pragma omp simd
            for (int u = 0; u < 4 * ub; ++u) dbr[u] += dzr[u];
          }
        }
      }
      StepBarrier(barrier, nj, ntr);
    }
#if defined(__AVX512F__)
    if (dzv) _mm_sfence();  // the non-temporal stores of dzv16_
#endif
  }
}

// The GRU recurrence (network.h), in the LSTM's threading: thread j owns unit
// blocks k0..k1 (all three gates of their units, columns c0..c0+nc of the
// permuted [B, 3H] rows), computes its columns of u = h_{t-1} Wh with one
// serial GEMM into hz_, runs the cell and meets the others at one barrier per
// step. gates_ holds x Wx on entry and z, r, n on exit; hn_ keeps u_n + bh_n.
void TrainImpl::GruForward(int l) {
  const int B = B_, T = T_, H = spec_.rnn_units, ub = ub_, nb = H / ub, H3 = 3 * H;
  const int ntr = std::min(nt_, nb);
  float* gates = gates_[l].data();
  float* hnbuf = hn_[l].data();
  float* hbuf = h_[l].data();
  float* hz = hz_.data();
  const float* whp = whp_[l].data();
  const float* bx = bp_[l].data();
  const float* bh = bx + H3;
  const float* zeros = zeros_.data();
  const uint16_t* whp16 = bf16_ ? whp16_[l].data() : nullptr;
  uint16_t* h16 = bf16_ ? H16(l) : nullptr;  // [R, H]
  if (bf16_) pack_fwd_[l].resize(std::max<size_t>(pack_fwd_[l].size(), ntr));
  SpinBarrier barrier(ntr);
#pragma omp parallel num_threads(ntr)
  {
    const int j = omp_get_thread_num(), nj = omp_get_num_threads();
    const int k0 = j * nb / nj, k1 = (j + 1) * nb / nj;
    const int c0 = k0 * 3 * ub, nc = (k1 - k0) * 3 * ub;
    PackedBgemm* pg = whp16 && nc > 0 && T > 1
                          ? &Packed(pack_fwd_[l], j, B, nc, H, H, H3, 0.0f, whp16, H3, c0)
                          : nullptr;
    for (int t = 0; t < T; ++t) {
      float* a = gates + size_t(t) * B * H3;  // [B, 3H]
      if (t > 0 && nc > 0) {
        if (whp16) {
          pg->Run(h16 + size_t(t - 1) * B * H, hz + c0);
        } else {
          SgemmSerial(false, false, B, nc, H, 1.0f, hbuf + size_t(t - 1) * B * H, H, whp + c0,
                      H3, 0.0f, hz + c0, H3);
        }
      }
      for (int b = 0; b < B; ++b) {
        const size_t row = size_t(t) * B + b;
        for (int k = k0; k < k1; ++k) {
          float* ar = a + size_t(b) * H3 + k * 3 * ub;  // [z r n] x ub
          const float* ur = t > 0 ? hz + size_t(b) * H3 + k * 3 * ub : zeros;
          const float* bxk = bx + k * 3 * ub;
          const float* bhk = bh + k * 3 * ub;
          const float* hp = t > 0 ? hbuf + (row - B) * H + k * ub : zeros;
          GruCell(ub, ar, ar + ub, ar + 2 * ub, ur, ur + ub, ur + 2 * ub, bxk, bxk + ub,
                  bxk + 2 * ub, bhk, bhk + ub, bhk + 2 * ub, hp, hnbuf + row * H + k * ub,
                  hbuf + row * H + k * ub);
          if (h16) ToBf16(hbuf + row * H + k * ub, ub, h16 + row * H + k * ub);
        }
      }
      StepBarrier(barrier, nj, ntr);
    }
  }
}

// GRU backward through time. With dh = dL/dh_t (from above, the recurrent
// GEMM dzh_{t+1} Wh^T and the direct path dh_{t+1} z_{t+1} carried in dcn_):
//   dn = dh (1 - z) (1 - n^2)            da_n (x side), du_n = dn r
//   dz = dh (h_{t-1} - n) z (1 - z)      da_z = du_z
//   dr = dn u_n r (1 - r)                da_r = du_r
//   carry to t-1: dh z
// writes dz_[l] (x side) and dzh_[l] (h side); with accumulate_bias, their
// column sums (the permuted bx, bh gradients) to bscratch_ rows 0 and 1.
void TrainImpl::GruBackward(int l, const float* dh_above, bool accumulate_bias) {
  const int B = B_, T = T_, H = spec_.rnn_units, ub = ub_, nb = H / ub, H3 = 3 * H;
  const int ntr = std::min(nt_, nb);
  const float* gates = gates_[l].data();
  const float* hnbuf = hn_[l].data();
  const float* hbuf = h_[l].data();
  const float* whpt = whpt_[l].data();
  const uint16_t* whpt16 = bf16_ ? whpt16_[l].data() : nullptr;
  uint16_t* dzx16 = bf16_ ? dz16_.data() : nullptr;   // [R, 3H] x side
  uint16_t* dzh16 = bf16_ ? dzh16_.data() : nullptr;  // [R, 3H] h side
  if (bf16_) pack_bwd_[l].resize(std::max<size_t>(pack_bwd_[l].size(), ntr));
  const uint8_t* mask = dropout_on_ ? mask_[l + 1].data() : nullptr;
  const float keep_scale = dropout_on_ ? 1.0f / (1.0f - spec_.dropout_rate) : 1.0f;
  float* dzx = dz_[l].data();
  float* dzh = dzh_[l].data();
  float* dhrec = dhrec_.data();
  float* carry = dcn_.data();
  float* dbx = bscratch_.data();
  float* dbh = dbx + H3;
  const float* zeros = zeros_.data();
  const uint8_t* ones = ones_.data();
  SpinBarrier barrier(ntr);
#pragma omp parallel num_threads(ntr)
  {
    const int j = omp_get_thread_num(), nj = omp_get_num_threads();
    const int k0 = j * nb / nj, k1 = (j + 1) * nb / nj;
    const int u0 = k0 * ub, nu = (k1 - k0) * ub;
    PackedBgemm* pg = whpt16 && nu > 0 && T > 1
                          ? &Packed(pack_bwd_[l], j, B, nu, H3, H3, H, 0.0f, whpt16, H, u0)
                          : nullptr;
    ZeroColumns(dhrec, carry, B, H, u0, nu);
    if (accumulate_bias) {
      std::memset(dbx + 3 * u0, 0, 3 * nu * sizeof(float));
      std::memset(dbh + 3 * u0, 0, 3 * nu * sizeof(float));
    }
    for (int t = T - 1; t >= 0; --t) {
      float* dzxt = dzx + size_t(t) * B * H3;  // [B, 3H]
      float* dzht = dzh + size_t(t) * B * H3;
      if (t < T - 1 && nu > 0) {
        // dhrec[:, u0:u0+nu] = dzh_{t+1} [B, 3H] x whpt[:, u0:u0+nu]
        if (whpt16) {
          pg->Run(dzh16 + size_t(t + 1) * B * H3, dhrec + u0);
        } else {
          SgemmSerial(false, false, B, nu, H3, 1.0f, dzht + size_t(B) * H3, H3, whpt + u0, H,
                      0.0f, dhrec + u0, H);
        }
      }
      for (int b = 0; b < B; ++b) {
        const size_t row = size_t(t) * B + b;
        for (int k = k0; k < k1; ++k) {
          const int uo = k * ub;
          const float* gr = gates + row * H3 + k * 3 * ub;
          float* ax = dzxt + size_t(b) * H3 + k * 3 * ub;
          float* ah = dzht + size_t(b) * H3 + k * 3 * ub;
          const float* hp = t > 0 ? hbuf + (row - B) * H + uo : zeros;
          const float* hn = hnbuf + row * H + uo;
          const float* dha = dh_above + row * H + uo;
          const uint8_t* mr = mask ? mask + row * H + uo : ones;
          float* dhr = dhrec + size_t(b) * H + uo;
          float* cr = carry + size_t(b) * H + uo;
          GruBackCell(ub, gr, hp, hn, dha, mr, keep_scale, dhr, cr, ax, ah);
          if (dzh16) {
            ToBf16(ax, 3 * ub, dzx16 + row * H3 + k * 3 * ub);
            ToBf16(ah, 3 * ub, dzh16 + row * H3 + k * 3 * ub);
          }
          if (accumulate_bias) {
            float* bxr = dbx + k * 3 * ub;
            float* bhr = dbh + k * 3 * ub;
#pragma omp simd
            for (int u = 0; u < 3 * ub; ++u) {
              bxr[u] += ax[u];
              bhr[u] += ah[u];
            }
          }
        }
      }
      StepBarrier(barrier, nj, ntr);
    }
  }
}

// Weight gradients of layer l from dz_[l] (already scaled on the clip path):
// dWh = H_{prev}^T dZ, dWx = X^T dZ, db = bscratch_ (the recurrence's sums, or
// ClipScaleRows / ClipBiasFromSums). xscale (bf16, the clip path's clip_xs_):
// dz unscaled, the A side scaled instead: round(s_b h~_{t-1}), round(s_b x~_t)
// from the forward's bf16 copies (into xt16_ transposed, or xs16_).
void TrainImpl::LayerWeightGrads(int l, bool rounded, const float* xscale) {
  const int B = B_, T = T_, H = spec_.rnn_units, H4 = G_ * H;  // H4: G H columns
  const auto& Ly = lay_[l];
  float* g = Grads();
  rounded = rounded && bf16_;
  DS_CHECK(!xscale || (rounded && !gru_));  // the scaled A side: bf16 lstm GEMMs only
  const uint16_t* dzh16 = gru_ ? dzh16_.data() : dz16_.data();
  // bf16 A sides: [R, H] h_{t-1} (h_{-1} = 0), [R, in] x (fp32: no copies)
  const uint16_t* ah = rounded ? H16(l) - size_t(B) * H : nullptr;
  const uint16_t* ax = rounded ? X16(l) : nullptr;
  // B = dz from dzv16_ (where oneDNN runs that layout with its brgemm kernels).
  const bool vnni = rounded && !gru_ && dzv_ok_ &&
                    BgemmVnniBIsBrgemm(false, H, H4, R_, LdT(R_), H4) &&
                    BgemmVnniBIsBrgemm(false, Ly.in, H4, R_, LdT(R_), H4);
  // xscale with the VNNI GEMMs: scaled, rounded and transposed in one pass.
  if (xscale && T > 1 && !vnni) {
    ScaledRowsBf16(ah, H, xscale, xs16_.data());
    ah = xs16_.data();
  }
  if (T > 1) {
    if (vnni) {
      // A = H_{prev}^T laid out once (the GEMM would copy a transposed A).
      if (xscale) {
        ScaledTransposeBf16(ah, H, xscale, xt16_.data(), LdT(R_));
      } else {
        TransposeBf16Split(nt_, R_, H, ah, H, xt16_.data(), LdT(R_));
      }
      BgemmSplitVnniB(nt_, false, H, H4, R_, 1.0f, xt16_.data(), LdT(R_), dzv16_.data(), 0.0f,
                      wscratch_.data(), H4);
    } else if (rounded) {
      // Over all R rows, h_{-1} = 0 (K = R: measured faster than (T - 1) B).
      BgemmSplit(nt_, 'n', true, false, H, H4, R_, 1.0f, ah, H, dzh16, H4, 0.0f,
                 wscratch_.data(), H4);
    } else {
      BigGemm('n', true, false, H, H4, (T - 1) * B, 1.0f, h_[l].data(), H,
              DzH(l) + size_t(B) * H4, H4, 0.0f, wscratch_.data(), H4);
    }
    Unpermute(wscratch_.data(), H, g + Ly.wh);
  } else {
    std::memset(g + Ly.wh, 0, size_t(H) * H4 * sizeof(float));
  }
  if (xscale && !vnni) {  // after the h side's GEMM: xs16_ is reused
    ScaledRowsBf16(ax, Ly.in, xscale, xs16_.data());
    ax = xs16_.data();
  }
  if (vnni) {
    if (xscale) {
      ScaledTransposeBf16(ax, Ly.in, xscale, xt16_.data(), LdT(R_));
    } else {
      TransposeBf16Split(nt_, R_, Ly.in, ax, Ly.in, xt16_.data(), LdT(R_));
    }
    BgemmSplitVnniB(nt_, false, Ly.in, H4, R_, 1.0f, xt16_.data(), LdT(R_), dzv16_.data(), 0.0f,
                    wscratch_.data(), H4);
  } else if (rounded) {
    BgemmSplit(nt_, 'n', true, false, Ly.in, H4, R_, 1.0f, ax, Ly.in, dz16_.data(), H4, 0.0f,
               wscratch_.data(), H4);
  } else {
    BigGemm('n', true, false, Ly.in, H4, R_, 1.0f, LayerInput(l), Ly.in, dz_[l].data(), H4, 0.0f,
            wscratch_.data(), H4);
  }
  Unpermute(wscratch_.data(), Ly.in, g + Ly.wx);
  const int bias_rows = gru_ ? 2 : 1;  // gru: row 0 from dz (bx), row 1 from dzh (bh)
  Unpermute(bscratch_.data(), bias_rows, g + Ly.b);
}

// dst [R, width] row r = round(s_{r mod B} src[r]), from the bf16 copies the
// forward wrote (X16, or H16 - B rows for h_{t-1}, whose first B rows are
// zero): one rounding of s_b a~ (ClipStep's bound), half the bytes of fp32.
void TrainImpl::ScaledRowsBf16(const uint16_t* src, int width, const float* s, uint16_t* dst) {
  const int B = B_, R = R_;
  const int nt = std::min(nt_, std::max(1, R / 64));
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int r = 0; r < R; ++r) {
    const float sb = s[r % B];
    const uint16_t* x = src + size_t(r) * width;
    uint16_t* d = dst + size_t(r) * width;
    for (int c = 0; c < width; ++c) d[c] = ToBf16(FromBf16(x[c]) * sb);
  }
}

// ScaledRowsBf16 transposed in the same pass: dst [width, ldd] with
// dst[c ldd + r] = round(s_{r mod B} src[r][c]), the A side of the VNNI
// weight-gradient GEMMs (xt16_), in 16 x 16 tiles.
void TrainImpl::ScaledTransposeBf16(const uint16_t* src, int width, const float* s, uint16_t* dst,
                                    int ldd) {
  const int B = B_, R = R_, blocks = (R + 15) / 16;
  const int nt = std::min(nt_, std::max(1, blocks / 4));
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int blk = 0; blk < blocks; ++blk) {
    const int r0 = blk * 16, nr = std::min(16, R - r0);
#if defined(__AVX512F__) && defined(__AVX512BF16__)
    if (nr == 16 && width % 16 == 0) {  // whole tiles
      alignas(64) float a[16 * 16], t[16 * 16];
      const uint16_t* rows[16];
      __m512 sc[16];
      for (int i = 0; i < 16; ++i) {
        rows[i] = src + size_t(r0 + i) * width;
        sc[i] = _mm512_set1_ps(s[(r0 + i) % B]);
      }
      for (int c0 = 0; c0 < width; c0 += 16) {
        for (int i = 0; i < 16; ++i) {
          const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[i] + c0));
          const __m512 x = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
          _mm512_store_ps(a + i * 16, _mm512_mul_ps(x, sc[i]));
        }
        Transpose16x16(a, 16, t, 16);
        for (int c = 0; c < 16; ++c)
          StoreBf16x16(dst + size_t(c0 + c) * ldd + r0, _mm512_load_ps(t + c * 16));
      }
      continue;
    }
#endif
    for (int i = 0; i < nr; ++i) {  // tails (and without AVX512_BF16)
      const int r = r0 + i;
      const float sb = s[r % B];
      const uint16_t* x = src + size_t(r) * width;
      for (int c = 0; c < width; ++c) dst[size_t(c) * ldd + r] = ToBf16(FromBf16(x[c]) * sb);
    }
  }
}

// bscratch_ = sum_b s_b pbias_[b] (clip_xs_: layer 0's clipped bias
// gradient), each column summed over b in order.
void TrainImpl::ClipBiasFromSums(const float* s) {
  const int B = B_, H4 = G_ * spec_.rnn_units;
  float* db = bscratch_.data();
  std::memset(db, 0, size_t(H4) * sizeof(float));
  for (int b = 0; b < B; ++b) {
    const float sb = s[b];
    const float* p = pbias_.data() + size_t(b) * H4;
#pragma omp simd
    for (int c = 0; c < H4; ++c) db[c] += sb * p[c];
  }
}

void TrainImpl::LayerInputGrad(int l, float* dx) {
  const int in = lay_[l].in, GH = G_ * spec_.rnn_units, R = R_;
  if (bf16_) {
    // Row blocks of dX per thread (multiples of 16, SgemmSplit's partition),
    // Wx^T packed once per weights version (a plain B is copied by every call).
    const int nt = std::max(1, std::min(nt_, R / 16));
    pack_dx_[l].resize(std::max<size_t>(pack_dx_[l].size(), nt));
    const uint16_t* dz16 = dz16_.data();
#pragma omp parallel num_threads(nt)
    {
      const int j = omp_get_thread_num(), nj = omp_get_num_threads(), blocks = (R + 15) / 16;
      const int lo = std::min(R, blocks * j / nj * 16), hi = std::min(R, blocks * (j + 1) / nj * 16);
      if (hi > lo)
        Packed(pack_dx_[l], j, hi - lo, in, GH, GH, in, 0.0f, wxpt16_[l].data(), in, 0)
            .Run(dz16 + size_t(lo) * GH, dx + size_t(lo) * in);
    }
  } else {
    BigGemm('m', false, false, R_, in, GH, 1.0f, dz_[l].data(), GH, wxpt_[l].data(), in, 0.0f, dx,
            in);
  }
}

void TrainImpl::ApplyMaskInPlace(int site, float* x, int width) {
  if (!dropout_on_) return;
  const float keep_scale = 1.0f / (1.0f - spec_.dropout_rate);
  const uint8_t* m = mask_[site].data();
  const size_t n = size_t(R_) * width;
#pragma omp parallel for simd num_threads(nt_) schedule(static)
  for (size_t i = 0; i < n; ++i) x[i] *= float(m[i]) * keep_scale;
}

// dx0: [R, Emb] dL/d(E[tok]) (mask already applied). dE[tok_r] += dx0_r, split
// by embedding columns across threads (no conflicts, fixed order).
void TrainImpl::EmbeddingGrad(const Batch& batch, const float* dx0) {
  const int B = B_, T = T_, E = spec_.embedding_dim, V = spec_.vocab_size;
  float* de = Grads() + off_emb_;
  std::memset(de, 0, size_t(V) * E * sizeof(float));
#pragma omp parallel num_threads(nt_)
  {
    const int j = omp_get_thread_num(), nj = omp_get_num_threads();
    const int e0 = (E * j / nj) & ~15, e1 = j == nj - 1 ? E : (E * (j + 1) / nj) & ~15;
    for (int t = 0; t < T; ++t)
      for (int b = 0; b < B; ++b) {
        const float* src = dx0 + (size_t(t) * B + b) * E;
        float* dst = de + size_t(batch.inputs[size_t(b) * T + t]) * E;
#pragma omp simd
        for (int e = e0; e < e1; ++e) dst[e] += src[e];
      }
  }
}

// Softmax cross-entropy over one row of logits (bias added here). Returns
// {CE, correct}; with dl_scale != 0 overwrites the row with
// dl_scale * (softmax - onehot(target)).
struct RowResult {
  double ce;
  bool correct;
};
inline RowResult SoftmaxRow(float* x, const float* bias, int V, int target, float dl_scale,
                            bool grad) {
#pragma omp simd
  for (int v = 0; v < V; ++v) x[v] += bias[v];
  const float mx = MaxOf(x, V);
  int arg = 0;
  while (arg < V - 1 && x[arg] != mx) ++arg;  // (a row of NaN: id V - 1)
  float sum = 0;
  const float xt = x[target];
  if (grad) {
#pragma omp simd reduction(+ : sum)
    for (int v = 0; v < V; ++v) {
      x[v] = FastExp(x[v] - mx);
      sum += x[v];
    }
    const float s = dl_scale / sum;
#pragma omp simd
    for (int v = 0; v < V; ++v) x[v] *= s;
    x[target] -= dl_scale;
  } else {
#pragma omp simd reduction(+ : sum)
    for (int v = 0; v < V; ++v) sum += FastExp(x[v] - mx);
  }
  return {double(std::log(sum)) + double(mx) - double(xt), arg == target};
}

// SoftmaxRow over the legal ids [lo, hi) of a full row of V logits; with
// grad the ids outside get dlogits 0 (the clip path's full-width rows).
inline RowResult LegalSoftmaxRow(float* x, const float* bias, int V, int lo, int hi, int target,
                                 float dl_scale, bool grad) {
  if (lo == 0 && hi == V) return SoftmaxRow(x, bias, V, target, dl_scale, grad);
  RowResult rr = SoftmaxRow(x + lo, bias + lo, hi - lo, target - lo, dl_scale, grad);
  if (grad) {
    std::fill(x, x + lo, 0.0f);
    std::fill(x + hi, x + V, 0.0f);
  }
  return rr;
}

// Rows of the dense stage at most this many per GEMM call for a logits slice
// of width w (about 4 MiB of logits).
inline int DenseChunk(int w) { return std::clamp((1 << 20) / std::max(w, 1), 64, 2048); }

// The dense stage's work per thread (dense_runs_). Without legal ranges (or
// for ForwardLogits' full logits) rows are split in contiguous per-thread
// ranges of chunks over the whole vocabulary, as rows themselves (direct).
// With ranges, the rows (time-major r = t*B + b) are sorted by their range
// (ties by row: a fixed order) into dense_order_, cut into nt contiguous
// parts of equal cost (width + 16 per row), and each part into runs of one
// range of at most DenseChunk(width) rows.
void TrainImpl::PlanDense(const Batch& batch, int nt, bool ranged) {
  const int R = R_, B = B_, T = T_, V = spec_.vocab_size;
  dense_runs_.resize(size_t(nt));
  for (auto& r : dense_runs_) r.clear();
  dense_direct_ = !ranged;
  if (!ranged) {
    const int chunk = DenseChunk(V);
    for (int j = 0; j < nt; ++j) {
      const int r0 = int(int64_t(R) * j / nt), r1 = int(int64_t(R) * (j + 1) / nt);
      for (int r = r0; r < r1; r += chunk) dense_runs_[j].push_back({r, std::min(chunk, r1 - r), 0, V});
    }
    return;
  }
  auto at = [&](int r) { return size_t(r % B) * T + size_t(r / B); };
  dense_order_.resize(size_t(R));
  for (int r = 0; r < R; ++r) dense_order_[size_t(r)] = r;
  std::stable_sort(dense_order_.begin(), dense_order_.end(), [&](int a, int b) {
    const size_t ia = at(a), ib = at(b);
    return batch.legal_lo[ia] != batch.legal_lo[ib] ? batch.legal_lo[ia] < batch.legal_lo[ib]
                                                    : batch.legal_hi[ia] < batch.legal_hi[ib];
  });
  auto cost = [&](int p) {
    const size_t i = at(dense_order_[size_t(p)]);
    return int64_t(batch.legal_hi[i] - batch.legal_lo[i]) + 16;
  };
  int64_t total = 0;
  for (int p = 0; p < R; ++p) total += cost(p);
  std::vector<int> cut(size_t(nt) + 1, R);
  cut[0] = 0;
  int64_t acc = 0;
  for (int p = 0, j = 1; p < R; ++p) {
    while (j < nt && acc * nt >= total * j) cut[size_t(j++)] = p;
    acc += cost(p);
  }
  for (int j = 0; j < nt; ++j) {
    for (int p = cut[size_t(j)]; p < cut[size_t(j) + 1];) {
      const size_t i = at(dense_order_[size_t(p)]);
      const int lo = batch.legal_lo[i], hi = batch.legal_hi[i], chunk = DenseChunk(hi - lo);
      int q = p + 1;
      while (q < cut[size_t(j) + 1] && q - p < chunk) {
        const size_t k = at(dense_order_[size_t(q)]);
        if (batch.legal_lo[k] != lo || batch.legal_hi[k] != hi) break;
        ++q;
      }
      dense_runs_[j].push_back({p, q - p, lo, hi});
      p = q;
    }
  }
}

// One run of DenseStage on thread j: logits over ids [lo, hi) = X Wd[:, lo:hi]
// (+ bd[lo:hi]), softmax CE over the slice and, when training, dlogits in
// place, db[lo:hi) += colsum dl, dw[:, lo:hi) += X^T dl (beta 0 on the
// thread's first run of the direct path), dX = dl Wd[:, lo:hi]^T. Gathered
// runs (ranged) copy their rows of X in and scatter dX out; in bf16 their
// row count is padded to 16 with zero rows (fewer GEMM shapes for oneDNN's
// primitive cache). A one-id range has CE 0 and no gradient (dX rows zero).
void TrainImpl::DenseRunRows(const Batch& batch, const DenseRun& run, bool train, float inv_count,
                             int j, float* dw, float* db, float* dxd, float* logits_out,
                             bool* first, StepStats* st) {
  const int B = B_, T = T_, H = spec_.rnn_units, V = spec_.vocab_size;
  const int n = run.n, lo = run.lo, w = run.hi - run.lo;
  const int* rows = dense_direct_ ? nullptr : dense_order_.data() + run.pos;
  auto row_of = [&](int i) { return rows ? rows[i] : run.pos + i; };
  if (w == 1 && !logits_out) {
    for (int i = 0; i < n; ++i) {
      const int row = row_of(i);
      const float wt = W(batch, row % B, row / B);
      st->correct += double(wt);
      st->count += wt;
      if (train) std::memset(dxd + size_t(row) * H, 0, size_t(H) * sizeof(float));
    }
    return;
  }
  const int L = spec_.num_layers;
  const uint16_t* x16 = bf16_ ? X16(L) + size_t(run.pos) * H : nullptr;
  const float* xin = bf16_ ? nullptr : LayerInput(L) + size_t(run.pos) * H;
  const int np = rows && bf16_ ? (n + 15) & ~15 : n;  // GEMM rows
  if (rows) {  // gather
    if (bf16_) {
      dense_xg16_[j].Reserve(size_t(np) * H);
      uint16_t* g = dense_xg16_[j].data();
      for (int i = 0; i < n; ++i)
        std::memcpy(g + size_t(i) * H, X16(L) + size_t(rows[i]) * H, H * sizeof(uint16_t));
      std::memset(g + size_t(n) * H, 0, size_t(np - n) * H * sizeof(uint16_t));
      x16 = g;
    } else {
      dense_xg_[j].Reserve(size_t(n) * H);
      float* g = dense_xg_[j].data();
      for (int i = 0; i < n; ++i)
        std::memcpy(g + size_t(i) * H, LayerInput(L) + size_t(rows[i]) * H, H * sizeof(float));
      xin = g;
    }
  }
  const float* wd = params_.data() + off_dw_;
  const float* bd = params_.data() + off_db_;
  dense_logits_[j].Reserve(size_t(np) * w);
  float* x = dense_logits_[j].data();  // [np, w]
  if (x16) {
    BgemmSerial(false, false, np, w, H, 1.0f, x16, H, wd16_.data() + lo, V, 0.0f, x, w);
  } else {
    Gemm(false, false, n, w, H, 1.0f, xin, H, wd + lo, nullptr, V, 0.0f, x, w);
  }
  for (int i = 0; i < n; ++i) {
    const int row = row_of(i), t = row / B, b = row % B;
    const float wt = W(batch, b, t);
    const int target = batch.targets[size_t(b) * T + t];
    float* xr = x + size_t(i) * w;
    if (logits_out) {
#pragma omp simd
      for (int v = 0; v < V; ++v) logits_out[(size_t(b) * T + t) * V + v] = xr[v] + bd[v];
    }
    RowResult rr = SoftmaxRow(xr, bd + lo, w, target - lo, wt * inv_count, train);
    st->loss_sum += double(wt) * rr.ce;
    st->correct += rr.correct ? double(wt) : 0.0;
    st->count += wt;
  }
  if (!train) return;
  float* dbs = db + lo;
  for (int i = 0; i < n; ++i) {
    const float* xr = x + size_t(i) * w;
#pragma omp simd
    for (int v = 0; v < w; ++v) dbs[v] += xr[v];
  }
  float* dxo = dxd + size_t(run.pos) * H;
  if (rows) {
    dense_dxg_[j].Reserve(size_t(np) * H);
    dxo = dense_dxg_[j].data();
  }
  const float beta = *first ? 0.0f : 1.0f;
  if (x16) {
    // dlogits rounded once for both GEMMs, in rows of wp = w padded to 16 (K
    // of the dX GEMM) starting at id k0 (so that k0 + wp <= PadV); the slice
    // sits at offset lo - k0, zeros around it.
    const int wp = (w + 15) & ~15, k0 = std::max(0, std::min(lo, PadV() - wp)), off = lo - k0;
    dense_dl16_[j].Reserve(size_t(np) * wp);
    uint16_t* dl16 = dense_dl16_[j].data();
    std::memset(dl16, 0, size_t(np) * wp * sizeof(uint16_t));
    for (int i = 0; i < n; ++i) ToBf16(x + size_t(i) * w, w, dl16 + size_t(i) * wp + off);
    BgemmSerial(true, false, H, w, np, 1.0f, x16, H, dl16 + off, wp, beta, dw + lo, V);
    BgemmSerial(false, false, np, H, wp, 1.0f, dl16, wp, wdt16_.data() + size_t(k0) * H, H, 0.0f,
                dxo, H);
  } else {
    Gemm(true, false, H, w, n, 1.0f, xin, H, x, nullptr, w, beta, dw + lo, V);
    Gemm(false, false, n, H, w, 1.0f, x, w, wdt_.data() + size_t(lo) * H, nullptr, H, 0.0f, dxo,
         H);
  }
  *first = false;
  if (rows)
    for (int i = 0; i < n; ++i)
      std::memcpy(dxd + size_t(rows[i]) * H, dxo + size_t(i) * H, H * sizeof(float));
}

// logits = X Wd (+bd), softmax CE over each target's legal ids, and when
// training dlogits, dWd, dbd and dX = dl Wd^T, per thread over its runs
// (PlanDense). Per-thread dWd/dbd (zeroed, or written by the first run) are
// summed in thread order: for a given thread count the result is fixed.
StepStats TrainImpl::DenseStage(const Batch& batch, bool train, double count, float* dxd,
                                float* logits_out) {
  const int H = spec_.rnn_units, V = spec_.vocab_size;
  const int nt = std::min(nt_, std::max(1, R_ / 64));
  const bool ranged = !batch.legal_lo.empty() && !logits_out;
  PlanDense(batch, nt, ranged);
  for (auto* v : {&dense_logits_, &dense_dw_, &dense_db_, &dense_xg_, &dense_dxg_})
    v->resize(std::max<size_t>(v->size(), nt));
  for (auto* v : {&dense_dl16_, &dense_xg16_}) v->resize(std::max<size_t>(v->size(), nt));
  std::vector<StepStats> part(nt);
  const float inv_count = count > 0 ? float(1.0 / count) : 0.0f;
#pragma omp parallel num_threads(nt)
  {
    const int j = omp_get_thread_num();
    float* dw = nullptr;
    float* db = nullptr;
    if (train) {
      dense_db_[j].Reserve(V);
      db = dense_db_[j].data();
      std::memset(db, 0, V * sizeof(float));
      if (j == 0) {
        dw = Grads() + off_dw_;
      } else {
        dense_dw_[j].Reserve(size_t(H) * V);
        dw = dense_dw_[j].data();
      }
      // Runs of slices accumulate into a zeroed dw.
      if (ranged) std::memset(dw, 0, size_t(H) * V * sizeof(float));
    }
    StepStats st;
    bool first = !ranged;
    for (const DenseRun& run : dense_runs_[j])
      DenseRunRows(batch, run, train, inv_count, j, dw, db, dxd, logits_out, &first, &st);
    if (train && first) std::memset(dw, 0, size_t(H) * V * sizeof(float));
    part[j] = st;
  }
  if (train) {
    float* gw = Grads() + off_dw_;
    float* gb = Grads() + off_db_;
    const size_t n = size_t(H) * V;
    if (nt > 1) {
#pragma omp parallel for num_threads(nt_) schedule(static)
      for (size_t i = 0; i < n; i += 1024) {
        const size_t e = std::min(n, i + 1024);
        for (int j = 1; j < nt; ++j) {
          const float* src = dense_dw_[j].data();
          for (size_t k = i; k < e; ++k) gw[k] += src[k];
        }
      }
    }
    for (int v = 0; v < V; ++v) {
      float s = dense_db_[0].data()[v];
      for (int j = 1; j < nt; ++j) s += dense_db_[j].data()[v];
      gb[v] = s;
    }
  }
  return SumStats(part);
}

// Per-example dense pass for PerExampleClip: logits_b = X_b Wd + bd ([T, V],
// rows t*B+b of the time-major input, lda = B*H), example-normalised dlogits,
// dX_b = dl Wd^T, and the dense part of ||g_b||^2:
// sum_{t,s} (x_t.x_s)(d_t.d_s) + ||sum_t d_t||^2.
StepStats TrainImpl::DenseClipNorms(const Batch& batch, float* dxd, double* norm2) {
  const int B = B_, T = T_, H = spec_.rnn_units, V = spec_.vocab_size;
  const float* xd = LayerInput(spec_.num_layers);
  const float* wd = params_.data() + off_dw_;
  const float* bd = params_.data() + off_db_;
  const int nt = std::min(nt_, B);
  dense_logits_.resize(std::max<size_t>(dense_logits_.size(), nt));
  dense_db_.resize(std::max<size_t>(dense_db_.size(), nt));
  gram_.resize(std::max<size_t>(gram_.size(), nt));
  std::vector<StepStats> per(B);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int b = 0; b < B; ++b) {
    const int j = omp_get_thread_num();
    dense_logits_[j].Reserve(size_t(T) * V);
    dense_db_[j].Reserve(V);
    gram_[j].Reserve(size_t(3) * T * T);
    float* x = dense_logits_[j].data();   // [T, V]
    float* colsum = dense_db_[j].data();  // [V]
    float* ga = gram_[j].data();          // [T, T]
    float* gd = ga + size_t(T) * T;       // [T, T]
    double wsum = 0;
    for (int t = 0; t < T; ++t) wsum += W(batch, b, t);
    const float inv = wsum > 0 ? float(1.0 / wsum) : 0.0f;
    Gemm(false, false, T, V, H, 1.0f, xd + size_t(b) * H, B * H, wd, wd16_.data(), V, 0.0f, x, V);
    StepStats st;
    for (int t = 0; t < T; ++t) {
      const float w = W(batch, b, t);
      int lo = 0, hi = V;
      Legal(batch, b, t, &lo, &hi);
      RowResult rr = LegalSoftmaxRow(x + size_t(t) * V, bd, V, lo, hi,
                                     batch.targets[size_t(b) * T + t], w * inv, true);
      st.loss_sum += double(w) * rr.ce;
      st.correct += rr.correct ? double(w) : 0.0;
      st.count += w;
    }
    per[b] = st;
    Gemm(false, false, T, H, V, 1.0f, x, V, wdt_.data(), wdt16_.data(), H, 0.0f,
         dxd + size_t(b) * H, B * H);
    SgemmSerial(false, true, T, T, H, 1.0f, xd + size_t(b) * H, B * H, xd + size_t(b) * H, B * H,
                0.0f, ga, T);
    SgemmSerial(false, true, T, T, V, 1.0f, x, V, x, V, 0.0f, gd, T);
    double n2 = 0;
    for (size_t i = 0; i < size_t(T) * T; ++i) n2 += double(ga[i]) * gd[i];
    std::memset(colsum, 0, V * sizeof(float));
    for (int t = 0; t < T; ++t)
      for (int v = 0; v < V; ++v) colsum[v] += x[size_t(t) * V + v];
    for (int v = 0; v < V; ++v) n2 += double(colsum[v]) * colsum[v];
    norm2[b] += n2;
  }
  return SumStats(per);
}

// Gradient pass of the clip path: dlogits recomputed per example, scaled by
// scale[b] (clip factor / example weight), dWd = sum_b X_b^T dl_b, dbd.
void TrainImpl::DenseClipGrads(const Batch& batch, const double* scale) {
  const int B = B_, T = T_, H = spec_.rnn_units, V = spec_.vocab_size;
  const float* xd = LayerInput(spec_.num_layers);
  const float* wd = params_.data() + off_dw_;
  const float* bd = params_.data() + off_db_;
  const int nt = std::min(nt_, B);
  dense_dw_.resize(std::max<size_t>(dense_dw_.size(), nt));
#pragma omp parallel num_threads(nt)
  {
    const int j = omp_get_thread_num();
    const int b0 = B * j / nt, b1 = B * (j + 1) / nt;
    float* x = dense_logits_[j].data();  // [T, V] (reserved by DenseClipNorms)
    float* db = dense_db_[j].data();     // [V]
    float* dw;
    if (j == 0) {
      dw = Grads() + off_dw_;
    } else {
      dense_dw_[j].Reserve(size_t(H) * V);
      dw = dense_dw_[j].data();
    }
    std::memset(db, 0, V * sizeof(float));
    std::memset(dw, 0, size_t(H) * V * sizeof(float));
    for (int b = b0; b < b1; ++b) {
      Gemm(false, false, T, V, H, 1.0f, xd + size_t(b) * H, B * H, wd, wd16_.data(), V, 0.0f, x,
           V);
      for (int t = 0; t < T; ++t) {
        int lo = 0, hi = V;
        Legal(batch, b, t, &lo, &hi);
        LegalSoftmaxRow(x + size_t(t) * V, bd, V, lo, hi, batch.targets[size_t(b) * T + t],
                        float(W(batch, b, t) * scale[b]), true);
      }
      // fp32 in every precision: the gradient summed is the one whose norm was
      // clipped (bf16-rounded operands would not be; docs/privacy.md).
      SgemmSerial(true, false, H, V, T, 1.0f, xd + size_t(b) * H, B * H, x, V, 1.0f, dw, V);
      for (int t = 0; t < T; ++t)
        for (int v = 0; v < V; ++v) db[v] += x[size_t(t) * V + v];
    }
  }
  SumDenseThreadGrads(nt);
}

// The clip path with legal ranges keeps every row's dlogits over its range
// only (clip_dl_; a field tokenizer's ranges are a few ids each) when they fit
// in 256 MiB: the dense pass runs PlanDense's runs of one range (the GEMMs of
// the non-private path) instead of full-width rows per example. False (the
// full-width DenseClipNorms / DenseClipGrads) without ranges or when too big.
bool TrainImpl::PlanClipRanged(const Batch& batch) {
  if (batch.legal_lo.empty()) return false;
  const int R = R_, B = B_, T = T_;
  int64_t total = 0;
  for (int r = 0; r < R; ++r) {
    const size_t i = size_t(r % B) * T + size_t(r / B);
    total += batch.legal_hi[i] - batch.legal_lo[i];
  }
  if (total * int64_t(sizeof(float)) > (int64_t(256) << 20)) return false;
  const int nt = std::min(nt_, std::max(1, R / 64));
  PlanDense(batch, nt, /*ranged=*/true);
  clip_off_.resize(size_t(R) + 1);
  clip_row_off_.resize(size_t(R));
  int64_t acc = 0;
  for (int p = 0; p < R; ++p) {
    const int r = dense_order_[size_t(p)];
    const size_t i = size_t(r % B) * T + size_t(r / B);
    clip_off_[size_t(p)] = acc;
    clip_row_off_[size_t(r)] = acc;
    acc += batch.legal_hi[i] - batch.legal_lo[i];
  }
  clip_off_[size_t(R)] = acc;
  clip_diag_.resize(size_t(R));
  clip_dl_.Reserve(size_t(std::max<int64_t>(acc, 1)));
  clip_inv_.assign(size_t(B), 0.0f);
  for (int b = 0; b < B; ++b) {
    double wsum = 0;
    for (int t = 0; t < T; ++t) wsum += W(batch, b, t);
    clip_inv_[size_t(b)] = wsum > 0 ? float(1.0 / wsum) : 0.0f;
  }
  return true;
}

// Pass 1 of the ranged clip path, per thread over its runs (PlanClipRanged):
// logits = X_g Wd[:, lo:hi] written into clip_dl_, softmax CE and the
// example-normalised dlogits in place (w_t / sum_t w_t), dX = dl Wd[:, lo:hi]^T
// scattered to dxd; then ClipRangedPairs adds the dense part of ||g_b||^2.
StepStats TrainImpl::ClipRangedNorms(const Batch& batch, float* dxd, double* norm2) {
  const int B = B_, T = T_, H = spec_.rnn_units, V = spec_.vocab_size;
  const int nt = int(dense_runs_.size());
  for (auto* v : {&dense_xg_, &dense_dxg_}) v->resize(std::max<size_t>(v->size(), nt));
  const float* xl = LayerInput(spec_.num_layers);
  const float* wd = params_.data() + off_dw_;
  const float* bd = params_.data() + off_db_;
  std::vector<StepStats> part(nt);
#pragma omp parallel num_threads(nt)
  {
    const int j = omp_get_thread_num();
    StepStats st;
    for (const DenseRun& run : dense_runs_[j]) {
      const int n = run.n, lo = run.lo, w = run.hi - run.lo;
      const int* rows = dense_order_.data() + run.pos;
      float* dl = clip_dl_.data() + clip_off_[size_t(run.pos)];  // [n, w]
      if (w == 1) {  // CE 0, no gradient
        for (int i = 0; i < n; ++i) {
          const float wt = W(batch, rows[i] % B, rows[i] / B);
          st.correct += double(wt);
          st.count += wt;
          dl[i] = 0.0f;
          clip_diag_[size_t(rows[i])] = 0.0;
          std::memset(dxd + size_t(rows[i]) * H, 0, size_t(H) * sizeof(float));
        }
        continue;
      }
      dense_xg_[j].Reserve(size_t(n) * H);
      float* xg = dense_xg_[j].data();
      for (int i = 0; i < n; ++i)
        std::memcpy(xg + size_t(i) * H, xl + size_t(rows[i]) * H, H * sizeof(float));
      Gemm(false, false, n, w, H, 1.0f, xg, H, wd + lo, bf16_ ? wd16_.data() + lo : nullptr, V,
           0.0f, dl, w);
      for (int i = 0; i < n; ++i) {
        const int t = rows[i] / B, b = rows[i] % B;
        const float wt = W(batch, b, t);
        RowResult rr = SoftmaxRow(dl + size_t(i) * w, bd + lo, w, batch.targets[size_t(b) * T + t] - lo,
                                  wt * clip_inv_[size_t(b)], true);
        st.loss_sum += double(wt) * rr.ce;
        st.correct += rr.correct ? double(wt) : 0.0;
        st.count += wt;
        // The diagonal term of ClipRangedPairs, while the rows are in cache.
        const float* xr = xg + size_t(i) * H;
        const float* dr = dl + size_t(i) * w;
        float xx = 0, dd = 0;
#pragma omp simd reduction(+ : xx)
        for (int c = 0; c < H; ++c) xx += xr[c] * xr[c];
#pragma omp simd reduction(+ : dd)
        for (int v = 0; v < w; ++v) dd += dr[v] * dr[v];
        clip_diag_[size_t(rows[i])] = (double(xx) + 1.0) * double(dd);
      }
      dense_dxg_[j].Reserve(size_t(n) * H);
      float* dxg = dense_dxg_[j].data();
      Gemm(false, false, n, H, w, 1.0f, dl, w, wdt_.data() + size_t(lo) * H,
           bf16_ ? wdt16_.data() + size_t(lo) * H : nullptr, H, 0.0f, dxg, H);
      for (int i = 0; i < n; ++i)
        std::memcpy(dxd + size_t(rows[i]) * H, dxg + size_t(i) * H, H * sizeof(float));
    }
    part[j] = st;
  }
  ClipRangedPairs(batch, norm2);
  return SumStats(part);
}

// Dense part of ||g_b||^2 = ||sum_t x_t^T d_t||^2 + ||sum_t d_t||^2
// = sum_{t,s} (x_t.x_s + 1)(d_t.d_s), d_t.d_s over the intersection of the
// two ranges: the diagonal from clip_diag_, then the pairs of overlapping
// ranges, found by a sweep over the positions sorted by range start (none for
// disjoint field ranges).
void TrainImpl::ClipRangedPairs(const Batch& batch, double* norm2) {
  const int B = B_, T = T_, H = spec_.rnn_units;
  const float* xl = LayerInput(spec_.num_layers);
  const float* dl = clip_dl_.data();
#pragma omp parallel num_threads(std::min(nt_, B))
  {
    std::vector<int> pos(static_cast<size_t>(T));
#pragma omp for schedule(static)
    for (int b = 0; b < B; ++b) {
      const int* lo = batch.legal_lo.data() + size_t(b) * T;
      const int* hi = batch.legal_hi.data() + size_t(b) * T;
      int n = 0;
      for (int t = 0; t < T; ++t)
        if (hi[t] - lo[t] >= 2) pos[size_t(n++)] = t;  // else d_t = 0
      std::sort(pos.begin(), pos.begin() + n,
                [&](int u, int v) { return lo[u] != lo[v] ? lo[u] < lo[v] : u < v; });
      double n2 = 0;
      for (int t = 0; t < T; ++t) n2 += clip_diag_[size_t(t) * B + b];
      for (int i = 0; i < n; ++i) {
        const int t = pos[size_t(i)];
        const float* xt = xl + (size_t(t) * B + b) * H;
        const float* dt = dl + clip_row_off_[size_t(t) * B + b];
        for (int k = i + 1; k < n && lo[pos[size_t(k)]] < hi[t]; ++k) {
          const int u = pos[size_t(k)], e = std::min(hi[t], hi[u]);
          const float* xu = xl + (size_t(u) * B + b) * H;
          const float* du = dl + clip_row_off_[size_t(u) * B + b];
          float dd = 0, xx = 0;
#pragma omp simd reduction(+ : dd)
          for (int v = lo[u]; v < e; ++v) dd += dt[v - lo[t]] * du[v - lo[u]];
#pragma omp simd reduction(+ : xx)
          for (int c = 0; c < H; ++c) xx += xt[c] * xu[c];
          n2 += 2.0 * (double(xx) + 1.0) * double(dd);
        }
      }
      norm2[b] += n2;
    }
  }
}

// Pass 2: each kept row of dlogits scaled by its example's clip factor s[b],
// then per run dWd[:, lo:hi] += X_g^T D_g and dbd[lo:hi] += colsum D_g into
// per-thread sums (thread 0: the gradients), added in thread order.
void TrainImpl::ClipRangedGrads(const Batch& batch, const float* s) {
  const int B = B_, H = spec_.rnn_units, V = spec_.vocab_size;
  const int nt = int(dense_runs_.size());
  for (auto* v : {&dense_dw_, &dense_db_}) v->resize(std::max<size_t>(v->size(), nt));
  const float* xl = LayerInput(spec_.num_layers);
  (void)batch;
#pragma omp parallel num_threads(nt)
  {
    const int j = omp_get_thread_num();
    float* dw = Grads() + off_dw_;
    if (j > 0) {
      dense_dw_[j].Reserve(size_t(H) * V);
      dw = dense_dw_[j].data();
    }
    dense_db_[j].Reserve(V);
    float* db = dense_db_[j].data();
    std::memset(dw, 0, size_t(H) * V * sizeof(float));
    std::memset(db, 0, V * sizeof(float));
    for (const DenseRun& run : dense_runs_[j]) {
      const int n = run.n, lo = run.lo, w = run.hi - run.lo;
      if (w == 1) continue;
      const int* rows = dense_order_.data() + run.pos;
      float* dl = clip_dl_.data() + clip_off_[size_t(run.pos)];
      float* xg = dense_xg_[j].data();  // reserved by ClipRangedNorms
      for (int i = 0; i < n; ++i) {
        std::memcpy(xg + size_t(i) * H, xl + size_t(rows[i]) * H, H * sizeof(float));
        const float sb = s[rows[i] % B];
        float* r = dl + size_t(i) * w;
#pragma omp simd
        for (int v = 0; v < w; ++v) r[v] *= sb;
        for (int v = 0; v < w; ++v) db[lo + v] += r[v];
      }
      // fp32 in every precision, as DenseClipGrads.
      SgemmSerial(true, false, H, w, n, 1.0f, xg, H, dl, w, 1.0f, dw + lo, V);
    }
  }
  SumDenseThreadGrads(nt);
}

// The clip path's dense gradients: thread 0 wrote dW into grads_, threads 1..nt-1 into
// dense_dw_[j]; every thread its bias part into dense_db_[j]. Summed in thread order.
void TrainImpl::SumDenseThreadGrads(int nt) {
  const int H = spec_.rnn_units, V = spec_.vocab_size;
  float* gw = Grads() + off_dw_;
  float* gb = Grads() + off_db_;
  for (int j = 1; j < nt; ++j) {
    const float* src = dense_dw_[j].data();
    for (size_t k = 0; k < size_t(H) * V; ++k) gw[k] += src[k];
  }
  for (int v = 0; v < V; ++v) {
    float sum = 0;
    for (int j = 0; j < nt; ++j) sum += dense_db_[j].data()[v];
    gb[v] = sum;
  }
}

// Layer l's part of ||g_b||^2 from unscaled dz_[l] (x side) and DzH(l) (h
// side; the same buffer for the lstm):
// sum_{t,s} (dz_t.dz_s)(x_t.x_s) + (dzh_t.dzh_s)(h_{t-1}.h_{s-1})
//   + ||sum_t dz_t||^2 (+ ||sum_t dzh_t||^2, the gru's second bias row).
//
// bf16: from the rounded copies instead (the forward's X16, H16 and the
// backward's dz16_ / dzh16_, which hold layer l's dz until the next layer's
// backward), half the bytes and vdpbf16ps: the norm of the gradient of the
// rounded operands, which ClipStep's bound relates to the true one.
// slack[b] += sum_t ||x_t|| ||dz_t|| + ||h_{t-1}|| ||dzh_t|| + ||dz_t|| (+
// ||dzh_t||: the biases, an input of norm 1) of the values the Grams read.
void TrainImpl::ClipLayerNorms(int l, double* norm2, double* slack) {
  const int B = B_, T = T_, H = spec_.rnn_units, H4 = G_ * H, in = lay_[l].in;
  const bool r16 = bf16_;
  const float* x = LayerInput(l);
  const float* h = h_[l].data();
  const float* dz = dz_[l].data();
  const float* dzh = DzH(l);
  const uint16_t* x16 = r16 ? X16(l) : nullptr;
  const uint16_t* h16 = r16 ? H16(l) : nullptr;
  const uint16_t* dz16 = r16 ? dz16_.data() : nullptr;
  const uint16_t* dzh16 = r16 ? (gru_ ? dzh16_.data() : dz16_.data()) : nullptr;
  auto gram = [&](int n, int k, const float* a, const uint16_t* a16, int b, float* g) {
    if (r16) {
      GramLowerBf16(n, k, a16 + size_t(b) * k, size_t(B) * k, g);
    } else {
      GramLower(n, k, a + size_t(b) * k, size_t(B) * k, g);
    }
  };
  const int nt = std::min(nt_, B);
  gram_.resize(std::max<size_t>(gram_.size(), nt));
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int b = 0; b < B; ++b) {
    const int j = omp_get_thread_num();
    const int Tb = clip_len_[size_t(b)];  // dz_t = 0 for t >= Tb
    gram_[j].Reserve(size_t(4) * T * T);
    float* gx = gram_[j].data();          // [Tb, Tb]
    float* gh = gx + size_t(T) * T;       // [Tb-1, Tb-1]
    float* gz = gh + size_t(T) * T;       // [Tb, Tb]
    float* gzh = gz + size_t(T) * T;      // [Tb, Tb] (gru; the lstm uses gz)
    double n2 = 0;
    gram(Tb, in, x, x16, b, gx);
    gram(Tb, H4, dz, dz16, b, gz);
    if (gru_)
      gram(Tb, H4, dzh, dzh16, b, gzh);
    else
      gzh = gz;
    gram(Tb - 1, H, h, h16, b, gh);
    // Lower triangles (s <= t), off-diagonal entries twice. The bias:
    // ||sum_t dz_t||^2 = sum_{t,s} dz_t.dz_s (and dzh, the gru's bh).
    for (int t = 0; t < Tb; ++t)
      for (int s = 0; s <= t; ++s) {
        const size_t i = size_t(t) * Tb + s;
        double v = double(gz[i]) * (double(gx[i]) + 1.0);
        if (s > 0) v += double(gzh[i]) * gh[size_t(t - 1) * (Tb - 1) + (s - 1)];
        if (gru_) v += double(gzh[i]);
        n2 += s == t ? v : 2 * v;
      }
    norm2[b] += n2;
    double sl = 0;  // from the diagonals: ||x_t||^2 = gx[t, t], ...
    for (int t = 0; t < Tb; ++t) {
      const size_t d = size_t(t) * Tb + t;
      sl += std::sqrt(std::max(0.0, double(gx[d]) * gz[d])) + std::sqrt(std::max(0.0f, gz[d]));
      if (gru_) sl += std::sqrt(std::max(0.0f, gzh[d]));
      if (t > 0)
        sl += std::sqrt(std::max(0.0, double(gh[size_t(t - 1) * (Tb - 1) + (t - 1)]) * gzh[d]));
    }
    slack[b] += sl;
  }
}

// Clip path: each example's rows of dz_[l] (and the gru's dzh) scaled by its
// clip factor s[b], and the bias gradient (their column sums) into bscratch_:
// per-thread sums over a fixed row partition (even rows), added in thread
// order. fp32: scaled in place (LayerWeightGrads' fp32 GEMMs read them). bf16:
// s[b] dz rounded once into dz16_ (the gru: dzh into dzh16_), the lstm's rows
// also into dzv16_'s blocked layout, so that
// LayerWeightGrads(l, rounded = true) runs the plain path's bf16 GEMMs on them
// and on the forward's bf16 layer inputs (the rounding ClipStep's bound covers).
void TrainImpl::ClipScaleRows(int l, const float* s) {
  const int B = B_, R = R_, H4 = G_ * spec_.rnn_units, rows = gru_ ? 2 : 1;
  const int nt = std::min(nt_, std::max(1, R / 64));
  const bool to16 = bf16_;
  // Rows in order r = t B + b, so pairs (2i, 2i + 1) for any batch; an odd R
  // pairs its last row with the zero padding row R.
  dzv_ok_ = to16 && !gru_ && kVnniDz && H4 % 64 == 0;
  [[maybe_unused]] uint16_t* dzv = dzv_ok_ ? dzv16_.data() : nullptr;
  [[maybe_unused]] const size_t kpad = VnniPadK(size_t(R));
  if (dzv && kpad != size_t(R))
    for (int c = 0; c < H4; c += 64)
      std::memset(dzv + VnniOffset(kpad - 32, c, kpad), 0, 32 * 64 * sizeof(uint16_t));
  gram_.resize(std::max<size_t>(gram_.size(), nt));
#pragma omp parallel num_threads(nt)
  {
    const int j = omp_get_thread_num();
    gram_[j].Reserve(size_t(rows + 1) * H4);
    float* part = gram_[j].data();  // [rows, GH]
    float* tmp = part + size_t(rows) * H4;  // [GH] one scaled row (bf16)
    std::memset(part, 0, size_t(rows) * H4 * sizeof(float));
    const int r0 = int(int64_t(R) * j / nt) & ~1;
    const int r1 = j + 1 == nt ? R : int(int64_t(R) * (j + 1) / nt) & ~1;
    for (int row = 0; row < rows; ++row) {
      float* d = row == 0 ? dz_[l].data() : DzH(l);
      uint16_t* d16 = row == 0 ? dz16_.data() : dzh16_.data();
      float* db = part + size_t(row) * H4;
      for (int r = r0; r < r1; ++r) {
        const float sb = s[r % B];
        float* x = d + size_t(r) * H4;
        if (to16) {
          uint16_t* x16 = d16 + size_t(r) * H4;
#pragma omp simd
          for (int c = 0; c < H4; ++c) {
            tmp[c] = x[c] * sb;
            db[c] += tmp[c];
          }
          ToBf16(tmp, size_t(H4), x16);
#if defined(__AVX512BW__)
          if (dzv && (r & 1)) {
            for (int c = 0; c < H4; c += 64)
              InterleaveBf16Pair64(x16 - H4 + c, x16 + c, dzv + VnniOffset(r - 1, size_t(c), kpad));
          } else if (dzv && r == R - 1) {
            alignas(64) static constexpr uint16_t kZero[64] = {};
            for (int c = 0; c < H4; c += 64)
              InterleaveBf16Pair64(x16 + c, kZero, dzv + VnniOffset(r, size_t(c), kpad));
          }
#endif
          continue;
        }
#pragma omp simd
        for (int c = 0; c < H4; ++c) {
          x[c] *= sb;
          db[c] += x[c];
        }
      }
    }
#if defined(__AVX512F__)
    if (dzv) _mm_sfence();  // the non-temporal stores of dzv16_
#endif
  }
  for (int row = 0; row < rows; ++row) {
    float* db = bscratch_.data() + size_t(row) * H4;
    std::memcpy(db, gram_[0].data() + size_t(row) * H4, H4 * sizeof(float));
    for (int j = 1; j < nt; ++j) {
      const float* p = gram_[j].data() + size_t(row) * H4;
      for (int c = 0; c < H4; ++c) db[c] += p[c];
    }
  }
}

// Embedding part: the rows of E that example b's tokens pick get
// sum_{t: tok_t = k} dx_t, so ||.||^2 = sum_k ||sum_{t: tok_t = k} dx_t||^2
// (positions sorted by token, one sum per distinct token: O(T E)).
void TrainImpl::ClipEmbeddingNorms(const Batch& batch, const float* dx0, double* norm2) {
  const int B = B_, T = T_, E = spec_.embedding_dim;
  const int nt = std::min(nt_, B);
  gram_.resize(std::max<size_t>(gram_.size(), nt));
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int b = 0; b < B; ++b) {
    const int j = omp_get_thread_num();
    const int Tb = clip_len_[size_t(b)];  // dx_t = 0 for t >= Tb
    gram_[j].Reserve(size_t(E) + T);
    float* acc = gram_[j].data();  // [E]
    int* pos = reinterpret_cast<int*>(acc + E);  // [Tb] positions by token
    const int32_t* tok = batch.inputs.data() + size_t(b) * T;
    for (int t = 0; t < Tb; ++t) pos[t] = t;
    std::sort(pos, pos + Tb, [&](int u, int v) { return tok[u] != tok[v] ? tok[u] < tok[v] : u < v; });
    double n2 = 0;
    for (int i = 0; i < Tb;) {
      std::memset(acc, 0, size_t(E) * sizeof(float));
      int k = i;
      for (; k < Tb && tok[pos[k]] == tok[pos[i]]; ++k) {
        const float* r = dx0 + (size_t(pos[k]) * B + b) * E;
#pragma omp simd
        for (int e = 0; e < E; ++e) acc[e] += r[e];
      }
      double g2 = 0;  // vector partial sums: the serial chain of double adds cost more than the rows
#pragma omp simd reduction(+ : g2)
      for (int e = 0; e < E; ++e) g2 += double(acc[e]) * acc[e];
      n2 += g2;
      i = k;
    }
    norm2[b] += n2;
  }
}

StepStats TrainImpl::Step(const Batch& batch, bool train, uint64_t dropout_seed,
                          const PerExampleClip* clip) {
  Validate(batch);
  B_ = batch.batch;
  T_ = batch.steps;
  R_ = B_ * T_;
  nt_ = Threads();
  dropout_on_ = train && spec_.dropout_rate > 0;
  lean_ = bf16_ && clip == nullptr;
  prof_.Start();
  if (train) prof_.CountStep();
  RefreshPermuted();
  prof_.Mark(kRefresh);
  Forward(batch, dropout_seed);
  const int L = spec_.num_layers, E = spec_.embedding_dim;
  if (!train) return DenseStage(batch, false, 0, nullptr, nullptr);
  if (clip) return ClipStep(batch, *clip);

  double count = 0;
  if (batch.weights.empty()) {
    count = double(R_);
  } else {
    for (float w : batch.weights) count += w;
  }
  int cur = 0;  // dx_[cur]: dL/d(input of the layer above), pre-mask
  {  // the plain path (the clip path: ClipStep)
    StepStats st = DenseStage(batch, true, count, dx_[cur].data(), nullptr);
    prof_.Mark(kDense);
    for (int l = L - 1; l >= 0; --l) {
      if (gru_) {
        GruBackward(l, dx_[cur].data(), /*accumulate_bias=*/true);
      } else {
        RecurrenceBackward(l, dx_[cur].data(), /*accumulate_bias=*/true);
      }
      prof_.Mark(kBwdRec);
      LayerInputGrad(l, dx_[1 - cur].data());
      prof_.Mark(kBwdDx);
      cur = 1 - cur;
      LayerWeightGrads(l, /*rounded=*/true);
      prof_.Mark(kBwdDw);
    }
    ApplyMaskInPlace(0, dx_[cur].data(), E);
    EmbeddingGrad(batch, dx_[cur].data());
    prof_.Mark(kEmbGrad);
    return st;
  }
}

// The PerExampleClip part of Step after the forward (see cpu_backend.h).
StepStats TrainImpl::ClipStep(const Batch& batch, const PerExampleClip& clip) {
  const int B = B_, T = T_, L = spec_.num_layers, E = spec_.embedding_dim;
  int cur = 0;  // dx_[cur]: dL/d(input of the layer above), pre-mask
  std::vector<double> norm2(B, 0.0), slack(B, 0.0);
  clip_len_.assign(size_t(B), 0);
  for (int b = 0; b < B; ++b)
    for (int t = T - 1; t >= 0; --t)
      if (W(batch, b, t) != 0.0f) {
        clip_len_[size_t(b)] = t + 1;
        break;
      }
  // bf16 lstm: layer 0's weight gradients scale the GEMMs' A side (clip_xs_).
  clip_xs_ = bf16_ && !gru_ && kVnniDz && ub_ == 16 && (G_ * spec_.rnn_units) % 64 == 0;
  if (clip_xs_) {
    const size_t GH = size_t(G_) * spec_.rnn_units, wmax = std::max(E, spec_.rnn_units);
    if (pbias_.size() < size_t(max_b_) * GH) pbias_.Resize(size_t(max_b_) * GH);
    if (xs16_.size() < size_t(R_) * wmax) xs16_.Resize(size_t(max_b_) * max_t_ * wmax);
  }
  const bool ranged = PlanClipRanged(batch);
  StepStats st = ranged ? ClipRangedNorms(batch, dx_[cur].data(), norm2.data())
                        : DenseClipNorms(batch, dx_[cur].data(), norm2.data());
  prof_.Mark(kClip);
  for (int l = L - 1; l >= 0; --l) {
    if (gru_) {
      GruBackward(l, dx_[cur].data(), /*accumulate_bias=*/false);
    } else {
      RecurrenceBackward(l, dx_[cur].data(), /*accumulate_bias=*/false);
    }
    prof_.Mark(kBwdRec);
    LayerInputGrad(l, dx_[1 - cur].data());
    prof_.Mark(kBwdDx);
    cur = 1 - cur;
    ClipLayerNorms(l, norm2.data(), slack.data());
    prof_.Mark(kClipLayers);
  }
  float* dx0 = dx_[cur].data();
  ApplyMaskInPlace(0, dx0, E);
  ClipEmbeddingNorms(batch, dx0, norm2.data());
  prof_.Mark(kClipLayers);
  std::vector<float> s(B);             // clip factor per example
  std::vector<double> dense_scale(B);  // clip factor / example weight sum
  if (clip.norms) clip.norms->assign(B, 0.0f);
  // bf16 (round to nearest, u = 2^-8; docs/privacy.md "bf16 and the clip
  // bound"). The recurrent parts of example b's gradient are sums of rank-1
  // terms a_t b_t^T (a: x_t, h_{t-1}, or 1 for a bias; b: dz_t). The norm n
  // comes from the Grams of the rounded values (ClipLayerNorms): n = ||g~_b||,
  // g~_b built from a~ = round(a), b~ = round(b), exactly. The summed
  // gradient's GEMMs read round(s_b a~) against b~ (layer 0 under clip_xs_:
  // at most u s_b ||a~|| ||b~|| from s_b a~ b~^T) or a~ against round(s_b b)
  // (the other layers: 2u s_b ||a~|| ||b|| <= 2u / (1 - u) s_b ||a~|| ||b~||),
  // and the biases sum fp32 dz (u s_b ||b|| per term, likewise): every term
  // within 2u / (1 - u) s_b ||a~|| ||b~||, so ||summed_b|| <= s_b (n + rel
  // slack[b]) with rel = 2u / (1 - u) and slack[b] = sum_t ||a~_t|| ||b~_t||.
  // The clip factor covers that bound. The other parts (dense, embedding) are
  // fp32 on the same values in the norm and in the gradient.
  const double u = bf16_ ? 1.0 / 256 : 0.0, rel = 2 * u / (1 - u);
  for (int b = 0; b < B; ++b) {
    const double n = std::sqrt(std::max(0.0, norm2[b]));
    const double nb = n + rel * slack[b];
    s[b] = nb > clip.l2_norm_clip ? float(clip.l2_norm_clip / nb) : 1.0f;
    if (clip.norms) (*clip.norms)[b] = float(n);
    double wsum = 0;
    for (int t = 0; t < T; ++t) wsum += W(batch, b, t);
    dense_scale[b] = wsum > 0 ? s[b] / wsum : 0.0;
  }
  // Scale each example's rows of dX_0, and of dZ per layer (ClipScaleRows).
#pragma omp parallel for num_threads(nt_) schedule(static)
  for (int t = 0; t < T; ++t) {
    for (int b = 0; b < B; ++b) {
      float* r = dx0 + (size_t(t) * B + b) * E;
      const float sb = s[b];
#pragma omp simd
      for (int e = 0; e < E; ++e) r[e] *= sb;
    }
  }
  for (int l = 0; l < L; ++l) {
    const bool xs = clip_xs_ && l == 0;  // dz16_ / dzv16_ still hold layer 0's dz
    if (xs) {
      ClipBiasFromSums(s.data());
    } else {
      ClipScaleRows(l, s.data());
    }
    prof_.Mark(kClipGrads);
    LayerWeightGrads(l, /*rounded=*/true, xs ? s.data() : nullptr);
  }
  prof_.Mark(kBwdDw);
  EmbeddingGrad(batch, dx0);
  prof_.Mark(kEmbGrad);
  if (ranged) {
    ClipRangedGrads(batch, s.data());
  } else {
    DenseClipGrads(batch, dense_scale.data());
  }
  prof_.Mark(kClipGrads);
  return st;
}

void TrainImpl::ForwardLogits(const Batch& batch, float* logits) {
  Validate(batch);
  B_ = batch.batch;
  T_ = batch.steps;
  R_ = B_ * T_;
  nt_ = Threads();
  dropout_on_ = false;
  lean_ = bf16_;
  RefreshPermuted();
  Forward(batch, 0);
  DenseStage(batch, false, 0, nullptr, logits);
}

void TrainImpl::ApplyOptimizer(const OptimizerConfig& opt, int64_t step) {
  // With opt.range: the slice [begin, end) from the given gradient (src/dist's
  // sharded optimizer); the loops below are elementwise either way.
  const OptimizerRange* range = opt.range;
  if (range && !(range->begin <= range->end && range->end <= layout_.total))
    DS_THROW(kInvalidArgument, "optimizer range [{}, {}) outside the {} parameters", range->begin,
             range->end, layout_.total);
  const size_t at = range ? range->begin : 0;
  const size_t n = range ? range->end - range->begin : layout_.total;
  float* p = params_.data() + at;
  const float* g = range ? range->grads : grads_.data();
  float* m = opt_m_.data() + at;
  float* v = opt_v_.data() + at;
  float* out = range ? range->params_out : p;  // the slice's copy, written in the same pass
  const float lr = opt.learning_rate, eps = opt.epsilon;
  const int nt = Threads();
  prof_.Start();
  if (opt.name == "rmsprop") {
    const float rho = opt.rho;
#pragma omp parallel for simd num_threads(nt) schedule(static)
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i];
      const float vi = rho * v[i] + (1.0f - rho) * gi * gi;
      v[i] = vi;
      const float pi = p[i] - lr * gi / std::sqrt(vi + eps);
      p[i] = pi;
      out[i] = pi;
    }
  } else if (opt.name == "adam") {
    if (step < 1) DS_THROW(kInvalidArgument, "adam: step counts from 1, got {}", step);
    const float b1 = opt.beta1, b2 = opt.beta2;
    const float lr_t = float(double(lr) * std::sqrt(1.0 - std::pow(double(b2), double(step))) /
                             (1.0 - std::pow(double(b1), double(step))));
#pragma omp parallel for simd num_threads(nt) schedule(static)
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i];
      const float mi = b1 * m[i] + (1.0f - b1) * gi;
      const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
      m[i] = mi;
      v[i] = vi;
      const float pi = p[i] - lr_t * mi / (std::sqrt(vi) + eps);
      p[i] = pi;
      out[i] = pi;
    }
  } else {
    DS_THROW(kInvalidArgument, "optimizer: unknown name '{}' (rmsprop, adam)", opt.name);
  }
  perm_dirty_ = true;
  prof_.Mark(kOptimizer);
}

}  // namespace

std::unique_ptr<CpuTrainBackend> NewCpuTrainBackend(const NetworkSpec& spec, int max_batch,
                                                    int max_steps, Precision precision) {
  if (spec.vocab_size <= 0 || spec.embedding_dim <= 0 || spec.rnn_units <= 0 ||
      spec.num_layers <= 0) {
    DS_THROW(kInvalidArgument,
             "network: vocab_size, embedding_dim, rnn_units and num_layers must be positive "
             "(got {}, {}, {}, {})",
             spec.vocab_size, spec.embedding_dim, spec.rnn_units, spec.num_layers);
  }
  if (!(spec.dropout_rate >= 0.0f && spec.dropout_rate < 1.0f)) {
    DS_THROW(kInvalidArgument, "dropout_rate must be in [0, 1), got {}", spec.dropout_rate);
  }
  if (max_batch <= 0 || max_steps <= 0) {
    DS_THROW(kInvalidArgument, "max_batch and max_steps must be positive (got {}, {})", max_batch,
             max_steps);
  }
  return std::make_unique<TrainImpl>(spec, max_batch, max_steps, precision);
}

}  // namespace cpu

Result<std::unique_ptr<TrainBackend>> MakeCpuTrainBackend(const NetworkSpec& spec, int max_batch,
                                                          int max_steps, Precision precision) {
  std::unique_ptr<TrainBackend> out;
  Status st =
      Capture([&] { out = cpu::NewCpuTrainBackend(spec, max_batch, max_steps, precision); });
  if (!st.ok()) return st;
  return out;
}

}  // namespace ds
