#include "dist/node_sum.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "dist/comm.h"
#include "dist/data_parallel.h"
#include "dist/nccl.h"
#include "dist/profile.h"

#ifdef DATASYNTH_HAVE_MPI
#include <linux/futex.h>
#include <mpi.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstdint>

#include "dist/mpi_wait.h"
#endif

namespace ds::dist {

#ifdef DATASYNTH_HAVE_MPI
namespace {

Status Check(int rc, const char* call) { return CheckMpi(rc, call); }

}  // namespace

// A rank's segment: [header: per local shard {loss, correct, count, max},
// then rank 0's flag, the rank's barrier count][its shards' gradients: terms
// x params floats]. The weights are a second window, contiguous over the
// ranks: rank r holds [SliceBegin(r), SliceBegin(r + 1)).
struct NodeSum::Impl {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Win win = MPI_WIN_NULL, pwin = MPI_WIN_NULL;
  size_t params = 0, terms = 0, header = 0;  // header in doubles
  uint32_t passed = 0;                       // barriers passed (Sync)
  bool locked = false, plocked = false;
  std::vector<char*> seg;                    // every rank's segment
  float* weights = nullptr;                  // [params], shared
  std::vector<size_t> begin;                 // SliceBegin of every rank, and params

  double* Header(int rank) const { return reinterpret_cast<double*>(seg[size_t(rank)]); }
  float* TermOf(int rank, size_t j) const {
    return reinterpret_cast<float*>(seg[size_t(rank)] + header * sizeof(double)) + j * params;
  }
  // Every rank's writes before it visible to every rank after it: a barrier
  // on counters in the segments' headers. Each rank stores its count with
  // release order and wakes whoever sleeps on it (a futex on the shared
  // page); it waits for the others' counts with acquire order, spinning 20 us
  // (balanced ranks on idle cores), then asleep in the kernel until woken (a
  // 1 ms timeout as a safety net). An MPI_Ibarrier polled through MPI's
  // progress engine burned CPU for every poll while the other rank was
  // descheduled (docs/scale.md). A rank that fails ends the job (mpirun stops
  // the others), so no rank is left waiting here.
  uint32_t* Counter(int rank) const {
    return reinterpret_cast<uint32_t*>(Header(rank) + 4 * terms + 1);
  }
  Status Sync() {
    ++passed;
    uint32_t* mine = Counter(Rank());
    std::atomic_ref<uint32_t>(*mine).store(passed, std::memory_order_release);
    ::syscall(SYS_futex, mine, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
    for (int r = 0; r < Size(); ++r) {
      if (r == Rank()) continue;
      uint32_t* word = Counter(r);
      std::atomic_ref<uint32_t> other(*word);
      auto arrived = [&](uint32_t v) { return int32_t(v - passed) >= 0; };  // wraps safely
      const double t0 = WallNow();
      for (;;) {
        const uint32_t v = other.load(std::memory_order_acquire);
        if (arrived(v)) break;
        if (WallNow() - t0 < 2e-5) continue;
        timespec ts{0, 1000000};
        ::syscall(SYS_futex, word, FUTEX_WAIT, v, &ts, nullptr, 0);  // returns once it changed
      }
    }
    return Status::Ok();
  }
  // The weights window; false (on every rank) where shared memory is short.
  Result<bool> AllocateWeights() {
    begin.resize(size_t(Size()) + 1);
    for (int r = 0; r <= Size(); ++r) begin[size_t(r)] = SliceBegin(params, r, Size());
    const size_t mine = begin[size_t(Rank()) + 1] - begin[size_t(Rank())];
    void* base = nullptr;
    const int rc = MPI_Win_allocate_shared(MPI_Aint(mine * sizeof(float)), sizeof(float),
                                           MPI_INFO_NULL, node, &base, &pwin);
    DS_ASSIGN_OR_RETURN(bool failed, Any(rc != MPI_SUCCESS));
    if (failed) {
      if (rc != MPI_SUCCESS) pwin = MPI_WIN_NULL;
      return false;
    }
    MPI_Win_set_errhandler(pwin, MPI_ERRORS_RETURN);
    DS_RETURN_IF_ERROR(Check(MPI_Win_lock_all(MPI_MODE_NOCHECK, pwin), "MPI_Win_lock_all"));
    plocked = true;
    MPI_Aint size = 0;
    int unit = 0;
    void* p0 = nullptr;
    DS_RETURN_IF_ERROR(Check(MPI_Win_shared_query(pwin, 0, &size, &unit, &p0), "MPI_Win_shared_query"));
    weights = static_cast<float*>(p0);
    // Contiguous by default (MPI 3: rank r's memory follows rank r - 1's);
    // checked, so that the weights are one [params] buffer.
    bool apart = false;
    for (int r = 1; r < Size(); ++r) {
      void* p = nullptr;
      DS_RETURN_IF_ERROR(Check(MPI_Win_shared_query(pwin, r, &size, &unit, &p), "MPI_Win_shared_query"));
      apart |= size > 0 && static_cast<float*>(p) != weights + begin[size_t(r)];
    }
    DS_ASSIGN_OR_RETURN(bool any_apart, Any(apart));
    return !any_apart;
  }
};

Result<std::unique_ptr<NodeSum>> NodeSum::Make(size_t params, int shards) {
  if (!Active() || SharedNccl()) return std::unique_ptr<NodeSum>();
  if (const char* e = std::getenv("DATASYNTH_MPI_SHM"); e && std::string(e) == "0")
    return std::unique_ptr<NodeSum>();
  std::unique_ptr<NodeSum> ns(new NodeSum);
  auto& m = *(ns->impl_ = std::make_unique<Impl>());
  DS_RETURN_IF_ERROR(Check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, Rank(),
                                               MPI_INFO_NULL, &m.node),
                           "MPI_Comm_split_type"));
  int node_size = 0;
  MPI_Comm_size(m.node, &node_size);
  // Several hosts: every rank learns it (the same answer everywhere).
  DS_ASSIGN_OR_RETURN(bool split, Any(node_size != Size()));
  if (split) return std::unique_ptr<NodeSum>();
  m.params = params;
  m.terms = size_t((std::max(1, shards) + Size() - 1) / Size());
  m.header = (4 * m.terms + 2 + 7) / 8 * 8;  // 64-byte aligned gradients
  const size_t bytes = m.header * sizeof(double) + m.terms * params * sizeof(float);
  void* base = nullptr;
  const int rc = MPI_Win_allocate_shared(MPI_Aint(bytes), 1, MPI_INFO_NULL, m.node, &base, &m.win);
  // No shared memory for it on some rank (a small /dev/shm or session
  // directory): all ranks keep the allreduce.
  DS_ASSIGN_OR_RETURN(bool failed, Any(rc != MPI_SUCCESS));
  if (failed) {
    if (rc != MPI_SUCCESS) m.win = MPI_WIN_NULL;
    return std::unique_ptr<NodeSum>();
  }
  MPI_Win_set_errhandler(m.win, MPI_ERRORS_RETURN);
  DS_RETURN_IF_ERROR(Check(MPI_Win_lock_all(MPI_MODE_NOCHECK, m.win), "MPI_Win_lock_all"));
  m.locked = true;
  m.seg.resize(size_t(Size()));
  for (int r = 0; r < Size(); ++r) {
    MPI_Aint size = 0;
    int unit = 0;
    void* p = nullptr;
    DS_RETURN_IF_ERROR(Check(MPI_Win_shared_query(m.win, r, &size, &unit, &p), "MPI_Win_shared_query"));
    m.seg[size_t(r)] = static_cast<char*>(p);
  }
  DS_ASSIGN_OR_RETURN(bool weights, m.AllocateWeights());
  if (!weights) return std::unique_ptr<NodeSum>();
  // The barrier counts start at 0 on every rank before any rank's first Sync.
  std::atomic_ref<uint32_t>(*m.Counter(Rank())).store(0, std::memory_order_release);
  DS_RETURN_IF_ERROR(Check(MPI_Win_sync(m.win), "MPI_Win_sync"));
  DS_RETURN_IF_ERROR(Check(MPI_Barrier(m.node), "MPI_Barrier"));
  return ns;
}

