// Cross-check of the CPU backend against PyTorch (nn.Embedding + nn.LSTM +
// nn.Linear, float64): logits, loss and every gradient, with identical weights.
// Always against the committed golden dump tests/data/golden/torch_lstm (inputs,
// parameters and PyTorch's outputs, written by scripts/make_golden.sh); also
// live where DS_TORCH_PYTHON (default /usr/bin/python3) can import torch.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "model/network.h"
#include "util/rng.h"

namespace ds {
namespace {

namespace fs = std::filesystem;

template <typename T>
void WriteFile(const fs::path& p, const std::vector<T>& v) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(T)));
  ASSERT_TRUE(f.good()) << p;
}

template <typename T>
std::vector<T> ReadRaw(const fs::path& p, size_t n) {
  std::vector<T> v(n);
  std::ifstream f(p, std::ios::binary);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * sizeof(T)));
  EXPECT_EQ(size_t(f.gcount()), n * sizeof(T)) << p << ": short or missing";
  EXPECT_EQ(f.peek(), std::char_traits<char>::eof()) << p << ": longer than expected";
  return v;
}

// A reference output: NAME.f64, or NAME.f32 (the golden dump) widened.
std::vector<double> ReadRef(const fs::path& dir, const std::string& name, size_t n) {
  if (fs::exists(dir / (name + ".f32"))) {
    std::vector<float> f = ReadRaw<float>(dir / (name + ".f32"), n);
    return std::vector<double>(f.begin(), f.end());
  }
  return ReadRaw<double>(dir / (name + ".f64"), n);
}

// [rows, cols] row-major -> [cols, rows].
std::vector<float> Transpose(const float* x, int rows, int cols) {
  std::vector<float> t(size_t(rows) * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) t[size_t(c) * rows + r] = x[size_t(r) * cols + c];
  return t;
}

// Elementwise |a - ref| <= rtol * (|ref| + 0.01 max|ref|), and normwise.
void ExpectClose(const std::string& what, const float* a, const double* ref, size_t n,
                 double rtol) {
  double mx = 0, num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, std::abs(ref[i]));
  ASSERT_GT(mx, 0.0) << what << " is all zeros: the check would be vacuous";
  int bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::abs(a[i] - ref[i]);
    num += d * d;
    den += ref[i] * ref[i];
    if (d > rtol * (std::abs(ref[i]) + 0.01 * mx) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: " << a[i] << " vs torch " << ref[i];
  }
  EXPECT_LT(std::sqrt(num / den), rtol) << what;
}

// Logits, loss and every gradient of `be` on `batch` against the reference
// outputs in `dir` (torch_crosscheck.py's layout).
void CompareWithReference(cpu::CpuTrainBackend* be, const NetworkSpec& spec, const Batch& batch,
                          const fs::path& dir, double rtol) {
  const int V = spec.vocab_size, H = spec.rnn_units, L = spec.num_layers;
  const ParamLayout& lay = be->layout();
  std::vector<float> logits(size_t(batch.batch) * batch.steps * V);
  be->ForwardLogits(batch, logits.data());
  ExpectClose("logits", logits.data(), ReadRef(dir, "logits", logits.size()).data(),
              logits.size(), rtol);
  StepStats st = be->Step(batch, true, 0);
  const double loss = ReadRaw<double>(dir / "loss.f64", 1)[0];
  EXPECT_NEAR(st.loss_sum / st.count, loss, 1e-5 * loss);

  std::vector<float> g(lay.total);
  be->GetGrads(g.data());
  auto check = [&](const std::string& name, const std::vector<float>& ours) {
    ExpectClose(name, ours.data(), ReadRef(dir, "grad_" + name, ours.size()).data(),
                ours.size(), rtol);
  };
  check("embedding", std::vector<float>(g.begin() + lay.offset("embedding"),
                                        g.begin() + lay.offset("embedding") + size_t(V) * spec.embedding_dim));
  for (int l = 0; l < L; ++l) {
    const auto& Ly = lay.layer(l);
    const std::string p = "lstm" + std::to_string(l);
    check(p + ".weight_ih", Transpose(g.data() + Ly.wx, Ly.in, 4 * H));
    check(p + ".weight_hh", Transpose(g.data() + Ly.wh, H, 4 * H));
    check(p + ".bias_ih", std::vector<float>(g.begin() + Ly.b, g.begin() + Ly.b + 4 * H));
  }
  check("dense.weight", Transpose(g.data() + lay.offset("dense.w"), H, V));
  check("dense.bias", std::vector<float>(g.begin() + lay.offset("dense.b"), g.begin() + lay.offset("dense.b") + V));
}

