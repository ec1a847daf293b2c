// The exact gradient sum through shared memory, for ranks on one host
// (docs/scale.md "One host: the sum in shared memory").
//
// ExactSum over MPI takes three collectives per step on this path (the
// statistics with the scale, the int64 allreduce in MPI's fragments) and
// copies every term twice. When every rank is on the same host, NodeSum
// instead gives each rank a segment of one MPI shared-memory window: the
// backend writes its shards' gradients there directly, the statistics and the
// local max beside them; after one barrier every rank converts ITS slice of
// the elements of ALL shards to fixed point (the same integers as ExactSum:
// trunc(w_k g_k 2^shift), summed exactly), applies the optimizer to that slice
// only (ZeRO-1: DataParallel::Step) and writes the updated weights into its
// part of a second, contiguous shared buffer; after a second barrier every
// rank copies the whole weights. The integers are those of the MPI path and
// the optimizers are elementwise, so the weights are bitwise the same
// (tests/mpi_train_test.sh compares the two); the conversion and the
// optimizer work are divided by N instead of repeated.
//
// Used when mpirun started the ranks (one included: `mpirun -n 1` then runs
// the code of N ranks, without the MPI path's int64 buffer and copies) and
// MPI_COMM_TYPE_SHARED spans them all, unless DATASYNTH_MPI_SHM=0; otherwise (several hosts, NCCL, no MPI
// in the build) Make returns nullptr and ExactSum's allreduce is used.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "util/status.h"

namespace ds::dist {

class NodeSum {
 public:
  // Collective over the world. `shards`: the most shards a step has.
  static Result<std::unique_ptr<NodeSum>> Make(size_t params, int shards);
  ~NodeSum();
  NodeSum(const NodeSum&) = delete;
  NodeSum& operator=(const NodeSum&) = delete;

  // This rank's j-th shard of the step (shard Rank() + j Size()): its
  // gradient buffer ([params] floats, shared) and its statistics.
  float* Term(int j);
  void SetStats(int j, const StepStats& s);
  // Collective (the first barrier): the statistics of the step's `shards`
  // shards in shard order, and this rank's slice [lo, hi) (SliceBegin) of
  // sum_k count_k g_k / sum_k count_k into grad ([hi - lo]). `flag`: rank 0's
  // value on every rank (its Ctrl-C, carried in its header).
  Result<StepStats> ReduceSlice(int shards, float* grad, bool* flag);
  // This rank's slice of the shared parameter buffer ([hi - lo]): where the
  // sharded optimizer writes the updated weights.
  float* Slice();
  // Collective (the second barrier): every rank's slice written; the whole
  // parameter buffer ([params], shared; read it before the next step's
  // ReduceSlice).
  Result<const float*> Gather();

 private:
  NodeSum() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds::dist
