// Data-parallel runs over MPI (Open MPI from Debian; docs/scale.md).
//
// `mpirun -n N datasynth train|generate|synthesize ...` starts N processes
// ("ranks"). src/dist is the only code that talks to MPI: the trainer, the
// generator and tabular training call these functions at a few hook points
// and never include <mpi.h>.
//
//   Init()         in main(): MPI_Init_thread (FUNNELED: MPI calls come from
//                  the main thread only) when launched by mpirun; a no-op
//                  otherwise. Waiting ranks yield their core
//                  (mpi_yield_when_idle 1 unless the user set it).
//   Finish(rc)     at the end of main(): MPI_Finalize after a success; after
//                  a failure the process ends at once (_exit), so that mpirun
//                  stops the other ranks instead of every rank waiting in a
//                  collective call for the one that failed.
//   Rank(), Size() 0 and 1 without mpirun.
//   Active()       started by mpirun (any -n, 1 included) and not inside a
//                  Local scope: the trainer spreads its steps only then, so
//                  that -n 1, 2, 3 ... give the same weights; generation
//                  spreads when Size() > 1. Without mpirun nothing changes.
//
// The collectives (Barrier to AllreduceMax) are no-ops unless Active();
// SendString / RecvString / Probe always talk to the other ranks.
//
// Collectives return a Status (kInternal naming the MPI call) instead of
// aborting: MPI_ERRORS_RETURN is set on the world communicator. Buffers are
// host memory.
//
// Without MPI in the build (DATASYNTH_HAVE_MPI undefined: CMake found none),
// Size() is 1; a run that mpirun started with -n > 1 is refused by
// CheckLaunch() (every rank would otherwise train the whole model into the
// same directory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace ds::dist {

void Init();
int Finish(int rc);

int Rank();
int Size();
bool Active();
// kUnavailable when mpirun started several ranks of a build without MPI.
Status CheckLaunch();
// "rank 1 of 3" (for messages).
std::string Where();

// Within its lifetime Active() is false in this process: tabular batch models
// train as independent single-process runs on the rank that owns them.
class Local {
 public:
  Local();
  ~Local();
  Local(const Local&) = delete;
  Local& operator=(const Local&) = delete;

 private:
  int saved_;
};

Status Barrier();
// root's `bytes` bytes at `data` to every rank.
Status Broadcast(void* data, size_t bytes, int root = 0);
Status BroadcastString(std::string* s, int root = 0);
template <typename T>
Status BroadcastValue(T* v, int root = 0) {
  return Broadcast(v, sizeof(T), root);
}
// Every rank's flag; true on all ranks when it is true on any.
Result<bool> Any(bool flag);
// Element-wise sums over the ranks, in place. Integer sums are exact (the
// result does not depend on the order MPI adds in). The double sum is exact
// where at most one rank holds a non-zero value per element (x + 0 = x).
Status AllreduceSum(int64_t* data, size_t n);
Status AllreduceSum(double* data, size_t n);
Status AllreduceMax(double* data, size_t n);
// In place: the sum over the ranks of data[begin[r], begin[r + 1]) into
// this rank r's elements of `data` (the others keep this rank's values).
Status ReduceScatterSum(int64_t* data, const std::vector<size_t>& begin);
// In place: rank r's elements [begin[r], begin[r + 1]) of `data` to every
// rank (begin: Size() + 1 offsets, ascending; at most INT_MAX elements in all).
Status AllgatherSlices(float* data, const std::vector<size_t>& begin);
// Point to point (tabular batch jobs), strings of any length.
Status SendString(const std::string& s, int to, int tag);
Status RecvString(std::string* s, int from, int tag);
// A message from `from` with `tag` is waiting (non-blocking).
Result<bool> Probe(int from, int tag);

}  // namespace ds::dist
