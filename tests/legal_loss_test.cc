// The training loss over each target's legal ids (model/network.h, "legal"):
// the per-position ranges of the dataset (tokenize/legal_ranges.h, records
// split across chunks included), finite differences of the sliced loss, the
// CPU backend's grouped fast path against the full logits (the loss from
// ForwardLogits in double, every gradient from the per-example clip path with
// a clip that never binds) in fp32 and bf16 at several thread counts, the clip
// path over legal ranges against an explicit per-example backward, and char
// tokenizers without ranges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "batch_fixtures.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/device.h"
#include "backend/precision.h"
#include "backend/registry.h"
#include "model/network.h"
#include "tokenize/field_tokenizer.h"
#include "tokenize/legal_ranges.h"
#include "train/dataset.h"
#include "util/rng.h"

namespace ds {
namespace {

// Ranges as a field tokenizer makes them (disjoint parts, a one-id <n>), plus
// an overlapping one and the whole vocabulary (a broken cursor).
const int kV = 40;
const std::pair<int, int> kRanges[] = {{0, 1}, {1, 5}, {5, 25}, {25, 40}, {0, 40}, {3, 9}, {39, 40}};

Batch LegalBatch(int B, int T, uint64_t seed, bool weighted) {
  Philox rng(seed, 7);
  Batch b;
  b.batch = B;
  b.steps = T;
  for (int i = 0; i < B * T; ++i) {
    // Mostly aligned parts per step (as record-aligned chunks give), some not.
    const int k = rng.Below(4) == 0 ? int(rng.Below(7)) : (i % T) % 7;
    const auto [lo, hi] = kRanges[k];
    b.inputs.push_back(int32_t(rng.Below(kV)));
    b.targets.push_back(int32_t(lo + int(rng.Below(uint64_t(hi - lo)))));
    b.legal_lo.push_back(lo);
    b.legal_hi.push_back(hi);
    if (weighted) b.weights.push_back(i % 5 == 3 ? 0.0f : 0.5f + rng.Uniform());
  }
  return b;
}

NetworkSpec Spec(int H) {
  NetworkSpec s;
  s.vocab_size = kV;
  s.embedding_dim = 8;
  s.rnn_units = H;
  s.num_layers = 1;
  s.dropout_rate = 0.0f;
  return s;
}

std::vector<float> Params(const NetworkSpec& spec, uint64_t seed) {
  ParamLayout p = ParamLayout::For(spec);
  std::vector<float> w(p.total);
  InitParams(spec, "glorot_uniform", seed, w.data());
  Philox rng(seed, 5);
  for (size_t i = 0; i < p.at("dense.b").size(); ++i)
    w[p.offset("dense.b") + i] += 0.5f * (rng.Uniform() - 0.5f);
  return w;
}

std::vector<float> Grads(TrainBackend& be) {
  std::vector<float> g(be.layout().total);
  be.GetGrads(g.data());
  return g;
}

// sum_t w_t CE over [lo_t, hi_t) of the full logits (double), and over the
// whole vocabulary.
std::pair<double, double> OracleLoss(const Batch& b, const std::vector<float>& logits) {
  double legal = 0, full = 0;
  for (size_t i = 0; i < b.targets.size(); ++i) {
    const float* l = logits.data() + i * kV;
    auto ce = [&](int lo, int hi) {
      double m = -INFINITY, s = 0;
      for (int v = lo; v < hi; ++v) m = std::max(m, double(l[v]));
      for (int v = lo; v < hi; ++v) s += std::exp(double(l[v]) - m);
      return std::log(s) + m - double(l[b.targets[i]]);
    };
    const double w = b.weights.empty() ? 1.0 : b.weights[i];
    legal += w * ce(b.legal_lo[i], b.legal_hi[i]);
    full += w * ce(0, kV);
  }
  return {legal, full};
}

TEST(LegalLoss, FiniteDifferencesOfTheSlicedLoss) {
  const NetworkSpec spec = Spec(8);
  const int B = 3, T = 7;
  auto be = cpu::NewCpuTrainBackend(spec, B, T);
  be->SetThreads(1);
  std::vector<float> w = Params(spec, 11);
  const Batch batch = LegalBatch(B, T, 3, /*weighted=*/true);
  be->SetParams(w.data());
  be->Step(batch, true, 0);
  const std::vector<float> grad = Grads(*be);
  auto loss = [&]() {
    be->SetParams(w.data());
    StepStats st = be->Step(batch, false, 0);
    return st.loss_sum / st.count;
  };
  // Relative 1e-2, with a floor for fp32 noise in small tensors (|fd| ~1e-3).
  testing::ExpectFiniteDifferences(be->layout(), w, grad, loss, 2e-5);
  // Ids that are legal nowhere in the batch get no gradient: none here but
  // check the one-id ranges give CE 0: a batch of only <n> targets.
  Batch ends = batch;
  for (size_t i = 0; i < ends.targets.size(); ++i) {
    ends.targets[i] = 0;
    ends.legal_lo[i] = 0;
    ends.legal_hi[i] = 1;
  }
  StepStats st = be->Step(ends, true, 0);
  EXPECT_EQ(st.loss_sum, 0.0);
  EXPECT_DOUBLE_EQ(st.correct, st.count);
  for (float g : Grads(*be)) ASSERT_EQ(g, 0.0f);
}

bool HaveBf16() { return DetectCpuFeatures().bf16(); }

// The grouped fast path (Step without clip) against the loss from
// ForwardLogits and the gradients of the clip path (its own code, checked
// against per-example runs below) with a clip that never binds (sum_b g_b / B
// = the mean gradient for unweighted equal-length examples).
void FastPathAgainstOracle(Precision precision, double tol) {
  const NetworkSpec spec = Spec(32);
  const int B = 16, T = 12;  // R = 192 rows: up to 3 dense threads
  const std::vector<float> w = Params(spec, 21);
  const Batch batch = LegalBatch(B, T, 5, /*weighted=*/false);
  auto oracle = cpu::NewCpuTrainBackend(spec, B, T, Precision::kFp32);
  oracle->SetThreads(1);
  oracle->SetParams(w.data());
  std::vector<float> logits(size_t(B) * T * kV);
  oracle->ForwardLogits(batch, logits.data());
  const auto [legal, full] = OracleLoss(batch, logits);
  EXPECT_LT(legal, 0.8 * full) << "the legal loss must differ from the full softmax";
  PerExampleClip clip;
  clip.l2_norm_clip = 1e9f;
  oracle->Step(batch, true, 0, &clip);
  std::vector<float> want = Grads(*oracle);
  for (float& g : want) g /= float(B);
  for (int threads : {1, 2, 3}) {
    auto be = cpu::NewCpuTrainBackend(spec, B, T, precision);
    be->SetThreads(threads);
    be->SetParams(w.data());
    const StepStats st = be->Step(batch, true, 0);
    EXPECT_NEAR(st.loss_sum, legal, tol * legal) << "threads " << threads;
    EXPECT_EQ(st.count, double(B * T));
    const std::vector<float> got = Grads(*be);
    for (const auto& t : be->layout().tensors) {
      double n2 = 0, d2 = 0;
      for (size_t i = t.offset; i < t.offset + t.size(); ++i) {
        n2 += double(want[i]) * want[i];
        d2 += double(got[i] - want[i]) * (got[i] - want[i]);
        if (precision == Precision::kFp32) {
          ASSERT_NEAR(got[i], want[i], 1e-6 + 1e-4 * std::abs(want[i]))
              << t.name << " threads " << threads;
        }
      }
      EXPECT_GT(n2, 0.0) << t.name;
      EXPECT_LT(std::sqrt(d2 / n2), tol) << t.name << " threads " << threads;
    }
    // Bitwise reproducible at a given thread count.
    be->Step(batch, true, 0);
    EXPECT_EQ(Grads(*be), got) << "threads " << threads;
    // Validation (train = false) runs the same objective.
    EXPECT_NEAR(be->Step(batch, false, 0).loss_sum, legal, tol * legal);
  }
}

TEST(LegalLoss, GroupedFastPathEqualsMaskedOracleFp32) { FastPathAgainstOracle(Precision::kFp32, 1e-5); }

TEST(LegalLoss, GroupedFastPathEqualsMaskedOracleBf16) {
  if (!HaveBf16()) GTEST_SKIP() << "no bf16 on this CPU";
  FastPathAgainstOracle(Precision::kBf16, 2e-2);
}

// Example e of a batch as a batch of one.
Batch OneExample(const Batch& b, int e) {
  Batch o;
  o.batch = 1;
  o.steps = b.steps;
  const size_t a = size_t(e) * b.steps, z = a + b.steps;
  o.inputs.assign(b.inputs.begin() + a, b.inputs.begin() + z);
  o.targets.assign(b.targets.begin() + a, b.targets.begin() + z);
  o.legal_lo.assign(b.legal_lo.begin() + a, b.legal_lo.begin() + z);
  o.legal_hi.assign(b.legal_hi.begin() + a, b.legal_hi.begin() + z);
  if (!b.weights.empty()) o.weights.assign(b.weights.begin() + a, b.weights.begin() + z);
  return o;
}

// The clip path over legal ranges (rows grouped by range, the dense norms
// from the pairs of overlapping ranges, one GEMM per run for the clipped sum)
// against an explicit per-example backward: each example alone through the
// plain Step (its gradient g_b; finite differences above), then ||g_b|| and
// sum_b min(1, C / ||g_b||) g_b. fp32; a clip that binds for about half the
// examples and one that never does.
void ClipAgainstPerExample(int threads, bool weighted) {
  const NetworkSpec spec = Spec(16);
  const int B = 16, T = 12;  // R = 192 rows: up to 3 dense threads
  const std::vector<float> w = Params(spec, 31);
  Batch batch = LegalBatch(B, T, 17, weighted);
  // One example of only one-id ranges (g_b = 0), one of a single weighted row.
  for (int t = 0; t < T; ++t) {
    batch.legal_lo[t] = batch.targets[t] = 0;
    batch.legal_hi[t] = 1;
  }
  if (weighted)
    for (int t = 0; t < T; ++t) batch.weights[size_t(T) + t] = t == 4 ? 2.0f : 0.0f;
  auto one = cpu::NewCpuTrainBackend(spec, 1, T);
  one->SetThreads(1);
  one->SetParams(w.data());
  const size_t n = one->layout().total;
  std::vector<std::vector<float>> per(B);
  std::vector<double> norms(B);
  for (int b = 0; b < B; ++b) {
    one->Step(OneExample(batch, b), true, 0);
    per[b] = Grads(*one);
    double n2 = 0;
    for (float g : per[b]) n2 += double(g) * g;
    norms[b] = std::sqrt(n2);
  }
  EXPECT_EQ(norms[0], 0.0);
  std::vector<double> sorted(norms);
  std::sort(sorted.begin(), sorted.end());
  for (int threads_used : {threads}) {
    auto be = cpu::NewCpuTrainBackend(spec, B, T);
    be->SetThreads(threads_used);
    be->SetParams(w.data());
    for (double c : {sorted[B / 2], 1e9}) {
      PerExampleClip clip;
      clip.l2_norm_clip = float(c);
      std::vector<float> got_norms;
      clip.norms = &got_norms;
      const StepStats st = be->Step(batch, true, 0, &clip);
      const StepStats ref = be->Step(batch, false, 0);
      EXPECT_NEAR(st.loss_sum, ref.loss_sum, 1e-5 * ref.loss_sum);
      EXPECT_EQ(st.count, ref.count);
      be->Step(batch, true, 0, &clip);
      const std::vector<float> g = Grads(*be);
      ASSERT_EQ(got_norms.size(), size_t(B));
      std::vector<double> want(n, 0.0);
      for (int b = 0; b < B; ++b) {
        EXPECT_NEAR(got_norms[b], norms[b], 1e-6 + 1e-4 * norms[b]) << "example " << b;
        const double s = norms[b] > c ? c / norms[b] : 1.0;
        for (size_t i = 0; i < n; ++i) want[i] += s * per[b][i];
      }
      for (size_t i = 0; i < n; ++i)
        ASSERT_NEAR(g[i], want[i], 1e-6 + 1e-4 * std::abs(want[i]))
            << "param " << i << " clip " << c << " threads " << threads_used;
      // Bitwise reproducible at a given thread count.
      be->Step(batch, true, 0, &clip);
      EXPECT_EQ(Grads(*be), g);
    }
  }
}

TEST(LegalLoss, ClipMatchesPerExampleBackward) {
  for (int threads : {1, 2, 3}) ClipAgainstPerExample(threads, false);
}

TEST(LegalLoss, ClipMatchesPerExampleBackwardWeighted) {
  for (int threads : {1, 2, 3}) ClipAgainstPerExample(threads, true);
}

// The CUDA backend masks the logits outside [lo, hi): the same loss and
// gradients as the CPU oracle (skips without a GPU).
TEST(LegalLoss, CudaMatchesCpu) {
  std::string why;
  if (!CudaAvailable(&why)) GTEST_SKIP() << "no GPU: " << why;
  const NetworkSpec spec = Spec(32);
  const int B = 16, T = 12;
  const std::vector<float> w = Params(spec, 21);
  const Batch batch = LegalBatch(B, T, 5, /*weighted=*/true);
  auto cpu = MakeTrainBackend(DeviceKind::kCpu, spec, B, T).ValueOrThrow();
  auto gpu = MakeTrainBackend(DeviceKind::kCuda, spec, B, T).ValueOrThrow();
  cpu->SetParams(w.data());
  gpu->SetParams(w.data());
  const StepStats a = cpu->Step(batch, true, 0), b = gpu->Step(batch, true, 0);
  EXPECT_NEAR(b.loss_sum, a.loss_sum, 1e-5 * a.loss_sum);
  EXPECT_NEAR(b.correct, a.correct, 1e-9);
  const std::vector<float> ga = Grads(*cpu), gb = Grads(*gpu);
  for (size_t i = 0; i < ga.size(); ++i) ASSERT_NEAR(gb[i], ga[i], 1e-6 + 1e-3 * std::abs(ga[i])) << i;
}

TEST(LegalLoss, RejectsTargetsOutsideTheirRange) {
  const NetworkSpec spec = Spec(8);
  auto be = cpu::NewCpuTrainBackend(spec, 2, 3);
  std::vector<float> w = Params(spec, 1);
  be->SetParams(w.data());
  Batch b = LegalBatch(2, 3, 1, false);
  b.legal_lo[4] = b.targets[4] + 1;
  b.legal_hi[4] = std::max(b.legal_hi[4], b.legal_lo[4] + 1);
  EXPECT_THROW(be->Step(b, true, 0), Error);
  b = LegalBatch(2, 3, 1, false);
  b.legal_hi.pop_back();
  EXPECT_THROW(be->Step(b, true, 0), Error);
}

// Dataset side: a field table whose records (a long text column) are longer
// than seq_length, so chunks start inside records.
InputData Table() {
  InputData in;
  in.path = "mem.csv";
  in.delimiter = ',';
  in.header = {"c", "n", "note"};
  const char* cats[] = {"red", "green", "blue"};
  for (int i = 0; i < 300; ++i) {
    in.records.push_back({cats[i % 3], std::to_string((i * 37) % 1000),
                          std::string(size_t(3 + i % 9), char('a' + i % 5))});
    in.lines.push_back(i + 2);
  }
  return in;
}

// Row r's ranges against a cursor walk of its targets: from the first record
// start (<n> input) on, AllowedRange before each target, restarting at <n>.
void CheckRow(const FieldTokenizer& f, const Batch& b, int r, int* walked) {
  const size_t T = size_t(b.steps), o = size_t(r) * T;
  FieldTokenizer::Cursor c;
  bool on = false;
  for (size_t t = 0; t < T; ++t) {
    const int32_t y = b.targets[o + t];
    ASSERT_LE(b.legal_lo[o + t], y) << "row " << r << " step " << t;
    ASSERT_LT(y, b.legal_hi[o + t]) << "row " << r << " step " << t;
    if (b.inputs[o + t] == f.end_id()) {
      c = FieldTokenizer::Cursor();
      f.Begin(&c, nullptr);
      on = true;
    }
    if (!on) continue;
    int lo = 0, hi = 0;
    f.AllowedRange(c, &lo, &hi);
    EXPECT_EQ(b.legal_lo[o + t], lo) << "row " << r << " step " << t;
    EXPECT_EQ(b.legal_hi[o + t], hi) << "row " << r << " step " << t;
    f.Advance(&c, y, nullptr);
    ++*walked;
  }
}

TEST(LegalRanges, DatasetBatchesCarryTheCursorRanges) {
  InputData in = Table();
  auto ft = FieldTokenizer::Train(in.header, in.records, FieldTokenizerOptions{}).ValueOrThrow();
  const int rec = ft->max_record_tokens();
  const int seq = rec / 2;  // every record crosses a chunk boundary
  ASSERT_GE(seq, 3);
  auto d = SequenceData::Build(in, *ft, seq, 4, true, 7).ValueOrThrow();
  ASSERT_TRUE(d.legal_ranges());
  Batch b;
  int walked = 0, mid = 0, narrow = 0;
  auto order = d.EpochOrder(1, 1000);
  for (int64_t i = 0; i < d.train_batches() + d.val_batches(); ++i) {
    if (i < d.train_batches()) {
      d.TrainBatch(order, i, &b);
    } else {
      d.ValBatch(i - d.train_batches(), &b);
    }
    ASSERT_EQ(b.legal_lo.size(), b.targets.size());
    for (int r = 0; r < b.batch; ++r) {
      mid += b.inputs[size_t(r) * b.steps] != ft->end_id();
      CheckRow(*ft, b, r, &walked);
    }
    for (size_t k = 0; k < b.targets.size(); ++k)
      narrow += b.legal_hi[k] - b.legal_lo[k] < ft->vocab_size();
  }
  EXPECT_GT(mid, 10) << "chunks starting inside a record";
  EXPECT_GT(walked, 1000);
  EXPECT_GT(narrow, 1000);
  // DP records: every position's range (padding: <n>'s one id).
  auto rd = RecordData::Build(in, *ft, 4 * rec).ValueOrThrow();
  ASSERT_TRUE(rd.legal_ranges());
  const int64_t ids[] = {0, 5, 17};
  rd.FillBatch(ids, 3, &b, /*row_quantum=*/4);  // rows 3 and 4: empty examples
  ASSERT_EQ(b.batch, 5);
  for (int r = 0; r < 3; ++r) CheckRow(*ft, b, r, &walked);
  int padding = 0;
  for (size_t k = 0; k < b.targets.size(); ++k)
    if (b.weights[k] == 0) {
      EXPECT_EQ(b.targets[k], ft->end_id());
      EXPECT_EQ(b.legal_lo[k], ft->end_id());
      EXPECT_EQ(b.legal_hi[k], ft->end_id() + 1);
      ++padding;
    }
  EXPECT_GE(padding, b.steps);
}

// DP chunks padded to RecordData::PaddedRows (trainer DpStep): the
// empty rows add nothing, so the padded chunk gives the unpadded one's loss,
// count, per-example norms (first n; the padding's are 0) and clipped
// gradient sum, with dropout on (the masks of rows < n are a prefix of each
// step's Philox stream), in fp32 and bf16, for every architecture.
TEST(LegalRanges, PaddedDpChunksEqualUnpaddedOnes) {
  InputData in = Table();
  auto ft = FieldTokenizer::Train(in.header, in.records, FieldTokenizerOptions{}).ValueOrThrow();
  auto rd = RecordData::Build(in, *ft, 4 * ft->max_record_tokens()).ValueOrThrow();
  const int q = RecordData::kDpRowQuantum, n = 7;
  const int64_t ids[n] = {3, 0, 5, 17, 40, 41, 299};
  // PaddedRows: the least 16 k + 1 >= n, fixed points at 16 k + 1.
  const std::pair<int, int> cases[] = {{1, 1},   {2, 17},    {7, 17},    {17, 17},
                                       {18, 33}, {500, 513}, {513, 513}, {514, 529}};
  for (auto [m, want] : cases) EXPECT_EQ(RecordData::PaddedRows(m, q), want) << m;
  EXPECT_EQ(RecordData::PaddedRows(7, 1), 7);
  Batch plain, padded;
  rd.FillBatch(ids, n, &plain);
  rd.FillBatch(ids, n, &padded, q);
  const int rows = RecordData::PaddedRows(n, q);
  ASSERT_EQ(plain.batch, n);
  ASSERT_EQ(padded.batch, rows);
  ASSERT_EQ(padded.steps, plain.steps);
  const size_t T = size_t(plain.steps);
  for (size_t i = size_t(n) * T; i < padded.weights.size(); ++i) ASSERT_EQ(padded.weights[i], 0.0f);
  EXPECT_TRUE(std::equal(plain.inputs.begin(), plain.inputs.end(), padded.inputs.begin()));
  EXPECT_TRUE(std::equal(plain.weights.begin(), plain.weights.end(), padded.weights.begin()));
  for (Architecture arch : kAllArchitectures)
    for (Precision prec : {Precision::kFp32, Precision::kBf16}) {
      NetworkSpec spec;
      spec.vocab_size = ft->vocab_size();
      spec.embedding_dim = 8;
      spec.rnn_units = 16;
      spec.num_layers = 2;
      spec.dropout_rate = 0.25f;
      spec.architecture = arch;
      const std::vector<float> w = Params(spec, 5);
      auto be = cpu::NewCpuTrainBackend(spec, rows, int(T), prec);
      be->SetThreads(1);
      be->SetParams(w.data());
      PerExampleClip clip;
      std::vector<float> norms_plain, norms_padded;
      clip.norms = &norms_plain;
      clip.l2_norm_clip = 1e9f;
      be->Step(plain, true, 99, &clip);
      std::vector<float> sorted(norms_plain);
      std::sort(sorted.begin(), sorted.end());
      clip.l2_norm_clip = sorted[n / 2];  // binds for about half
      const StepStats a = be->Step(plain, true, 99, &clip);
      const std::vector<float> ga = Grads(*be);
      clip.norms = &norms_padded;
      const StepStats b = be->Step(padded, true, 99, &clip);
      const std::vector<float> gb = Grads(*be);
      const double tol = prec == Precision::kFp32 ? 1e-5 : 1e-2;
      const std::string what = std::string(ArchitectureName(arch)) + " " + PrecisionName(prec);
      EXPECT_NEAR(b.loss_sum, a.loss_sum, tol * a.loss_sum) << what;
      EXPECT_EQ(b.count, a.count) << what;
      ASSERT_EQ(norms_padded.size(), size_t(rows)) << what;
      for (int r = 0; r < rows; ++r)
        EXPECT_NEAR(norms_padded[r], r < n ? norms_plain[r] : 0.0f, 1e-6 + tol * norms_plain[r % n])
            << what << " row " << r;
      double n2 = 0, d2 = 0;
      for (size_t i = 0; i < ga.size(); ++i) {
        n2 += double(ga[i]) * ga[i];
        d2 += double(gb[i] - ga[i]) * (gb[i] - ga[i]);
      }
      ASSERT_GT(n2, 0.0) << what;
      EXPECT_LT(std::sqrt(d2 / n2), tol) << what;
    }
}

TEST(LegalRanges, CharTokenizerBatchesHaveNone) {
  InputData in = Table();
  TokenizerConfig c;
  c.type = "char";
  auto tok = TrainTokenizer(c, in.records).ValueOrThrow();
  EXPECT_FALSE(LegalRanges::Applies(*tok));
  auto d = SequenceData::Build(in, *tok, 20, 4, false, 3).ValueOrThrow();
  EXPECT_FALSE(d.legal_ranges());
  Batch b;
  d.TrainBatch(d.EpochOrder(1, 100), 0, &b);
  EXPECT_TRUE(b.legal_lo.empty());
  EXPECT_TRUE(b.legal_hi.empty());
}

}  // namespace
}  // namespace ds
