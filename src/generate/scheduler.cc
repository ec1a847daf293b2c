#include "generate/scheduler.h"

#include <algorithm>
#include <cmath>

namespace ds {

AttemptScheduler::AttemptScheduler(const Options& options)
    : AttemptScheduler(options, Position()) {}

AttemptScheduler::AttemptScheduler(const Options& options, const Position& s) : opt_(options) {
  opt_.window = std::max<int64_t>(1, opt_.window);
  valid_ = s.valid;
  invalid_ = s.invalid;
  if (opt_.num_prefixes > 0) {
    prefixes_.resize(size_t(opt_.num_prefixes));
    cursor_ = admitted_ = std::min<int64_t>(int64_t(s.attempt), opt_.num_prefixes);
    invalid_completed_ = s.invalid;
    if (cursor_ < opt_.num_prefixes) {
      cursor_tries_ = s.prefix_try;
      prefixes_[size_t(cursor_)].next_try = s.prefix_try;
    }
    if (cursor_ == opt_.num_prefixes)
      finished_ = true;
    else
      Admit();
  } else {
    next_new_ = consume_ = std::max(s.attempt, opt_.first);
    if (valid_ >= opt_.target || consume_ >= opt_.end) finished_ = true;
  }
  if (!finished_ && invalid_ > opt_.max_invalid) CountInvalid();
}

Status AttemptScheduler::CheckStart(const Options& o, const Position& s) {
  if (s.valid < 0 || s.invalid < 0)
    return DS_ERR(kInvalidInput, "negative record counts ({} valid, {} invalid)", s.valid,
                  s.invalid);
  if (o.num_prefixes > 0) {
    if (int64_t(s.attempt) > o.num_prefixes || int64_t(s.attempt) != s.valid)
      return DS_ERR(kInvalidInput, "prefix {} of {} with {} valid records is inconsistent",
                    s.attempt, o.num_prefixes, s.valid);
    if (int64_t(s.prefix_try) > s.invalid)
      return DS_ERR(kInvalidInput, "try {} of a prefix with {} invalid records is inconsistent",
                    s.prefix_try, s.invalid);
    return Status::Ok();
  }
  if (s.prefix_try != 0 || s.attempt != o.first + uint64_t(s.valid) + uint64_t(s.invalid))
    return DS_ERR(kInvalidInput, "attempt {} is not {} valid + {} invalid records", s.attempt,
                  s.valid, s.invalid);
  if (s.valid > o.target)
    return DS_ERR(kInvalidInput, "{} valid records, more than the {} wanted", s.valid, o.target);
  return Status::Ok();
}

AttemptScheduler::Position AttemptScheduler::position() const {
  Position p;
  p.valid = valid_;
  p.invalid = invalid_;
  if (opt_.num_prefixes > 0) {
    p.attempt = uint64_t(cursor_);
    p.prefix_try = cursor_ < opt_.num_prefixes ? cursor_tries_ : 0;
  } else {
    p.attempt = consume_;
  }
  return p;
}

int64_t AttemptScheduler::outstanding() const {
  if (opt_.num_prefixes > 0) return admitted_ - cursor_;
  return int64_t(next_new_ - consume_);
}

int64_t AttemptScheduler::Available() const {
  if (finished_ || !status_.ok()) return 0;
  if (opt_.num_prefixes > 0) return int64_t(ready_.size());
  int64_t need = opt_.target - valid_;
  double rate = double(valid_ + 1) / double(valid_ + invalid_ + 1);
  rate = std::max(rate, 0.01);
  int64_t want = std::min<int64_t>(opt_.window, int64_t(std::ceil(double(need) / rate)));
  if (opt_.end != UINT64_MAX) want = std::min<int64_t>(want, int64_t(opt_.end - consume_));
  return int64_t(requeue_.size()) + std::max<int64_t>(0, want - outstanding());
}

void AttemptScheduler::Issue(int64_t max, std::vector<GenTask>* out) {
  int64_t n = std::min(max, Available());
  for (int64_t k = 0; k < n; ++k) {
    if (!requeue_.empty()) {
      out->push_back(requeue_.front());
      requeue_.pop_front();
    } else if (opt_.num_prefixes > 0) {
      out->push_back(ready_.front());
      ready_.pop_front();
    } else {
      out->push_back(GenTask{next_new_++, opt_.count_prefix});
    }
  }
}

void AttemptScheduler::Requeue(const GenTask& task) {
  if (opt_.num_prefixes > 0)
    ready_.push_front(task);
  else
    requeue_.push_back(task);
}

void AttemptScheduler::CountInvalid() {
  if (status_.ok())
    status_ = DS_ERR(kResourceExhausted,
                     "too many invalid records: more than max_invalid = {} (the model may be "
                     "undertrained, or the rules too strict; see the explain of the invalid "
                     "records)",
                     opt_.max_invalid);
}

void AttemptScheduler::Complete(GeneratedRecord r) {
  if (finished_) return;
  if (opt_.num_prefixes == 0) {
    if (r.id < consume_ || r.id >= next_new_) return;
    results_.try_emplace(r.id, std::move(r));
    return;
  }
  if (r.prefix < 0 || r.prefix >= opt_.num_prefixes) return;
  PrefixState& ps = prefixes_[size_t(r.prefix)];
  if (ps.done || r.id != PrefixAttemptId(r.prefix, ps.next_try)) return;  // duplicate
  if (r.valid) {
    ps.done = true;
  } else {
    ++invalid_completed_;
    if (invalid_completed_ > opt_.max_invalid) CountInvalid();
    if (ps.next_try == UINT32_MAX) {
      CountInvalid();
    } else {
      ++ps.next_try;
      ready_.push_back(GenTask{PrefixAttemptId(r.prefix, ps.next_try), r.prefix});
    }
  }
  ps.pending.push_back(std::move(r));
}

void AttemptScheduler::Admit() {
  while (admitted_ < opt_.num_prefixes && admitted_ - cursor_ < opt_.window) {
    // next_try is 0 except for the first prefix of a resumed run.
    const uint32_t first_try = prefixes_[size_t(admitted_)].next_try;
    ready_.push_back(GenTask{PrefixAttemptId(admitted_, first_try), int32_t(admitted_)});
    ++admitted_;
  }
}

bool AttemptScheduler::Pop(GeneratedRecord* out) {
  if (finished_) return false;
  if (opt_.num_prefixes == 0) {
    if (!status_.ok()) return false;
    auto it = results_.find(consume_);
    if (it == results_.end()) return false;
    *out = std::move(it->second);
    results_.erase(it);
    ++consume_;
    if (consume_ >= opt_.end) finished_ = true;
    if (out->valid) {
      ++valid_;
      if (valid_ >= opt_.target) {
        finished_ = true;
        results_.clear();
        requeue_.clear();
      }
    } else {
      ++invalid_;
      if (invalid_ > opt_.max_invalid) CountInvalid();
    }
    return true;
  }
  if (cursor_ >= opt_.num_prefixes) return false;
  PrefixState& ps = prefixes_[size_t(cursor_)];
  if (ps.pending.empty()) return false;
  *out = std::move(ps.pending.front());
  ps.pending.pop_front();
  if (out->valid) {
    ++valid_;
    ++cursor_;
    cursor_tries_ = 0;
    if (cursor_ == opt_.num_prefixes) {
      finished_ = true;
      ready_.clear();
      requeue_.clear();
    } else {
      Admit();
    }
  } else {
    ++invalid_;
    ++cursor_tries_;
  }
  return true;
}

}  // namespace ds
