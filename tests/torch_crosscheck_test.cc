// Cross-check of the CPU backend against PyTorch (nn.Embedding + nn.LSTM +
// nn.Linear, float64): logits, loss and every gradient, with identical weights.
// Skipped when /usr/bin/python3 cannot import torch.
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

std::vector<double> ReadF64(const fs::path& p, size_t n) {
  std::vector<double> v(n);
  std::ifstream f(p, std::ios::binary);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * sizeof(double)));
  EXPECT_EQ(size_t(f.gcount()), n * sizeof(double)) << p;
  return v;
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

TEST(TorchCrosscheck, LogitsLossAndGradients) {
  if (std::system("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "PyTorch is not importable by /usr/bin/python3 (apt-get install python3-torch)";
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
  const size_t dw = lay.offset("dense.w"), db = lay.offset("dense.b");
  WriteFile(dir / "embedding.f32",
            std::vector<float>(w.begin() + emb, w.begin() + emb + size_t(V) * E));
  for (int l = 0; l < L; ++l) {
    const auto Ly = lay.layer(l);
    const std::string p = dir / ("lstm" + std::to_string(l));
    WriteFile(p + ".weight_ih.f32", Transpose(w.data() + Ly.wx, Ly.in, 4 * H));
    WriteFile(p + ".weight_hh.f32", Transpose(w.data() + Ly.wh, H, 4 * H));
    WriteFile(p + ".bias_ih.f32", std::vector<float>(w.begin() + Ly.b, w.begin() + Ly.b + 4 * H));
  }
  WriteFile(dir / "dense.weight.f32", Transpose(w.data() + dw, H, V));
  WriteFile(dir / "dense.bias.f32", std::vector<float>(w.begin() + db, w.begin() + db + V));
  const std::string cmd = std::string("/usr/bin/python3 ") + DS_SOURCE_DIR +
                          "/tests/torch_crosscheck.py " + dir.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  std::vector<float> logits(size_t(B) * T * V);
  be->ForwardLogits(batch, logits.data());
  ExpectClose("logits", logits.data(), ReadF64(dir / "logits.f64", logits.size()).data(),
              logits.size(), 1e-4);
  StepStats st = be->Step(batch, true, 0);
  const double loss = ReadF64(dir / "loss.f64", 1)[0];
  EXPECT_NEAR(st.loss_sum / st.count, loss, 1e-5 * loss);

  std::vector<float> g(lay.total);
  be->GetGrads(g.data());
  auto check = [&](const std::string& name, const std::vector<float>& ours) {
    ExpectClose(name, ours.data(), ReadF64(dir / ("grad_" + name + ".f64"), ours.size()).data(),
                ours.size(), 1e-4);
  };
  check("embedding", std::vector<float>(g.begin() + emb, g.begin() + emb + size_t(V) * E));
  for (int l = 0; l < L; ++l) {
    const auto Ly = lay.layer(l);
    const std::string p = "lstm" + std::to_string(l);
    check(p + ".weight_ih", Transpose(g.data() + Ly.wx, Ly.in, 4 * H));
    check(p + ".weight_hh", Transpose(g.data() + Ly.wh, H, 4 * H));
    check(p + ".bias_ih", std::vector<float>(g.begin() + Ly.b, g.begin() + Ly.b + 4 * H));
  }
  check("dense.weight", Transpose(g.data() + dw, H, V));
  check("dense.bias", std::vector<float>(g.begin() + db, g.begin() + db + V));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ds