// The committed golden dump: tiny shapes (H = 32: two 16-unit blocks, so the
// internal gate permutation is exercised), fp32 inputs and parameters, fp32
// PyTorch outputs (fp64 loss); tolerance 1e-4 relative, as for the live check.
TEST(TorchCrosscheck, MatchesCommittedGolden) {
  const fs::path dir = fs::path(DS_TEST_DATA) / "golden" / "torch_lstm";
  std::ifstream specf(dir / "spec.txt");
  ASSERT_TRUE(specf.good()) << dir / "spec.txt";
  int V = 0, E = 0, H = 0, L = 0, B = 0, T = 0;
  specf >> V >> E >> H >> L >> B >> T;
  ASSERT_TRUE(V > 0 && E > 0 && H > 0 && L > 0 && B > 0 && T > 0) << "bad spec.txt";
  EXPECT_EQ(H, 32) << "the golden case must keep two 16-unit blocks";
  EXPECT_GE(L, 2);
  NetworkSpec spec;
  spec.vocab_size = V;
  spec.embedding_dim = E;
  spec.rnn_units = H;
  spec.num_layers = L;
  spec.dropout_rate = 0.0f;
  auto be = cpu::NewCpuTrainBackend(spec, B, T);
  be->SetThreads(2);
  const ParamLayout& lay = be->layout();
  std::vector<float> w(lay.total, std::nanf(""));
  auto put = [&](const std::string& name, size_t offset, size_t n) {
    std::vector<float> v = ReadRaw<float>(dir / (name + ".f32"), n);
    std::copy(v.begin(), v.end(), w.begin() + offset);
  };
  put("embedding", lay.offset("embedding"), size_t(V) * E);
  for (int l = 0; l < L; ++l) {
    const auto& Ly = lay.layer(l);
    const std::string p = "lstm" + std::to_string(l);
    // Torch [4H, In] / [4H, H] -> ours [In, 4H] / [H, 4H].
    std::vector<float> ih = ReadRaw<float>(dir / (p + ".weight_ih.f32"), size_t(4) * H * Ly.in);
    std::vector<float> hh = ReadRaw<float>(dir / (p + ".weight_hh.f32"), size_t(4) * H * H);
    std::vector<float> ih_t = Transpose(ih.data(), 4 * H, Ly.in);
    std::vector<float> hh_t = Transpose(hh.data(), 4 * H, H);
    std::copy(ih_t.begin(), ih_t.end(), w.begin() + Ly.wx);
    std::copy(hh_t.begin(), hh_t.end(), w.begin() + Ly.wh);
    put(p + ".bias_ih", Ly.b, size_t(4) * H);
  }
  std::vector<float> dw = ReadRaw<float>(dir / "dense.weight.f32", size_t(V) * H);
  std::vector<float> dw_t = Transpose(dw.data(), V, H);
  std::copy(dw_t.begin(), dw_t.end(), w.begin() + lay.offset("dense.w"));
  put("dense.bias", lay.offset("dense.b"), V);
  for (const auto& t : lay.tensors)  // every tensor came from the dump
    for (size_t i = 0; i < t.size(); ++i) ASSERT_FALSE(std::isnan(w[t.offset + i])) << t.name;
  for (float& x : w) x = std::isnan(x) ? 0.0f : x;  // alignment padding
  be->SetParams(w.data());
  Batch batch;
  batch.batch = B;
  batch.steps = T;
  batch.inputs = ReadRaw<int32_t>(dir / "inputs.i32", size_t(B) * T);
  batch.targets = ReadRaw<int32_t>(dir / "targets.i32", size_t(B) * T);
  batch.weights = ReadRaw<float>(dir / "weights.f32", size_t(B) * T);
  CompareWithReference(be.get(), spec, batch, dir, 1e-4);
}

