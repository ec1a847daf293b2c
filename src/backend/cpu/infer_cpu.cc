// CPU inference backend: see CpuInferBackend in cpu_backend.h.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/cpu/buffer.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/vmath.h"
#include "util/status.h"

namespace ds {
namespace cpu {
namespace {

class InferImpl final : public CpuInferBackend {
 public:
  InferImpl(const NetworkSpec& spec, const float* params, int slots, int threads)
      : spec_(spec),
        layout_(ParamLayout::For(spec)),
        gru_(spec.architecture == Architecture::kGru),
        params_(params),
        slots_(slots),
        threads_(threads) {
    const int H = spec.rnn_units, L = spec.num_layers, GH = GateCount(spec.architecture) * H;
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
    }
    z_.Resize(size_t(slots) * GH);
    if (gru_) zh_.Resize(size_t(slots) * GH);
    xlast_.Resize(size_t(slots) * H);
    tc_.Resize(size_t(slots) * H);
    seen_.assign(slots, 0);
  }

  const NetworkSpec& spec() const override { return spec_; }
  int slots() const override { return slots_; }
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

  void Step(const int* slot_ids, const int32_t* tokens, int n, float* logits) override;

 private:
  void Rows(const int* slot_ids, const int32_t* tokens, int i0, int i1, float* logits);
  void GruLayer(int l, const int* slot_ids, int i0, int i1, float* next, int next_ld);

