#include "dist/data_parallel.h"

#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <chrono>
#include <cmath>
#include <limits>

#include "dist/comm.h"
#include "dist/nccl.h"
#include "dist/node_sum.h"
#include "dist/profile.h"
#include "privacy/secure_noise.h"
#include "train/dataset.h"

namespace ds::dist {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int CeilLog2(int64_t k) {
  int e = 0;
  while ((int64_t(1) << e) < k) ++e;
  return e;
}

}  // namespace

void ExactSum::Begin(size_t n, int total_terms) {
  n_ = n;
  total_terms_ = std::max(1, total_terms);
  weights_.clear();
  // Keep the buffers of earlier steps (same n): no allocation per step.
  if (!terms_.empty() && terms_[0].size() != n) terms_.clear();
}

float* ExactSum::Add(double weight) {
  const size_t k = weights_.size();
  if (terms_.size() <= k) terms_.emplace_back(n_);
  weights_.push_back(weight);
  return terms_[k].data();
}

void ExactSum::Add(const float* g, double weight) {
  float* t = Add(weight);
  std::copy(g, g + n_, t);
}

double ExactSum::MaxOf(const float* g, size_t n, double weight) {
  // max |g| on the bits: for |x| the float order is the order of the bits as
  // integers, and NaN and infinity lie above every finite value (an integer
  // max vectorizes; a float one, with its NaN rules, does not).
  uint32_t mx = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, g + i, sizeof b);
    b &= 0x7fffffffu;
    mx = b > mx ? b : mx;
  }
  if (mx >= 0x7f800000u) return std::numeric_limits<double>::infinity();  // NaN or infinite
  float f;
  std::memcpy(&f, &mx, sizeof f);
  const double m = double(f) * std::fabs(weight);
  return !std::isfinite(m) ? std::numeric_limits<double>::infinity() : m;
}

double ExactSum::LocalMax() const {
  double m = 0;
  for (size_t k = 0; k < weights_.size(); ++k) m = std::max(m, MaxOf(terms_[k].data(), n_, weights_[k]));
  return m;
}

int ExactSum::Shift(double m, int total_terms) {
  // |w g| 2^shift < 2^(62 - log2 K): total_terms of them stay below 2^62.
  return std::clamp(62 - (std::ilogb(m) + 1) - CeilLog2(std::max(1, total_terms)), -1000, 1000);
}

namespace {

// out[i] = (sum_k trunc(g_k[i] c_k)) back for NT terms, element by element
// (the terms' loop unrolled: the element loop vectorizes and the int64 sum
// stays in registers).
template <int NT>
void SumFixed(const float* const* g, const double* c, double back, size_t lo, size_t hi,
              float* out) {
  for (size_t i = lo; i < hi; ++i) {
    int64_t s = 0;
    for (int k = 0; k < NT; ++k) s += int64_t(double(g[k][i]) * c[k]);
    out[i] = float(double(s) * back);
  }
}

// q[i] = sum_k trunc(g_k[i] c_k) for NT terms (the integers MPI sums).
template <int NT>
void SumInts(const float* const* g, const double* c, size_t n, int64_t* q) {
  for (size_t i = 0; i < n; ++i) {
    int64_t s = 0;
    for (int k = 0; k < NT; ++k) s += int64_t(double(g[k][i]) * c[k]);
    q[i] = s;
  }
}

}  // namespace

void ExactSum::SumRange(const std::vector<const float*>& g, const std::vector<double>& w,
                        int shift, double total_weight, size_t lo, size_t hi, float* out) {
  // Every rank converts a term the same way (multiply, truncate toward 0), so
  // the integers, and their sum, do not depend on where the term was computed.
  const size_t nt = g.size();
  std::vector<double> c(nt);
  for (size_t k = 0; k < nt; ++k) c[k] = std::ldexp(w[k], shift);
  const double back = std::ldexp(1.0, -shift) / total_weight;
  switch (nt) {  // one pass over the elements for the usual shard counts
    case 1: return SumFixed<1>(g.data(), c.data(), back, lo, hi, out);
    case 2: return SumFixed<2>(g.data(), c.data(), back, lo, hi, out);
    case 3: return SumFixed<3>(g.data(), c.data(), back, lo, hi, out);
    case 4: return SumFixed<4>(g.data(), c.data(), back, lo, hi, out);
    default: break;
  }
  // More terms: in blocks of int64 accumulators that stay in L1 (the inner
  // loops vectorize; the integer sum does not depend on the order).
  constexpr size_t kBlock = 512;
  int64_t q[kBlock];
  for (size_t b = lo; b < hi; b += kBlock) {
    const size_t m = std::min(kBlock, hi - b);
    std::fill(q, q + m, 0);
    for (size_t k = 0; k < nt; ++k) {
      const float* t = g[k] + b;
      const double ck = c[k];
      for (size_t j = 0; j < m; ++j) q[j] += int64_t(double(t[j]) * ck);
    }
    for (size_t j = 0; j < m; ++j) out[b + j] = float(double(q[j]) * back);
  }
}