TEST(TorchCrosscheck, LogitsLossAndGradientsLive) {
  // DS_TORCH_PYTHON: a python with torch and numpy (default /usr/bin/python3).
  const char* env = std::getenv("DS_TORCH_PYTHON");
  const std::string python = env && *env ? env : "/usr/bin/python3";
  if (std::system((python + " -c 'import torch, numpy' >/dev/null 2>&1").c_str()) != 0) {
    GTEST_SKIP() << "PyTorch is not importable by " << python
                 << " (the golden comparison ran instead; set DS_TORCH_PYTHON for the live one)";
  }
  NetworkSpec spec;
  spec.vocab_size = 50;
  spec.embedding_dim = 16;
  spec.rnn_units = 32;  // two 16-unit blocks: exercises the internal gate permutation
  spec.num_layers = 2;
  spec.dropout_rate = 0.2f;  // inactive: Step(train) is compared with dropout 0 below
  const int V = spec.vocab_size, E = spec.embedding_dim, H = spec.rnn_units, L = spec.num_layers;
  const int B = 4, T = 12;
  NetworkSpec nodrop = spec;
  nodrop.dropout_rate = 0.0f;
  auto be = cpu::NewCpuTrainBackend(nodrop, B, T);
  be->SetThreads(2);
  const ParamLayout& lay = be->layout();
  std::vector<float> w(lay.total);
  InitParams(spec, "glorot_uniform", 17, w.data());
  Philox rng(17, 1);
  for (const auto& t : lay.tensors)
    if (t.shape.size() == 1)
      for (size_t i = 0; i < t.size(); ++i) w[t.offset + i] += 0.4f * (rng.Uniform() - 0.5f);
  be->SetParams(w.data());
  Batch batch;
  batch.batch = B;
  batch.steps = T;
  for (int i = 0; i < B * T; ++i) {
    batch.inputs.push_back(int32_t(rng.Below(V)));
    batch.targets.push_back(int32_t(rng.Below(V)));
    batch.weights.push_back(i % 7 == 2 ? 0.0f : 0.5f + rng.Uniform());
  }

  fs::path dir = fs::temp_directory_path() / ("ds_torch_xcheck_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream(dir / "spec.txt")
        << V << " " << E << " " << H << " " << L << " " << B << " " << T << "\n";
  }
  WriteFile(dir / "inputs.i32", batch.inputs);
  WriteFile(dir / "targets.i32", batch.targets);
  WriteFile(dir / "weights.f32", batch.weights);
  const size_t emb = lay.offset("embedding");
  WriteFile(dir / "embedding.f32",
            std::vector<float>(w.begin() + emb, w.begin() + emb + size_t(V) * E));
  for (int l = 0; l < L; ++l) {
    const auto Ly = lay.layer(l);
    const std::string p = dir / ("lstm" + std::to_string(l));
    WriteFile(p + ".weight_ih.f32", Transpose(w.data() + Ly.wx, Ly.in, 4 * H));
    WriteFile(p + ".weight_hh.f32", Transpose(w.data() + Ly.wh, H, 4 * H));
    WriteFile(p + ".bias_ih.f32", std::vector<float>(w.begin() + Ly.b, w.begin() + Ly.b + 4 * H));
  }
  WriteFile(dir / "dense.weight.f32", Transpose(w.data() + lay.offset("dense.w"), H, V));
  WriteFile(dir / "dense.bias.f32",
            std::vector<float>(w.begin() + lay.offset("dense.b"), w.begin() + lay.offset("dense.b") + V));
  const std::string cmd = python + " " + DS_SOURCE_DIR +
                          "/tests/torch_crosscheck.py " + dir.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  CompareWithReference(be.get(), nodrop, batch, dir, 1e-4);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ds
