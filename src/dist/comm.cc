#include "dist/comm.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>

#ifdef DATASYNTH_HAVE_MPI
#include <mpi.h>
#include <sched.h>
#include <time.h>

#include "dist/mpi_wait.h"
#include "dist/profile.h"
#endif

namespace ds::dist {
namespace {

int g_rank = 0, g_size = 1;
int g_local = 0;  // Local scopes open
bool g_init = false;

// Ranks mpirun (Open MPI) or another PMI launcher asked for; 0 without one.
int EnvSize() {
  for (const char* k : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* v = std::getenv(k)) return std::max(1, std::atoi(v));
  return 0;
}

#ifdef DATASYNTH_HAVE_MPI
constexpr size_t kChunk = size_t(1) << 28;  // elements per MPI call (counts are int)

constexpr size_t kSmall = 4096;  // bytes: waited for with Wait (mpi_wait.h)

Status Check(int rc, const char* call) { return CheckMpi(rc, call); }

template <typename T>
Status Allreduce(T* data, size_t n, MPI_Datatype type, MPI_Op op, const char* call) {
  if (!Active()) return Status::Ok();
  if (n * sizeof(T) <= kSmall) {  // the per-step statistics: a wait, not a transfer
    MPI_Request req;
    DS_RETURN_IF_ERROR(
        Check(MPI_Iallreduce(MPI_IN_PLACE, data, int(n), type, op, MPI_COMM_WORLD, &req), call));
    return Wait(&req, call);
  }
  for (size_t i = 0; i < n; i += kChunk)
    DS_RETURN_IF_ERROR(Check(MPI_Allreduce(MPI_IN_PLACE, data + i, int(std::min(kChunk, n - i)),
                                           type, op, MPI_COMM_WORLD),
                             call));
  return Status::Ok();
}
#endif

}  // namespace

#ifdef DATASYNTH_HAVE_MPI
Status CheckMpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return DS_ERR(kInternal, "{} failed on {}: {}", call, Where(), std::string(text, size_t(len)));
}

Status Wait(MPI_Request* req, const char* call) {
  Status st;
  WaitUntil([&] {
    int done = 0;
    st = CheckMpi(MPI_Test(req, &done, MPI_STATUS_IGNORE), call);
    return done != 0 || !st.ok();
  });
  return st;
}
#endif

void Init() {
#ifdef DATASYNTH_HAVE_MPI
  if (g_init || EnvSize() == 0) return;
  // A rank waiting for another yields its core (sched_yield in Open MPI's
  // progress loop) instead of spinning: on a machine with more processes
  // than cores the spinning would take the core from the rank it waits for
  // (docs/scale.md). The user's setting (environment, mpirun --mca) wins.
  ::setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
  // Every rank on this host (mpirun's local size is the world's): Open MPI's
  // ob1 over shared memory, without probing for UCX's network devices (about
  // 0.25 s of MPI_Init's wall time per run here, docs/scale.md). Ranks on
  // several hosts keep Open MPI's choice (UCX on InfiniBand); again the
  // user's setting wins.
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (local && std::atoi(local) == EnvSize()) ::setenv("OMPI_MCA_pml", "ob1", /*overwrite=*/0);
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return;
  g_init = true;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
#endif
}

int Finish(int rc) {
#ifdef DATASYNTH_HAVE_MPI
  if (g_init) {
    if (rc != 0) {
      std::fflush(nullptr);
      ::_exit(rc);  // the others may wait in a collective call: mpirun stops them
    }
    MPI_Finalize();
    g_init = false;
  }
#endif
  return rc;
}

int Rank() { return g_rank; }
int Size() { return g_size; }
bool Active() { return g_init && g_local == 0; }

Status CheckLaunch() {
#ifndef DATASYNTH_HAVE_MPI
  if (EnvSize() > 1)
    return DS_ERR(kUnavailable,
                  "started by mpirun with {} ranks, but this build of datasynth has no MPI "
                  "(install libopenmpi-dev and rebuild; docs/scale.md)",
                  EnvSize());
#else
  if (EnvSize() > 1 && !g_init)
    return DS_ERR(kUnavailable, "started by mpirun with {} ranks, but MPI_Init failed",
                  EnvSize());
#endif
  return Status::Ok();
}

std::string Where() { return fmt::format("rank {} of {}", g_rank, g_size); }

Local::Local() : saved_(g_local) { ++g_local; }
Local::~Local() { g_local = saved_; }

Status Barrier() {
#ifdef DATASYNTH_HAVE_MPI
  if (Active()) return Check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
#endif
  return Status::Ok();
}

Status Broadcast(void* data, size_t bytes, int root) {
#ifdef DATASYNTH_HAVE_MPI
  if (!Active()) return Status::Ok();
  char* p = static_cast<char*>(data);
  if (bytes <= kSmall) {  // rank 0's per-step decisions
    MPI_Request req;
    DS_RETURN_IF_ERROR(
        Check(MPI_Ibcast(p, int(bytes), MPI_BYTE, root, MPI_COMM_WORLD, &req), "MPI_Ibcast"));
    return Wait(&req, "MPI_Ibcast");
  }
  for (size_t i = 0; i < bytes; i += kChunk)
    DS_RETURN_IF_ERROR(Check(
        MPI_Bcast(p + i, int(std::min(kChunk, bytes - i)), MPI_BYTE, root, MPI_COMM_WORLD),
        "MPI_Bcast"));
#endif
  return Status::Ok();
}