Status ExactSum::Reduce(double total_weight, float* out) {
  double m = LocalMax();
  DS_RETURN_IF_ERROR(AllreduceMax(&m, 1));
  return ReduceWithMax(m, total_weight, out);
}

Status ExactSum::ReduceWithMax(double m, double total_weight, float* out,
                               const std::vector<size_t>* slices) {
  // slices: this rank's [lo, hi) of the sum only (MPI_Reduce_scatter), into out[0, hi - lo).
  const size_t lo = slices ? (*slices)[size_t(Rank())] : 0;
  const size_t hi = slices ? (*slices)[size_t(Rank()) + 1] : n_;
  if (!std::isfinite(m)) {
    std::fill(out, out + (hi - lo), std::numeric_limits<float>::quiet_NaN());
    return Status::Ok();
  }
  if (m == 0) {
    std::fill(out, out + (hi - lo), 0.0f);
    return Status::Ok();
  }
  // The integers of SumRange, summed over the ranks.
  const int shift = Shift(m, total_terms_);
  // One pass over the terms per element (the loop is bound by memory).
  q_.resize(n_);
  int64_t* q = q_.data();
  const size_t nt = weights_.size();
  {
    Timed timed(Phase::kFixed);
    std::vector<const float*> g(nt);
    std::vector<double> c(nt);
    for (size_t k = 0; k < nt; ++k) {
      g[k] = terms_[k].data();
      c[k] = std::ldexp(weights_[k], shift);
    }
    if (nt == 0) {
      std::fill(q, q + n_, 0);
    } else if (nt <= 4) {  // one pass over the elements
      constexpr void (*kSum[])(const float* const*, const double*, size_t, int64_t*) = {
          SumInts<1>, SumInts<2>, SumInts<3>, SumInts<4>};
      kSum[nt - 1](g.data(), c.data(), n_, q);
    } else {  // term by term (vectorizes; the integer sum does not depend on the order)
      for (size_t i = 0; i < n_; ++i) q[i] = int64_t(double(g[0][i]) * c[0]);
      for (size_t k = 1; k < nt; ++k) {
        const float* t = g[k];
        const double ck = c[k];
        for (size_t i = 0; i < n_; ++i) q[i] += int64_t(double(t[i]) * ck);
      }
    }
  }
  {
    Timed timed(Phase::kAllreduce);
    if (slices)
      DS_RETURN_IF_ERROR(ReduceScatterSum(q_.data(), *slices));
    else if (NcclComm* nccl = SharedNccl())  // DATASYNTH_NCCL=1 with a GPU per rank
      DS_RETURN_IF_ERROR(nccl->AllreduceSum(q_.data(), n_));
    else
      DS_RETURN_IF_ERROR(AllreduceSum(q_.data(), n_));
  }
  Timed timed(Phase::kFixed);
  const double back = std::ldexp(1.0, -shift) / total_weight;
  for (size_t i = lo; i < hi; ++i) out[i - lo] = float(double(q[i]) * back);
  return Status::Ok();
}

std::unique_ptr<DataParallel> DataParallel::Make(int shards, size_t params) {
  if (!Active()) return nullptr;
  return std::unique_ptr<DataParallel>(new DataParallel(std::max(1, shards), params));
}

void SliceBatch(const Batch& b, int lo, int hi, Batch* out) {
  const size_t t = size_t(b.steps), a = size_t(lo) * t, e = size_t(hi) * t;
  out->batch = hi - lo;
  out->steps = b.steps;
  auto rows = [&](const auto& src, auto* dst) {  // [B, T] arrays; empty stays empty
    if (src.empty())
      dst->clear();
    else
      dst->assign(src.begin() + long(a), src.begin() + long(e));
  };
  rows(b.inputs, &out->inputs);
  rows(b.targets, &out->targets);
  rows(b.weights, &out->weights);
  // Each target's legal ids (the field tokenizer's loss over legal ids):
  // without them a shard's softmax would run over the whole vocabulary.
  rows(b.legal_lo, &out->legal_lo);
  rows(b.legal_hi, &out->legal_hi);
}

