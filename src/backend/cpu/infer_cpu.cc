// CPU inference backend: see CpuInferBackend in cpu_backend.h.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/cpu/buffer.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/ranged_dense.h"
#include "backend/cpu/vmath.h"
#include "util/status.h"

namespace ds {
namespace cpu {
namespace {

// Largest precomputed table (layer-0 projection, transposed dense weights)
// a backend builds; above it the plain GEMM path runs.
constexpr size_t kMaxTableBytes = size_t(64) << 20;

class InferImpl final : public CpuInferBackend {
 public:
  InferImpl(const NetworkSpec& spec, const float* params, int slots, int threads,
            const InferOptions& opt)
      : spec_(spec),
        layout_(ParamLayout::For(spec)),
        gru_(spec.architecture == Architecture::kGru),
        bf16_(opt.precision == Precision::kBf16),
        params_(params),
        slots_(slots),
        threads_(threads) {
    const int H = spec.rnn_units, L = spec.num_layers, V = spec.vocab_size;
    const int GH = GateCount(spec.architecture) * H;
    for (int l = 0; l < L; ++l) {
      const auto Ly = layout_.layer(l);
      lay_.push_back(Ly);
      h_.emplace_back(size_t(slots) * H);
      c_.emplace_back(gru_ ? 0 : size_t(slots) * H);
      h_.back().Zero();
      c_.back().Zero();
      xh_.emplace_back(size_t(slots) * (Ly.in + H));
      // The gru keeps h Wh apart (the reset gate multiplies its n part).
      fused_.push_back(!gru_ && Ly.wx + size_t(Ly.in) * GH == Ly.wh);
      if (bf16_) {  // [Wx; Wh] rounded, contiguous: one GEMM with K = In + H
        w16_.emplace_back(size_t(Ly.in + H) * GH);
        ToBf16(params + Ly.wx, size_t(Ly.in) * GH, w16_.back().data());
        ToBf16(params + Ly.wh, size_t(H) * GH, w16_.back().data() + size_t(Ly.in) * GH);
      }
    }
    if (bf16_) {
      wd16_.Resize(size_t(H) * V);
      ToBf16(params + layout_.offset("dense.w"), size_t(H) * V, wd16_.data());
    }
    if (opt.fast) BuildTables();
    order_.assign(size_t(slots), 0);
    gx_.assign(size_t(slots), nullptr);
    gout_.assign(size_t(slots), nullptr);
    z_.Resize(size_t(slots) * GH);
    if (gru_) zh_.Resize(size_t(slots) * GH);
    xlast_.Resize(size_t(slots) * H);
    tc_.Resize(size_t(slots) * H);
    zeros_.Resize(GH);
    zeros_.Zero();
    seen_.assign(slots, 0);
  }

  const NetworkSpec& spec() const override { return spec_; }
  int slots() const override { return slots_; }
  Precision precision() const override { return bf16_ ? Precision::kBf16 : Precision::kFp32; }
  void SetThreads(int threads) override { threads_ = std::max(0, threads); }

  void ResetSlot(int slot) override {
    if (slot < 0 || slot >= slots_)
      DS_THROW(kInvalidArgument, "slot {} outside 0..{}", slot, slots_ - 1);
    const int H = spec_.rnn_units;
    for (size_t l = 0; l < h_.size(); ++l) {
      std::memset(h_[l].data() + size_t(slot) * H, 0, H * sizeof(float));
      if (!gru_) std::memset(c_[l].data() + size_t(slot) * H, 0, H * sizeof(float));
    }
  }

  void Step(const int* slot_ids, const int32_t* tokens, int n, float* logits) override {
    StepRange(slot_ids, tokens, n, nullptr, nullptr, logits);
  }
  void StepRange(const int* slot_ids, const int32_t* tokens, int n, const int32_t* lo,
                 const int32_t* hi, float* logits) override;

