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
// trunc(w_k g_k 2^shift), summed exactly) and writes the float result into its
// segment; after a second barrier every rank copies the whole result. The
// integers are those of the MPI path, so the weights are bitwise the same
// (tests/mpi_train_test.sh compares the two); the conversion work is divided
// by N instead of repeated.
//
// Used when mpirun started more than one rank and MPI_COMM_TYPE_SHARED spans
// them all, unless DATASYNTH_MPI_SHM=0; otherwise (several hosts, NCCL, no MPI
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
  // Collective: the statistics of the step's `shards` shards in shard order,
  // and sum_k count_k g_k / sum_k count_k into out ([params]).
  Result<StepStats> Reduce(int shards, float* out);

 private:
  NodeSum() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds::dist