NodeSum::~NodeSum() {
  if (!impl_) return;
  for (auto [w, locked] : {std::pair{&impl_->win, impl_->locked}, {&impl_->pwin, impl_->plocked}}) {
    if (*w == MPI_WIN_NULL) continue;
    if (locked) MPI_Win_unlock_all(*w);
    MPI_Win_free(w);
  }
  if (impl_->node != MPI_COMM_NULL) MPI_Comm_free(&impl_->node);
}

float* NodeSum::Term(int j) { return impl_->TermOf(Rank(), size_t(j)); }

void NodeSum::SetStats(int j, const StepStats& s) {
  double* h = impl_->Header(Rank()) + 4 * size_t(j);
  h[0] = s.loss_sum;
  h[1] = s.correct;
  h[2] = s.count;
  Timed timed(Phase::kFixed);
  h[3] = ExactSum::MaxOf(Term(j), impl_->params, s.count);
}

Result<StepStats> NodeSum::ReduceSlice(int shards, float* grad, bool* flag) {
  Impl& m = *impl_;
  if (Rank() == 0) m.Header(0)[4 * m.terms] = *flag ? 1 : 0;
  {
    Timed timed(Phase::kWait);
    DS_RETURN_IF_ERROR(m.Sync());
  }
  *flag = m.Header(0)[4 * m.terms] != 0;
  // Shard k is rank k % N's term k / N.
  StepStats total;
  double max = 0;
  std::vector<const float*> g(static_cast<size_t>(shards));
  std::vector<double> w(static_cast<size_t>(shards));
  for (int k = 0; k < shards; ++k) {
    const double* h = m.Header(k % Size()) + 4 * size_t(k / Size());
    total.loss_sum += h[0];
    total.correct += h[1];
    total.count += h[2];
    max = std::max(max, h[3]);
    g[size_t(k)] = m.TermOf(k % Size(), size_t(k / Size()));
    w[size_t(k)] = h[2];
  }
  const size_t lo = m.begin[size_t(Rank())], hi = m.begin[size_t(Rank()) + 1];
  Timed timed(Phase::kFixed);
  if (!std::isfinite(max)) {
    std::fill(grad, grad + (hi - lo), std::numeric_limits<float>::quiet_NaN());
  } else if (max == 0) {
    std::fill(grad, grad + (hi - lo), 0.0f);
  } else {
    // The slice of every term: SumRange into grad[0, hi - lo).
    for (auto& p : g) p += lo;
    ExactSum::SumRange(g, w, ExactSum::Shift(max, shards), std::max(total.count, 1.0), 0, hi - lo,
                       grad);
  }
  return total;
}

float* NodeSum::Slice() { return impl_->weights + impl_->begin[size_t(Rank())]; }

Result<const float*> NodeSum::Gather() {
  Timed timed(Phase::kAllreduce);
  DS_RETURN_IF_ERROR(impl_->Sync());
  return static_cast<const float*>(impl_->weights);
}

#else

struct NodeSum::Impl {};
Result<std::unique_ptr<NodeSum>> NodeSum::Make(size_t, int) { return std::unique_ptr<NodeSum>(); }
NodeSum::~NodeSum() = default;
float* NodeSum::Term(int) { return nullptr; }
void NodeSum::SetStats(int, const StepStats&) {}
Result<StepStats> NodeSum::ReduceSlice(int, float*, bool*) { return DS_ERR(kUnavailable, "no MPI"); }
float* NodeSum::Slice() { return nullptr; }
Result<const float*> NodeSum::Gather() { return DS_ERR(kUnavailable, "no MPI"); }

#endif

}  // namespace ds::dist
