// BatchSampler with a TokenFilter that reports id ranges (TokenFilter::Range,
// InferBackend::StepRange): sampling within the range gives exactly the
// records that sampling the whole masked row gives, prefixes and idle rows
// included; and the CPU backend's ranged logits, fed through the sampler,
// give the records of its plain path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/buffer.h"
#include "backend/cpu/cpu_backend.h"
#include "generate/batch_sampler.h"
#include "generate_fakes.h"

namespace ds {
namespace {

using testing::FakeBackend;
using testing::FakeModelSpec;
using testing::FakeTokenizer;

// Per slot: before the 4th token of a record only ids [3 + n % 5, +4) are
// legal (n = tokens accepted), from then on [0, 7) (<n> included), and one
// id inside the range is masked too (the filter's own holes).
class RangeFilter final : public TokenFilter {
 public:
  RangeFilter(int slots, bool report) : n_(size_t(slots)), report_(report) {}
  void Begin(int slot) override { n_[size_t(slot)] = 0; }
  void Accept(int slot, int32_t) override { ++n_[size_t(slot)]; }
  void Mask(int slot, float* logits) override {
    int32_t lo, hi;
    Bounds(slot, &lo, &hi);
    for (int v = 0; v < V; ++v)
      if (v < lo || v >= hi || v == lo + 1) logits[v] = -INFINITY;
  }
  bool Range(int slot, int32_t* lo, int32_t* hi) override {
    if (!report_) return false;
    Bounds(slot, lo, hi);
    return true;
  }
  static constexpr int V = 15;

 private:
  void Bounds(int slot, int32_t* lo, int32_t* hi) const {
    const int n = n_[size_t(slot)];
    *lo = n < 4 ? 3 + n % 5 : 0;
    *hi = n < 4 ? *lo + 4 : 7;
  }
  std::vector<int> n_;
  bool report_;
};

std::vector<GeneratedRecord> Sample(InferBackend& backend, const Tokenizer& tok, bool report,
                                 int records) {
  RangeFilter filter(backend.slots(), report);
  SamplerOptions so;
  so.seed = 17;
  std::vector<std::vector<int32_t>> prefixes = {{3, 4}};
  BatchSampler s(tok, backend, so, prefixes, &filter);
  for (int i = 0; i < records; ++i) s.Submit(GenTask{uint64_t(i), i % 3 == 0 ? 0 : -1});
  std::vector<GeneratedRecord> done;
  for (int guard = 0; !s.idle() && guard < 100000; ++guard) s.Step(&done);
  std::sort(done.begin(), done.end(), [](auto& a, auto& b) { return a.id < b.id; });
  return done;
}

void ExpectSame(const std::vector<GeneratedRecord>& a, const std::vector<GeneratedRecord>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].id, b[i].id);
    EXPECT_EQ(a[i].text, b[i].text) << i;
    EXPECT_EQ(a[i].tokens, b[i].tokens) << i;
    EXPECT_EQ(a[i].valid, b[i].valid) << i;
  }
}

TEST(SamplerRange, SamplingTheRangeEqualsSamplingTheMaskedRow) {
  FakeTokenizer tok;
  ASSERT_EQ(tok.vocab_size(), RangeFilter::V);
  FakeModelSpec spec;
  spec.end_logit = 1.0f;
  FakeBackend a(tok.vocab_size(), 6, spec), b(tok.vocab_size(), 6, spec);
  const auto ranged = Sample(a, tok, true, 120), whole = Sample(b, tok, false, 120);
  ExpectSame(ranged, whole);
  int with_prefix = 0;
  for (const auto& r : ranged) with_prefix += r.prefix == 0 && r.text.rfind("ab", 0) == 0;
  EXPECT_EQ(with_prefix, 40);  // the forced prefix tokens went in unchanged
}

// The CPU backend: fast path (ranged dot products) vs plain path (every
// logit by GEMM) give the same records here (the logits agree to fp32
// rounding; a sampled token would only change if u fell within ~1e-6 of a
// boundary).
TEST(SamplerRange, CpuFastPathGivesThePlainPathsRecords) {
  FakeTokenizer tok;
  NetworkSpec spec;
  spec.vocab_size = tok.vocab_size();
  spec.embedding_dim = 16;
  spec.rnn_units = 32;
  spec.num_layers = 2;
  const ParamLayout lay = ParamLayout::For(spec);
  cpu::Buffer<float> w(lay.total);
  InitParams(spec, "glorot_uniform", 3, w.data());
  auto fast =
      cpu::NewCpuInferBackend(spec, w.data(), 6, 1, cpu::InferOptions{Precision::kFp32, true});
  auto plain =
      cpu::NewCpuInferBackend(spec, w.data(), 6, 1, cpu::InferOptions{Precision::kFp32, false});
  ExpectSame(Sample(*fast, tok, true, 60), Sample(*plain, tok, false, 60));
}

}  // namespace
}  // namespace ds