// Every shard's statistics on every rank (the others' entries are zeros, so
// the double sum is exact), added in shard order.
Result<StepStats> DataParallel::SumStats(const std::vector<StepStats>& mine,
                                         const std::vector<int>& ids, int count, double* max) {
  // [shard][loss, correct, count], then (max) one slot per rank.
  std::vector<double> all(size_t(count) * 3 + (max ? size_t(Size()) : 0), 0.0);
  if (max) all[size_t(count) * 3 + size_t(Rank())] = *max;
  for (size_t j = 0; j < mine.size(); ++j) {
    all[size_t(ids[j]) * 3] = mine[j].loss_sum;
    all[size_t(ids[j]) * 3 + 1] = mine[j].correct;
    all[size_t(ids[j]) * 3 + 2] = mine[j].count;
  }
  {
    Timed timed(Phase::kWait);  // the first collective after the steps
    DS_RETURN_IF_ERROR(AllreduceSum(all.data(), all.size()));
  }
  if (max)
    *max = *std::max_element(all.begin() + long(count) * 3, all.end());
  StepStats s;
  for (int k = 0; k < count; ++k) {
    s.loss_sum += all[size_t(k) * 3];
    s.correct += all[size_t(k) * 3 + 1];
    s.count += all[size_t(k) * 3 + 2];
  }
  return s;
}

Result<StepStats> DataParallel::Step(TrainBackend& backend, const Batch& global,
                                     uint64_t dropout_seed, const OptimizerConfig& opt,
                                     int64_t step, bool rank0_cancel) {
  DS_RETURN_IF_ERROR(error_);
  if (!node_tried_) {  // collective: every rank's first step
    node_tried_ = true;
    DS_ASSIGN_OR_RETURN(node_, NodeSum::Make(params_, shards_));
    sharded_ = node_ || !SharedNccl();
    for (int r = 0; r <= Size(); ++r) slices_.push_back(SliceBegin(params_, r, Size()));
    grad_.resize(sharded_ ? slices_[size_t(Rank()) + 1] - slices_[size_t(Rank())] : params_);
    if (sharded_ && !node_) weights_.resize(params_);
  }
  const int k_total = std::min(shards_, global.batch);
  sum_.Begin(params_, k_total);
  std::vector<StepStats> mine;
  std::vector<int> ids;
  Batch part;
  auto t0 = Clock::now();
  double cpu0 = CpuNow();
  for (int k = Rank(), j = 0; k < k_total; k += Size(), ++j) {
    const int lo = int(int64_t(global.batch) * k / k_total);
    const int hi = int(int64_t(global.batch) * (k + 1) / k_total);
    SliceBatch(global, lo, hi, &part);
    Timed timed(Phase::kSteps);
    const uint64_t seed = dropout_seed + 0x632be59bd9b4e019ull * uint64_t(k);
    // The gradient straight into shared memory or the sum's term (its weight,
    // the count, is set once the step returned it).
    float* dst = node_ ? node_->Term(j) : sum_.Add(0.0);
    StepStats s = backend.StepInto(part, seed, dst);
    if (node_) {
      timed.Stop();
      node_->SetStats(j, s);
    } else {
      sum_.SetWeight(j, s.count);
    }
    mine.push_back(s);
    ids.push_back(k);
  }
  step_seconds_ += Since(t0);
  const double cpu1 = CpuNow();
  step_cpu_ += cpu1 - cpu0;
  auto c0 = Clock::now();
  StepStats total;
  if (node_) {
    // ZeRO-1: the sum and the optimizer on this rank's slice only, the
    // updated weights gathered through shared memory.
    const size_t lo = slices_[size_t(Rank())], hi = slices_[size_t(Rank()) + 1];
    bool flag = rank0_cancel;
    DS_ASSIGN_OR_RETURN(total, node_->ReduceSlice(k_total, grad_.data(), &flag));
    carried_ = true;
    cancel_ = flag;
    const OptimizerRange range{lo, hi, grad_.data(), node_->Slice()};
    OptimizerConfig sliced = opt;
    sliced.range = &range;
    {
      Timed timed(Phase::kOptimizer);
      backend.ApplyOptimizer(sliced, step);
    }
    DS_ASSIGN_OR_RETURN(const float* weights, node_->Gather());
    Timed timed(Phase::kAllreduce);
    backend.SetParamsExcept(weights, lo, hi);  // its own slice is current
  } else {
    double max;
    {
      Timed timed(Phase::kFixed);
      max = sum_.LocalMax();
    }
    DS_ASSIGN_OR_RETURN(total, SumStats(mine, ids, k_total, &max));
    if (!sharded_) {  // NCCL: the whole sum on every rank, every weight updated
      DS_RETURN_IF_ERROR(sum_.ReduceWithMax(max, std::max(total.count, 1.0), grad_.data()));
      backend.SetGrads(grad_.data());
      Timed timed(Phase::kOptimizer);
      backend.ApplyOptimizer(opt, step);
    } else {  // ZeRO-1 over MPI: reduce-scatter, the slice's update, allgather
      const size_t lo = slices_[size_t(Rank())], hi = slices_[size_t(Rank()) + 1];
      DS_RETURN_IF_ERROR(sum_.ReduceWithMax(max, std::max(total.count, 1.0), grad_.data(), &slices_));
      const OptimizerRange range{lo, hi, grad_.data(), weights_.data() + lo};
      OptimizerConfig sliced = opt;
      sliced.range = &range;
      {
        Timed timed(Phase::kOptimizer);
        backend.ApplyOptimizer(sliced, step);
      }
      Timed timed(Phase::kAllreduce);
      DS_RETURN_IF_ERROR(AllgatherSlices(weights_.data(), slices_));
      backend.SetParamsExcept(weights_.data(), lo, hi);
    }
  }
  comm_seconds_ += Since(c0);
  comm_cpu_ += CpuNow() - cpu1;
  return total;
}