 private:
  void BuildTables();
  void Validate(const int* slot_ids, const int32_t* tokens, int n, const int32_t* lo,
                const int32_t* hi);
  void Rows(const int* slot_ids, const int32_t* tokens, int i0, int i1, const int32_t* lo,
            const int32_t* hi, float* logits);
  void LstmLayer(int l, const int* slot_ids, const int32_t* tokens, int i0, int i1, float* next,
                 int next_ld);
  void GruLayer(int l, const int* slot_ids, const int32_t* tokens, int i0, int i1, float* next,
                int next_ld);
  void Dense(int i0, int i1, const int32_t* lo, const int32_t* hi, float* logits);
  // C [m, n] (+)= A [m, k] (lda) x B [k, n] (ldb): fp32, or bf16 operands
  // (b16: B rounded, ldb) with fp32 accumulation.
  void Gemm(int m, int n, int k, const float* a, int lda, const float* b, const uint16_t* b16,
            int ldb, float beta, float* c, int ldc) const {
    if (bf16_) {
      MixedGemmSerial(false, false, m, n, k, 1.0f, a, lda, b, b16, ldb, beta, c, ldc);
    } else {
      SgemmSerial(false, false, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
    }
  }

  NetworkSpec spec_;
  ParamLayout layout_;
  bool gru_;                                // architecture gru (else lstm)
  bool bf16_;                               // precision bf16
  std::vector<ParamLayout::RnnLayer> lay_;  // per layer offsets
  const float* params_;
  int slots_;
  int threads_;
  std::vector<Buffer<float>> h_;   // per layer [slots, H] state h
  std::vector<Buffer<float>> c_;   // per layer [slots, H] state c (lstm only)
  std::vector<Buffer<float>> xh_;  // per layer [slots, In + H] gathered [x, h_prev] rows
  std::vector<bool> fused_;        // Wh follows Wx contiguously: one GEMM with K = In + H
  std::vector<Buffer<uint16_t>> w16_;  // per layer [In + H, GH] [Wx; Wh] in bf16 (bf16 only)
  Buffer<uint16_t> wd16_;              // [H, V] Wd in bf16 (bf16 only)
  // Fast path (InferOptions::fast), fp32 whatever the precision:
  Buffer<float> table_;  // [V, GH] E Wx_0 + b (lstm) / + bx (gru): layer 0's x side per token
  std::vector<float> wp_;  // Wd packed for RangedDense (ranged_dense.h)
  Buffer<float> z_;      // [slots, GH] gate pre-activations (x side for the gru)
  Buffer<float> zh_;     // [slots, GH] h_prev Wh (gru only)
  Buffer<float> tc_;     // [slots, H] tanh(c) scratch
  Buffer<float> xlast_;  // [slots, H] top layer output, dense input
  Buffer<float> zeros_;  // [GH] zero bias (the table holds layer 0's)
  std::vector<char> seen_;  // [slots] duplicate check of slot_ids
  // Dense's ranged rows by range, their inputs and outputs: [slots] (entries
  // [i0, i1) belong to the call on rows i0..i1; teams run disjoint blocks)
  std::vector<int> order_;
  std::vector<const float*> gx_;
  std::vector<float*> gout_;
};

// Layer 0's input side depends on the token only: x Wx + b for every id is one
// [V, Emb] x [Emb, GH] GEMM (fp32) at construction, a row gather per step.
// Wd packed in panels of 16 ids makes a range of logits contiguous reads.
void InferImpl::BuildTables() {
  const int V = spec_.vocab_size, E = spec_.embedding_dim, H = spec_.rnn_units;
  const int GH = GateCount(spec_.architecture) * H;
  if (size_t(V) * GH * sizeof(float) <= kMaxTableBytes) {
    table_.Resize(size_t(V) * GH);
    const float* b = params_ + lay_[0].b;  // lstm: b; gru: row 0 = bx
    for (int v = 0; v < V; ++v) std::memcpy(table_.data() + size_t(v) * GH, b, GH * sizeof(float));
    SgemmSerial(false, false, V, GH, E, 1.0f, params_ + layout_.offset("embedding"), E,
                params_ + lay_[0].wx, GH, 1.0f, table_.data(), GH);
  }
  if (size_t(V) * H * sizeof(float) <= kMaxTableBytes)
    wp_ = PackRangedDense(H, V, params_ + layout_.offset("dense.w"), V);
}

void InferImpl::Validate(const int* slot_ids, const int32_t* tokens, int n, const int32_t* lo,
                         const int32_t* hi) {
  if (n > slots_) DS_THROW(kInvalidArgument, "Step: n = {} exceeds {} slots", n, slots_);
  const int V = spec_.vocab_size;
  for (int i = 0; i < n; ++i) {
    if (slot_ids[i] < 0 || slot_ids[i] >= slots_)
      DS_THROW(kInvalidArgument, "Step: slot {} outside 0..{}", slot_ids[i], slots_ - 1);
    if (uint32_t(tokens[i]) >= uint32_t(V))
      DS_THROW(kInvalidArgument, "Step: token {} outside [0, {})", tokens[i], V);
    if ((lo == nullptr) != (hi == nullptr) ||
        (lo && !(0 <= lo[i] && lo[i] <= hi[i] && hi[i] <= V)))
      DS_THROW(kInvalidArgument, "Step: logit range of row {} outside [0, {}]", i, V);
  }
  for (int i = 0; i < n; ++i) {
    if (seen_[slot_ids[i]]++) {
      for (int k = 0; k < i; ++k) seen_[slot_ids[k]] = 0;
      seen_[slot_ids[i]] = 0;
      DS_THROW(kInvalidArgument, "Step: slot {} listed twice", slot_ids[i]);
    }
  }
  for (int i = 0; i < n; ++i) seen_[slot_ids[i]] = 0;
}

// Rows (slots) are independent through the whole network, so with several
// threads each thread runs its own contiguous block of rows through every layer
// and the dense layer with serial GEMMs: one parallel region per Step and no
// barrier inside it.
void InferImpl::StepRange(const int* slot_ids, const int32_t* tokens, int n, const int32_t* lo,
                          const int32_t* hi, float* logits) {
  if (n <= 0) return;
  Validate(slot_ids, tokens, n, lo, hi);
  const int nt = threads_ > 0 ? threads_ : std::max(1, omp_get_max_threads());
  // At least 8 rows per thread: below that the serial GEMMs lose more than the
  // second core gains.
  const int teams = std::max(1, std::min(nt, n / 8));
  if (teams == 1) {
    Rows(slot_ids, tokens, 0, n, lo, hi, logits);
    return;
  }
#pragma omp parallel num_threads(teams)
  {
    const int j = omp_get_thread_num(), nj = omp_get_num_threads();
    Rows(slot_ids, tokens, n * j / nj, n * (j + 1) / nj, lo, hi, logits);
  }
}

// Rows i0..i1 of one Step, on the calling thread.
void InferImpl::Rows(const int* slot_ids, const int32_t* tokens, int i0, int i1,
                     const int32_t* lo, const int32_t* hi, float* logits) {
  if (i1 <= i0) return;
  const int H = spec_.rnn_units, L = spec_.num_layers;
  for (int l = 0; l < L; ++l) {
    float* next = l + 1 < L ? xh_[l + 1].data() : xlast_.data();
    const int next_ld = l + 1 < L ? lay_[l + 1].in + H : H;
    if (gru_) {
      GruLayer(l, slot_ids, tokens, i0, i1, next, next_ld);
    } else {
      LstmLayer(l, slot_ids, tokens, i0, i1, next, next_ld);
    }
  }
  Dense(i0, i1, lo, hi, logits);
}

// One LSTM layer for rows i0..i1: gathers [x, h_prev] (layer 0 with the
// table: h_prev only, and the token's table row is the cell's bias), z = [x,
// h] [Wx; Wh], the fused cell adding b; h goes to the slot's state and to `next` (the next
// layer's input rows, leading dimension next_ld).
void InferImpl::LstmLayer(int l, const int* slot_ids, const int32_t* tokens, int i0, int i1,
                          float* next, int next_ld) {
  const int E = spec_.embedding_dim, H = spec_.rnn_units, H4 = 4 * H, m = i1 - i0;
  const auto& Ly = lay_[l];
  const int in = Ly.in, K = in + H;
  const bool table = l == 0 && table_.size() > 0;
  float* xh = xh_[l].data() + size_t(i0) * K;  // [m, in + H]: [x, h_prev] rows
  float* z = z_.data() + size_t(i0) * H4;      // [m, 4H]
  float* hs = h_[l].data();
  float* cs = c_[l].data();
  const float* emb = params_ + layout_.offset("embedding");
  for (int i = i0; i < i1; ++i) {
    float* row = xh + size_t(i - i0) * K;
    if (!table && l == 0) std::memcpy(row, emb + size_t(tokens[i]) * E, E * sizeof(float));
    std::memcpy(row + in, hs + size_t(slot_ids[i]) * H, H * sizeof(float));
  }
  const uint16_t* w16 = bf16_ ? w16_[l].data() : nullptr;
  if (table) {  // z = h_prev Wh; the cell adds the token's table row as its bias
    Gemm(m, H4, H, xh + in, K, params_ + Ly.wh, w16 ? w16 + size_t(in) * H4 : nullptr, H4, 0.0f,
         z, H4);
  } else if (fused_[l] || bf16_) {
    Gemm(m, H4, K, xh, K, params_ + Ly.wx, w16, H4, 0.0f, z, H4);
  } else {
    SgemmSerial(false, false, m, H4, in, 1.0f, xh, K, params_ + Ly.wx, H4, 0.0f, z, H4);
    SgemmSerial(false, false, m, H4, H, 1.0f, xh + in, K, params_ + Ly.wh, H4, 1.0f, z, H4);
  }
  for (int i = i0; i < i1; ++i) {
    const float* bias = table ? table_.data() + size_t(tokens[i]) * H4 : params_ + Ly.b;
    float* zr = z + size_t(i - i0) * H4;
    float* c = cs + size_t(slot_ids[i]) * H;
    float* h = hs + size_t(slot_ids[i]) * H;
    LstmCell(H, zr, zr + H, zr + 2 * H, zr + 3 * H, bias, bias + H, bias + 2 * H, bias + 3 * H, c,
             c, tc_.data() + size_t(i) * H, h);
    std::memcpy(next + size_t(i) * next_ld, h, H * sizeof(float));
  }
}

// One GRU layer for rows i0..i1: a = x Wx (layer 0 with the table: the
// token's row, bx included) and u = h_prev Wh as GEMMs, then the cell per row.
void InferImpl::GruLayer(int l, const int* slot_ids, const int32_t* tokens, int i0, int i1,
                         float* next, int next_ld) {
  const int E = spec_.embedding_dim, H = spec_.rnn_units, H3 = 3 * H, m = i1 - i0;
  const auto& Ly = lay_[l];
  const int in = Ly.in, K = in + H;
  const bool table = l == 0 && table_.size() > 0;
  float* xh = xh_[l].data() + size_t(i0) * K;
  float* a = z_.data() + size_t(i0) * H3;   // [m, 3H]
  float* u = zh_.data() + size_t(i0) * H3;  // [m, 3H]
  const float* emb = params_ + layout_.offset("embedding");
  for (int i = i0; i < i1; ++i) {
    float* row = xh + size_t(i - i0) * K;
    if (table) {
      std::memcpy(a + size_t(i - i0) * H3, table_.data() + size_t(tokens[i]) * H3,
                  H3 * sizeof(float));
    } else if (l == 0) {
      std::memcpy(row, emb + size_t(tokens[i]) * E, E * sizeof(float));
    }
    std::memcpy(row + in, h_[l].data() + size_t(slot_ids[i]) * H, H * sizeof(float));
  }
  const uint16_t* w16 = bf16_ ? w16_[l].data() : nullptr;
  if (!table) Gemm(m, H3, in, xh, K, params_ + Ly.wx, w16, H3, 0.0f, a, H3);
  Gemm(m, H3, H, xh + in, K, params_ + Ly.wh, w16 ? w16 + size_t(in) * H3 : nullptr, H3, 0.0f, u,
       H3);
  const float* bx = table ? zeros_.data() : params_ + Ly.b;
  const float* bh = params_ + Ly.b + H3;
  float* hn = tc_.data();  // scratch
  for (int i = i0; i < i1; ++i) {
    float* ar = a + size_t(i - i0) * H3;
    const float* ur = u + size_t(i - i0) * H3;
    float* h = h_[l].data() + size_t(slot_ids[i]) * H;
    GruCell(H, ar, ar + H, ar + 2 * H, ur, ur + H, ur + 2 * H, bx, bx + H, bx + 2 * H, bh, bh + H,
            bh + 2 * H, h, hn + size_t(i) * H, h);
    std::memcpy(next + size_t(i) * next_ld, h, H * sizeof(float));
  }
}

// logits = h Wd + bd for rows i0..i1. A row whose range is narrower than the
// vocabulary gets only its range: the rows sharing a range run as one group
// through RangedDense (fp32, each logit's sum in a fixed order, so its value
// does not depend on the group); the others come from one GEMM over all rows
// i0..i1 (so a row's values never depend on the other rows' ranges).
void InferImpl::Dense(int i0, int i1, const int32_t* lo, const int32_t* hi, float* logits) {
  const int V = spec_.vocab_size, H = spec_.rnn_units, m = i1 - i0;
  const float* bd = params_ + layout_.offset("dense.b");
  const float* wd = params_ + layout_.offset("dense.w");
  const float* x = xlast_.data() + size_t(i0) * H;
  float* out = logits + size_t(i0) * V;  // [m, V]
  auto ranged = [&](int i) { return lo && !wp_.empty() && hi[i] - lo[i] < V; };
  bool full = false;
  for (int i = i0; i < i1 && !full; ++i) full = !ranged(i);
  if (full) {
    for (int i = 0; i < m; ++i) std::memcpy(out + size_t(i) * V, bd, V * sizeof(float));
    Gemm(m, V, H, x, H, wd, wd16_.data(), V, 1.0f, out, V);
  }
  if (!lo || wp_.empty()) return;
  // The ranged rows sorted by (lo, hi), stably: a step's rows share the ranges
  // of a few column parts, each range's rows one RangedDense call. Insertion:
  // a step's rows mostly arrive grouped already (linear then).
  int* order = order_.data() + i0;
  int n = 0;
  auto before = [&](int a, int b) { return lo[a] != lo[b] ? lo[a] < lo[b] : hi[a] < hi[b]; };
  for (int i = i0; i < i1; ++i) {
    if (!ranged(i) || hi[i] <= lo[i]) continue;
    int k = n++;
    for (; k > 0 && before(i, order[k - 1]); --k) order[k] = order[k - 1];
    order[k] = i;
  }
  const float** gx = gx_.data() + i0;
  float** gout = gout_.data() + i0;
  for (int k = 0; k < n; ++k) {
    gx[k] = xlast_.data() + size_t(order[k]) * H;
    gout[k] = logits + size_t(order[k]) * V;
  }
  for (int a = 0, b = 0; a < n; a = b) {
    const int r = order[a];
    while (b < n && lo[order[b]] == lo[r] && hi[order[b]] == hi[r]) ++b;
    RangedDense(b - a, gx + a, H, wp_.data(), bd, lo[r], hi[r], gout + a);
  }
}

}  // namespace

std::unique_ptr<CpuInferBackend> NewCpuInferBackend(const NetworkSpec& spec, const float* params,
                                                    int slots, int threads,
                                                    const InferOptions& options) {
  if (spec.vocab_size <= 0 || spec.embedding_dim <= 0 || spec.rnn_units <= 0 ||
      spec.num_layers <= 0) {
    DS_THROW(kInvalidArgument, "network: sizes must be positive");
  }
  if (slots <= 0) DS_THROW(kInvalidArgument, "slots must be positive, got {}", slots);
  if (!params) DS_THROW(kInvalidArgument, "params is null");
  return std::make_unique<InferImpl>(spec, params, slots, threads, options);
}

}  // namespace cpu

Result<std::unique_ptr<InferBackend>> MakeCpuInferBackend(const NetworkSpec& spec,
                                                          const float* params, int slots,
                                                          Precision precision) {
  std::unique_ptr<InferBackend> out;
  cpu::InferOptions o;
  o.precision = precision;
  Status st = Capture([&] { out = cpu::NewCpuInferBackend(spec, params, slots, 0, o); });
  if (!st.ok()) return st;
  return out;
}

}  // namespace ds
