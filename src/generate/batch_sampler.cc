#include "generate/batch_sampler.h"

#include <cmath>

namespace ds {

std::string JoinFields(const std::vector<std::string>& fields, char delimiter) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i && delimiter) out += delimiter;
    out += fields[i];
  }
  return out;
}

BatchSampler::BatchSampler(const Tokenizer& tok, InferBackend& backend,
                           const SamplerOptions& options,
                           std::vector<std::vector<int32_t>> prefixes, TokenFilter* filter,
                           std::vector<std::vector<std::string>> prefix_fields)
    : tok_(tok),
      backend_(backend),
      opt_(options),
      prefixes_(std::move(prefixes)),
      filter_(filter),
      prefix_fields_(std::move(prefix_fields)),
      V_(tok.vocab_size()) {
  DS_CHECK(backend.slots() >= 1);
  DS_CHECK(prefix_fields_.empty() || prefix_fields_.size() == prefixes_.size());
  DS_CHECK(backend.spec().vocab_size == V_);
  if (filter_) filter_->SetTemperature(opt_.temperature);
  int n = backend.slots();
  slots_.reserve(n);
  for (int i = 0; i < n; ++i) {
    slots_.emplace_back(tok);
    backend.ResetSlot(i);  // padding rows (full_batch) start from a defined state
  }
  never_.assign(V_, 0);
  never_before_.assign(size_t(V_) + 1, 0);
  for (int i = 0; i < V_; ++i) {
    never_[i] = tok.kind(i) == TokenKind::kUnused;
    never_before_[size_t(i) + 1] = never_before_[size_t(i)] + never_[i];
  }
  ids_.resize(n);
  tokens_.resize(n);
  lo_.resize(n);
  hi_.resize(n);
  logits_.resize(size_t(n) * V_);
  scratch_.resize(size_t(SampleScratchSize(V_)));
}

void BatchSampler::Start(int s, const GenTask& task) {
  Slot& sl = slots_[s];
  DS_CHECK(task.prefix < int32_t(prefixes_.size()));
  sl.busy = true;
  sl.task = task;
  sl.rng = Philox(opt_.seed, task.id);
  sl.decoder.Reset();
  sl.feed = 0;
  sl.input = tok_.end_id();
  sl.sampled = 0;
  backend_.ResetSlot(s);
  if (filter_) filter_->Begin(s);
  ++active_;
}

void BatchSampler::Finish(int s, bool valid, std::string explain,
                          std::vector<GeneratedRecord>* done) {
  Slot& sl = slots_[s];
  GeneratedRecord r;
  r.id = sl.task.id;
  r.prefix = sl.task.prefix;
  r.valid = valid;
  r.explain = std::move(explain);
  r.fields = sl.decoder.fields();
  if (r.prefix >= 0 && !prefix_fields_.empty()) {  // the given values, verbatim
    const auto& pf = prefix_fields_[size_t(r.prefix)];
    for (size_t k = 0; k < pf.size() && k < r.fields.size(); ++k) r.fields[k] = pf[k];
  }
  r.text = JoinFields(r.fields, opt_.delimiter);
  r.tokens = sl.sampled;
  done->push_back(std::move(r));
  sl.busy = false;
  --active_;
}

void BatchSampler::Step(std::vector<GeneratedRecord>* done) {
  for (int s = 0; s < int(slots_.size()) && !queue_.empty(); ++s) {
    if (slots_[s].busy) continue;
    Start(s, queue_.front());
    queue_.pop_front();
  }
  int n = 0, busy = 0;
  for (int s = 0; s < int(slots_.size()); ++s) {
    if (slots_[s].busy) {
      ids_[n] = s;
      tokens_[n] = slots_[s].input;
      // Logits needed: none for a forced prefix token, else the filter's range.
      lo_[n] = 0;
      hi_[n] = Forced(slots_[s]) ? 0 : V_;
      if (hi_[n] > 0 && filter_ && filter_->Range(s, &lo_[n], &hi_[n])) {
        DS_CHECK(0 <= lo_[n] && lo_[n] <= hi_[n] && hi_[n] <= V_);
      }
      ++n;
      ++busy;
    } else if (opt_.full_batch) {
      ids_[n] = s;
      tokens_[n] = tok_.end_id();
      lo_[n] = hi_[n] = 0;
      ++n;
    }
  }
  if (busy == 0) return;
  backend_.StepRange(ids_.data(), tokens_.data(), n, lo_.data(), hi_.data(), logits_.data());
  ++steps_;
  rows_stepped_ += busy;
  idle_rows_ += n - busy;

  for (int r = 0; r < n; ++r) {
    const int s = ids_[r];
    Slot& sl = slots_[s];
    if (!sl.busy) continue;                // padding row
    float* lg = &logits_[size_t(r) * V_];  // [V]
    int32_t tok;
    if (const int32_t* forced = Forced(sl)) {
      tok = *forced;
      ++sl.feed;
    } else {
      // Only [lo, hi) was computed; outside it the filter's mask is -inf, so
      // sampling the range picks the token sampling the whole row would.
      const int lo = lo_[r], hi = hi_[r];
      if (never_before_[size_t(hi)] > never_before_[size_t(lo)])
        for (int v = lo; v < hi; ++v)
          if (never_[v]) lg[v] = -INFINITY;
      if (filter_) filter_->Mask(s, lg);
      tok = SampleToken(lg + lo, hi - lo, opt_.temperature, sl.rng, scratch_.data());
      if (tok >= 0) tok += lo;
      if (tok < 0) {
        Finish(s, false, "no token allowed at this point (every token masked)", done);
        continue;
      }
      ++sl.sampled;
      ++tokens_sampled_;
    }
    if (filter_) filter_->Accept(s, tok);
    if (sl.decoder.Push(tok)) {
      Finish(s, sl.decoder.error().empty(), sl.decoder.error(), done);
    } else if (opt_.gen_chars > 0 && int64_t(sl.decoder.chars()) >= opt_.gen_chars) {
      Finish(s, true, {}, done);
    } else if (opt_.max_tokens > 0 && sl.sampled >= opt_.max_tokens) {
      Finish(s, false, fmt::format("no end of record after {} tokens", sl.sampled), done);
    } else {
      sl.input = tok;
    }
  }
}

}  // namespace ds