Result<StepStats> DataParallel::DpStep(TrainBackend& backend, std::vector<int64_t> ids,
                                       const DpInputs& in, uint64_t dropout_seed) {
  DS_RETURN_IF_ERROR(error_);
  auto c0 = Clock::now();
  uint64_t n = ids.size();
  DS_RETURN_IF_ERROR(BroadcastValue(&n));
  ids.resize(size_t(n));
  DS_RETURN_IF_ERROR(Broadcast(ids.data(), ids.size() * sizeof(int64_t)));
  comm_seconds_ += Since(c0);
  // As the trainer's DpStep: longest records first, near-equal chunks of at
  // most in.batch_size records (the trainer's chunk capacity), but at least
  // `shards_` chunks to spread.
  const RecordData& recs = *in.records;
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int64_t a, int64_t b) { return recs.length(a) > recs.length(b); });
  const size_t bs = size_t(std::max(1, in.batch_size));
  const size_t chunks = std::min(ids.size(), std::max((ids.size() + bs - 1) / bs, size_t(shards_)));
  PerExampleClip clip;
  clip.l2_norm_clip = in.l2_norm_clip;
  sum_.Begin(params_, int(std::max<size_t>(chunks, 1)));
  std::vector<StepStats> mine;
  std::vector<int> mine_ids;
  Batch batch;
  auto t0 = Clock::now();
  for (size_t k = size_t(Rank()); k < chunks; k += size_t(Size())) {
    const size_t start = ids.size() * k / chunks, end = ids.size() * (k + 1) / chunks;
    recs.FillBatch(ids.data() + start, int(end - start), &batch, RecordData::kDpRowQuantum);
    mine.push_back(backend.Step(batch, /*train=*/true, dropout_seed + start, &clip));
    mine_ids.push_back(int(k));
    backend.GetGrads(sum_.Add(1.0));
  }
  step_seconds_ += Since(t0);
  c0 = Clock::now();
  DS_ASSIGN_OR_RETURN(StepStats total, SumStats(mine, mine_ids, int(chunks)));
  DS_RETURN_IF_ERROR(sum_.Reduce(1.0, grad_.data()));
  // The noise, once: rank 0's stream, as a single process draws it.
  if (Rank() == 0) in.noise->Add(grad_.data(), params_, in.noise_stddev);
  DS_RETURN_IF_ERROR(Broadcast(grad_.data(), params_ * sizeof(float)));
  comm_seconds_ += Since(c0);
  const float inv = float(1.0 / in.expected_batch_size);
  for (float& g : grad_) g *= inv;
  backend.SetGrads(grad_.data());
  return total;
}

bool DataParallel::FillIn(std::vector<StepStats>* per, bool rank0_cancelled) {
  std::vector<double> all(per->size() * 3 + 1);
  all.back() = Rank() == 0 && rank0_cancelled ? 1 : 0;
  for (size_t i = 0; i < per->size(); ++i) {
    all[i * 3] = (*per)[i].loss_sum;
    all[i * 3 + 1] = (*per)[i].correct;
    all[i * 3 + 2] = (*per)[i].count;
  }
  if (Status s = AllreduceSum(all.data(), all.size()); !s.ok() && error_.ok()) error_ = s;
  for (size_t i = 0; i < per->size(); ++i) (*per)[i] = {all[i * 3], all[i * 3 + 1], all[i * 3 + 2]};
  return all.back() > 0;
}