  NetworkSpec spec_;
  ParamLayout layout_;
  bool gru_;                                // architecture gru (else lstm)
  std::vector<ParamLayout::RnnLayer> lay_;  // per layer offsets
  const float* params_;
  int slots_;
  int threads_;
  std::vector<Buffer<float>> h_;   // per layer [slots, H] state h
  std::vector<Buffer<float>> c_;   // per layer [slots, H] state c (lstm only)
  std::vector<Buffer<float>> xh_;  // per layer [slots, In + H] gathered [x, h_prev] rows
  std::vector<bool> fused_;        // Wh follows Wx contiguously: one GEMM with K = In + H
  Buffer<float> z_;                // [slots, GH] gate pre-activations (x side for the gru)
  Buffer<float> zh_;               // [slots, GH] h_prev Wh (gru only)
  Buffer<float> tc_;               // [slots, H] tanh(c) scratch
  Buffer<float> xlast_;            // [slots, H] top layer output, dense input
  std::vector<char> seen_;         // [slots] duplicate check of slot_ids
};

// Rows (slots) are independent through the whole network, so with several
// threads each thread runs its own contiguous block of rows through every layer
// and the dense layer with serial GEMMs: one parallel region per Step and no
// barrier inside it.
void InferImpl::Step(const int* slot_ids, const int32_t* tokens, int n, float* logits) {
  if (n <= 0) return;
  if (n > slots_) DS_THROW(kInvalidArgument, "Step: n = {} exceeds {} slots", n, slots_);
  const int V = spec_.vocab_size;
  for (int i = 0; i < n; ++i) {
    if (slot_ids[i] < 0 || slot_ids[i] >= slots_)
      DS_THROW(kInvalidArgument, "Step: slot {} outside 0..{}", slot_ids[i], slots_ - 1);
    if (uint32_t(tokens[i]) >= uint32_t(V))
      DS_THROW(kInvalidArgument, "Step: token {} outside [0, {})", tokens[i], V);
  }
  for (int i = 0; i < n; ++i) {
    if (seen_[slot_ids[i]]++) {
      for (int k = 0; k < i; ++k) seen_[slot_ids[k]] = 0;
      seen_[slot_ids[i]] = 0;
      DS_THROW(kInvalidArgument, "Step: slot {} listed twice", slot_ids[i]);
    }
  }
  for (int i = 0; i < n; ++i) seen_[slot_ids[i]] = 0;
  const int nt = threads_ > 0 ? threads_ : std::max(1, omp_get_max_threads());
  // At least 8 rows per thread: below that the serial GEMMs lose more than the
  // second core gains.
  const int teams = std::max(1, std::min(nt, n / 8));
  if (teams == 1) {
    Rows(slot_ids, tokens, 0, n, logits);
    return;
  }
#pragma omp parallel num_threads(teams)
  {
    const int j = omp_get_thread_num(), nj = omp_get_num_threads();
    Rows(slot_ids, tokens, n * j / nj, n * (j + 1) / nj, logits);
  }
}

// Rows i0..i1 of one Step, on the calling thread.
void InferImpl::Rows(const int* slot_ids, const int32_t* tokens, int i0, int i1, float* logits) {
  const int m = i1 - i0;
  if (m <= 0) return;
  const int V = spec_.vocab_size, E = spec_.embedding_dim, H = spec_.rnn_units, H4 = 4 * H;
  const int L = spec_.num_layers;
  const float* emb = params_ + layout_.offset("embedding");
  for (int l = 0; l < L; ++l) {
    const auto& Ly = lay_[l];
    const int in = Ly.in, K = in + H;
    float* xh = xh_[l].data() + size_t(i0) * K;  // [m, in + H]: [x, h_prev] rows
    float* hs = h_[l].data();
    float* cs = c_[l].data();
    for (int i = i0; i < i1; ++i) {
      float* row = xh + size_t(i - i0) * K;
      if (l == 0) std::memcpy(row, emb + size_t(tokens[i]) * E, E * sizeof(float));
      std::memcpy(row + in, hs + size_t(slot_ids[i]) * H, H * sizeof(float));
    }
    float* next = l + 1 < L ? xh_[l + 1].data() : xlast_.data();
    const int next_ld = l + 1 < L ? lay_[l + 1].in + H : H;
    if (gru_) {
      GruLayer(l, slot_ids, i0, i1, next, next_ld);
      continue;
    }
    float* z = z_.data() + size_t(i0) * H4;  // [m, 4H]
    if (fused_[l]) {
      SgemmSerial(false, false, m, H4, K, 1.0f, xh, K, params_ + Ly.wx, H4, 0.0f, z, H4);
    } else {
      SgemmSerial(false, false, m, H4, in, 1.0f, xh, K, params_ + Ly.wx, H4, 0.0f, z, H4);
      SgemmSerial(false, false, m, H4, H, 1.0f, xh + in, K, params_ + Ly.wh, H4, 1.0f, z, H4);
    }
    const float* bias = params_ + Ly.b;
    for (int i = i0; i < i1; ++i) {
      float* zr = z + size_t(i - i0) * H4;
      float* c = cs + size_t(slot_ids[i]) * H;
      float* h = hs + size_t(slot_ids[i]) * H;
      LstmCell(H, zr, zr + H, zr + 2 * H, zr + 3 * H, bias, bias + H, bias + 2 * H, bias + 3 * H, c,
               c, tc_.data() + size_t(i) * H, h);
      std::memcpy(next + size_t(i) * next_ld, h, H * sizeof(float));
    }
  }
  const float* bd = params_ + layout_.offset("dense.b");
  float* out = logits + size_t(i0) * V;  // [m, V]
  for (int i = 0; i < m; ++i) std::memcpy(out + size_t(i) * V, bd, V * sizeof(float));
  SgemmSerial(false, false, m, V, H, 1.0f, xlast_.data() + size_t(i0) * H, H,
              params_ + layout_.offset("dense.w"), V, 1.0f, out, V);
}

// One GRU layer for rows i0..i1 (xh_[l] gathered by Rows): a = x Wx and
// u = h_prev Wh as two GEMMs, then the cell per row; h goes to the slot's
// state and to `next` (the next layer's input rows, leading dimension next_ld).
void InferImpl::GruLayer(int l, const int* slot_ids, int i0, int i1, float* next, int next_ld) {
  const int H = spec_.rnn_units, H3 = 3 * H, m = i1 - i0;
  const auto& Ly = lay_[l];
  const int in = Ly.in, K = in + H;
  const float* xh = xh_[l].data() + size_t(i0) * K;
  float* a = z_.data() + size_t(i0) * H3;   // [m, 3H]
  float* u = zh_.data() + size_t(i0) * H3;  // [m, 3H]
  SgemmSerial(false, false, m, H3, in, 1.0f, xh, K, params_ + Ly.wx, H3, 0.0f, a, H3);
  SgemmSerial(false, false, m, H3, H, 1.0f, xh + in, K, params_ + Ly.wh, H3, 0.0f, u, H3);
  const float* bx = params_ + Ly.b;
  const float* bh = bx + H3;
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

}  // namespace

std::unique_ptr<CpuInferBackend> NewCpuInferBackend(const NetworkSpec& spec, const float* params,
                                                    int slots, int threads) {
  if (spec.vocab_size <= 0 || spec.embedding_dim <= 0 || spec.rnn_units <= 0 ||
      spec.num_layers <= 0) {
    DS_THROW(kInvalidArgument, "network: sizes must be positive");
  }
  if (slots <= 0) DS_THROW(kInvalidArgument, "slots must be positive, got {}", slots);
  if (!params) DS_THROW(kInvalidArgument, "params is null");
  return std::make_unique<InferImpl>(spec, params, slots, threads);
}

}  // namespace cpu

Result<std::unique_ptr<InferBackend>> MakeCpuInferBackend(const NetworkSpec& spec,
                                                          const float* params, int slots) {
  std::unique_ptr<InferBackend> out;
  Status st = Capture([&] { out = cpu::NewCpuInferBackend(spec, params, slots); });
  if (!st.ok()) return st;
  return out;
}

}  // namespace ds
