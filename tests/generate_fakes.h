// Test fakes for generation: a tiny character tokenizer and a deterministic
// "bigram + length" inference backend, so that generation tests run without
// the real network or tokenizer.
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "generate/generator.h"
#include "tokenize/tokenizer.h"
#include "util/rng.h"

namespace ds::testing {

// ids: 0 <n>, 1 <d>, 2 unused, 3.. one character each.
class FakeTokenizer : public Tokenizer {
 public:
  explicit FakeTokenizer(std::vector<std::string> chars = {"a", "b", "c", "1", "2", "3", ".", "-",
                                                           ",", "\"", "\n", "x"})
      : chars_(std::move(chars)) {}
  std::string type() const override { return "char"; }
  int vocab_size() const override { return 3 + int(chars_.size()); }
  TokenKind kind(int id) const override {
    ++kind_calls;
    if (id == 0) return TokenKind::kEndOfRecord;
    if (id == 1) return TokenKind::kDelimiter;
    if (id == 2) return TokenKind::kUnused;
    return TokenKind::kText;
  }
  const std::string& text(int id) const override {
    ++text_calls;
    static const std::string empty;
    return id >= 3 ? chars_[size_t(id - 3)] : empty;
  }
  int column(int) const override { return -1; }
  int end_id() const override { return 0; }
  int delimiter_id() const override { return 1; }
  int column_id(int) const override { return -1; }
  bool column_markers() const override { return false; }
  int num_columns() const override { return 0; }
  Status EncodeField(std::string_view field, std::vector<int32_t>* out) const override {
    for (char c : field) {
      int id = Id(std::string(1, c));
      if (id < 0) return DS_ERR(kInvalidInput, "character '{}' is not in the vocabulary", c);
      out->push_back(id);
    }
    return Status::Ok();
  }
  Status Save(const std::string&) const override {
    return DS_ERR(kInternal, "the fake tokenizer is not saved");
  }
  int Id(const std::string& c) const {
    for (size_t i = 0; i < chars_.size(); ++i)
      if (chars_[i] == c) return 3 + int(i);
    return -1;
  }

  mutable int64_t kind_calls = 0, text_calls = 0;

 private:
  std::vector<std::string> chars_;
};

// logits[v] = table[input][v] + (v == <n> ? end_bias(pos) : 0), where pos =
// tokens fed since the slot's last reset and table is a fixed random [V, V]
// matrix. end_bias(pos) = -inf before min_len, then end_logit (so records end
// with a geometric length distribution); end_logit = -inf never ends.
// The unused id 2 gets a high logit: the sampler must never pick it.
struct FakeModelSpec {
  int min_len = 2;
  float end_logit = 0.5f;
  float scale = 2.0f;  // table entries uniform in [-scale, scale]
  uint64_t table_seed = 11;
  int64_t* steps = nullptr;  // counts Step calls (may be null)
  bool report_memory = false;  // act like a device backend: memory_stats() (see below)
};

class FakeBackend : public InferBackend {
 public:
  FakeBackend(int V, int slots, FakeModelSpec m) : m_(m), pos_(size_t(slots), -1) {
    spec_.vocab_size = V;
    table_.resize(size_t(V) * V);
    Philox rng(m.table_seed, 0);
    for (auto& x : table_) x = (rng.Uniform() * 2 - 1) * m.scale;
  }
  const NetworkSpec& spec() const override { return spec_; }
  int slots() const override { return int(pos_.size()); }
  void ResetSlot(int s) override { pos_[size_t(s)] = 0; }
  void Step(const int* ids, const int32_t* tokens, int n, float* logits) override {
    if (m_.steps) ++*m_.steps;
    const int V = spec_.vocab_size;
    for (int r = 0; r < n; ++r) {
      int s = ids[r];
      if (pos_[size_t(s)] < 0) throw std::runtime_error("slot used before reset");
      float* out = logits + size_t(r) * V;
      for (int v = 0; v < V; ++v) out[v] = table_[size_t(tokens[r]) * V + v];
      out[2] = 50.0f;  // unused token: must be masked by the sampler
      out[0] = pos_[size_t(s)] < m_.min_len ? -INFINITY : m_.end_logit;
      ++pos_[size_t(s)];
    }
    steps_ += n;
  }
  // With report_memory: "allocated" grows with the steps taken, the limit is
  // 1 MiB + the slot count (so a test can tell workers' reports apart).
  std::optional<AllocatorStats> memory_stats() const override {
    if (!m_.report_memory) return std::nullopt;
    AllocatorStats a;
    a.allocated_bytes = size_t(steps_) * 16;
    a.peak_allocated_bytes = a.allocated_bytes;
    a.reserved_bytes = a.peak_reserved_bytes = 2 * a.allocated_bytes;
    a.limit_bytes = (size_t(1) << 20) + pos_.size();
    return a;
  }

 private:
  FakeModelSpec m_;
  NetworkSpec spec_;
  std::vector<float> table_;  // [V, V]
  std::vector<int> pos_;      // [slots]
  int64_t steps_ = 0;         // slot-steps taken
};

// A GenerationModel over the fakes. header empty = text lines.
inline GenerationModel FakeGenerationModel(const FakeTokenizer& tok,
                                           std::vector<std::string> header = {},
                                           FakeModelSpec m = {}) {
  GenerationModel g;
  g.tokenizer = &tok;
  g.header = std::move(header);
  if (!g.header.empty()) {
    g.delimiter = ',';
    g.rules = ColumnRules::FieldCountOnly(g.header);
  }
  int V = tok.vocab_size();
  g.make_backend = [V, m](int slots) -> Result<std::unique_ptr<InferBackend>> {
    return std::unique_ptr<InferBackend>(new FakeBackend(V, slots, m));
  };
  return g;
}

}  // namespace ds::testing