bool DataParallel::Cancel(bool rank0_value) {
  if (!carried_) return Decide(rank0_value);
  carried_ = false;
  return cancel_;
}

Status DataParallel::GatherOptimizerState(std::vector<float>* state) {
  if (!sharded_) return Status::Ok();
  if (state->size() != 2 * params_)
    return DS_ERR(kInternal, "optimizer state of {} floats for {} parameters ({})", state->size(),
                  params_, Where());
  DS_RETURN_IF_ERROR(AllgatherSlices(state->data(), slices_));
  return AllgatherSlices(state->data() + params_, slices_);
}

size_t SliceBegin(size_t n, int r, int ranks) {
  if (r >= ranks) return n;
  return std::min(n, n * size_t(r) / size_t(ranks) / 16 * 16);
}

bool DataParallel::Decide(bool rank0_value) {
  uint8_t v = rank0_value ? 1 : 0;
  Timed timed(Phase::kWait);
  if (Status s = BroadcastValue(&v); !s.ok() && error_.ok()) error_ = s;
  return v != 0;
}

std::string DataParallel::Report() const {
  const double total = step_seconds_ + comm_seconds_;
  const char* path = node_      ? "in shared memory (one host), optimizer sharded over the ranks"
                     : sharded_ ? "by MPI_Reduce_scatter, optimizer sharded over the ranks (MPI_Allgatherv)"
                                : "by MPI_Allreduce";
  return fmt::format(
      "mpi: {} ranks, {} shards per global batch, summed {}; gradient sums took {:.1f}% of the "
      "step time ({:.2f}s of {:.2f}s on rank {}; CPU: shard steps {:.2f}s, sums {:.2f}s)",
      Size(), shards_, path, total > 0 ? 100.0 * comm_seconds_ / total : 0.0, comm_seconds_, total,
      Rank(), step_cpu_, comm_cpu_);
}

// Where the other ranks' scratch model directories go: DATASYNTH_MPI_SCRATCH,
// else /dev/shm (memory: a rank's epoch files would otherwise wait on the
// disk's fsyncs beside rank 0's, for files nobody reads) when it is writable
// with at least 1 GiB free, else $TMPDIR or /tmp.
namespace {
std::string ScratchRoot() {
  if (const char* e = std::getenv("DATASYNTH_MPI_SCRATCH"); e && *e) return e;
  struct statvfs fs;
  if (::access("/dev/shm", W_OK) == 0 && ::statvfs("/dev/shm", &fs) == 0 &&
      double(fs.f_bavail) * double(fs.f_frsize) >= double(1 << 30))
    return "/dev/shm";
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}
}  // namespace

Result<std::string> RankModelDir(const std::string& model_dir, bool resume) {
  if (!Active() || Rank() == 0) return model_dir;
  std::string dir = fmt::format("{}/datasynth-rank{}-{}", ScratchRoot(), Rank(), ::getpid());
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec) return DS_ERR(kIo, "{}: cannot create ({}; {})", dir, ec.message(), Where());
  if (!resume) return dir;
  for (const auto& e : std::filesystem::directory_iterator(model_dir, ec)) {
    if (!e.is_regular_file() || e.path().filename().string()[0] == '.') continue;
    std::filesystem::copy_file(e.path(), dir + "/" + e.path().filename().string(), ec);
    if (ec) break;
  }
  if (ec)
    return DS_ERR(kIo, "{}: cannot copy the checkpoint for --resume on {} ({}); the model "
                  "directory must be readable by every rank",
                  model_dir, Where(), ec.message());
  return dir;
}

Status CheckSame(const std::vector<int64_t>& values, const std::string& what) {
  std::vector<int64_t> root = values;
  DS_RETURN_IF_ERROR(Broadcast(root.data(), root.size() * sizeof(int64_t)));
  bool differ = root != values;
  DS_ASSIGN_OR_RETURN(bool any, Any(differ));
  if (any)
    return DS_ERR(kInternal, "mpirun: the ranks disagree on {}{} (every rank must read the same "
                  "input with the same settings and threads)",
                  what, differ ? fmt::format(" ({} differs from rank 0)", Where()) : "");
  return Status::Ok();
}

}  // namespace ds::dist