Status BroadcastString(std::string* s, int root) {
  uint64_t n = s->size();
  DS_RETURN_IF_ERROR(BroadcastValue(&n, root));
  s->resize(size_t(n));
  return Broadcast(s->data(), size_t(n), root);
}

Result<bool> Any(bool flag) {
  int64_t v = flag ? 1 : 0;
  DS_RETURN_IF_ERROR(AllreduceSum(&v, 1));
  return v > 0;
}

Status AllreduceSum(int64_t* data, size_t n) {
#ifdef DATASYNTH_HAVE_MPI
  return Allreduce(data, n, MPI_INT64_T, MPI_SUM, "MPI_Allreduce(sum)");
#else
  return Status::Ok();
#endif
}

Status AllreduceSum(double* data, size_t n) {
#ifdef DATASYNTH_HAVE_MPI
  return Allreduce(data, n, MPI_DOUBLE, MPI_SUM, "MPI_Allreduce(sum)");
#else
  return Status::Ok();
#endif
}

Status AllreduceMax(double* data, size_t n) {
#ifdef DATASYNTH_HAVE_MPI
  return Allreduce(data, n, MPI_DOUBLE, MPI_MAX, "MPI_Allreduce(max)");
#else
  return Status::Ok();
#endif
}

Status ReduceScatterSum(int64_t* data, const std::vector<size_t>& begin) {
#ifdef DATASYNTH_HAVE_MPI
  if (!Active()) return Status::Ok();
  if (begin.size() != size_t(Size()) + 1 || begin.back() > size_t(INT_MAX))
    return DS_ERR(kInternal, "ReduceScatterSum: {} offsets for {} ranks, {} elements",
                  begin.size(), Size(), begin.empty() ? 0 : begin.back());
  const size_t ranks = begin.size() - 1, lo = begin[size_t(Rank())];
  std::vector<int> count(ranks);
  for (size_t r = 0; r < ranks; ++r) count[r] = int(begin[r + 1] - begin[r]);
  std::vector<int64_t> mine(static_cast<size_t>(count[size_t(Rank())]));
  DS_RETURN_IF_ERROR(Check(MPI_Reduce_scatter(data, mine.data(), count.data(), MPI_INT64_T,
                                              MPI_SUM, MPI_COMM_WORLD),
                           "MPI_Reduce_scatter"));
  std::copy(mine.begin(), mine.end(), data + lo);
#else
  (void)data;
  (void)begin;
#endif
  return Status::Ok();
}

Status AllgatherSlices(float* data, const std::vector<size_t>& begin) {
#ifdef DATASYNTH_HAVE_MPI
  if (!Active()) return Status::Ok();
  if (begin.size() != size_t(Size()) + 1 || begin.back() > size_t(INT_MAX))
    return DS_ERR(kInternal, "AllgatherSlices: {} offsets for {} ranks, {} elements", begin.size(),
                  Size(), begin.empty() ? 0 : begin.back());
  const size_t ranks = begin.size() - 1;
  std::vector<int> count(ranks), at(ranks);
  for (size_t r = 0; r < count.size(); ++r) {
    at[r] = int(begin[r]);
    count[r] = int(begin[r + 1] - begin[r]);
  }
  return Check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, count.data(), at.data(),
                              MPI_FLOAT, MPI_COMM_WORLD),
               "MPI_Allgatherv");
#else
  (void)data;
  (void)begin;
  return Status::Ok();
#endif
}

Status SendString(const std::string& s, int to, int tag) {
#ifdef DATASYNTH_HAVE_MPI
  if (s.size() > size_t(INT_MAX))
    return DS_ERR(kResourceExhausted, "message of {} bytes is too large", s.size());
  return Check(MPI_Send(s.data(), int(s.size()), MPI_BYTE, to, tag, MPI_COMM_WORLD), "MPI_Send");
#else
  return DS_ERR(kUnavailable, "this build of datasynth has no MPI");
#endif
}

Status RecvString(std::string* s, int from, int tag) {
#ifdef DATASYNTH_HAVE_MPI
  MPI_Status st;
  DS_RETURN_IF_ERROR(Check(MPI_Probe(from, tag, MPI_COMM_WORLD, &st), "MPI_Probe"));
  int n = 0;
  MPI_Get_count(&st, MPI_BYTE, &n);
  s->resize(size_t(n));
  return Check(MPI_Recv(s->data(), n, MPI_BYTE, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
               "MPI_Recv");
#else
  return DS_ERR(kUnavailable, "this build of datasynth has no MPI");
#endif
}

Result<bool> Probe(int from, int tag) {
#ifdef DATASYNTH_HAVE_MPI
  int flag = 0;
  DS_RETURN_IF_ERROR(
      Check(MPI_Iprobe(from, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE), "MPI_Iprobe"));
  return flag != 0;
#else
  return false;
#endif
}

}  // namespace ds::dist
