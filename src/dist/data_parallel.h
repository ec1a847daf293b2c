// Data-parallel training over MPI ranks (trainer hooks; docs/scale.md).
//
// Every rank holds the whole model and the whole data set and runs the same
// steps; batch_size is the GLOBAL batch. Each global batch is cut into K fixed
// shards (config key mpi_shards, at most one per sequence); rank r computes
// the gradients of shards r, r + N, ... and the shards' gradients are summed
// EXACTLY (ExactSum: fixed point, integer sums), and the update is the same
// for every N <= K. The optimizer is sharded (ZeRO-1): rank r updates its
// slice of the weights from its slice of the sum and the weights are
// gathered (Step); elementwise optimizers make this the whole update bit for
// bit: the weights are bitwise equal for 1, 2, 3, 4 ... ranks (they differ from a run
// without mpirun, which takes the whole batch in one backend step: within
// float rounding). The step statistics (loss, accuracy) are summed shard by
// shard in shard order on every rank, so they do not depend on N either.
//
// DP-SGD: rank 0 draws the Poisson sample (its secure noise stream, exactly
// as a single process would) and broadcasts the sampled record ids; the
// records are cut into chunks as the trainer does (at least K of them); the
// clipped per-record gradient sums of the chunks are summed exactly; rank 0
// adds the Gaussian noise once and broadcasts the noisy sum. The accountant
// counts the global batch (the trainer's, unchanged).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "dist/comm.h"
#include "dist/node_sum.h"
#include "util/status.h"

namespace ds {
class RecordData;
class SecureGaussian;
}  // namespace ds

namespace ds::dist {

// Exact, order-independent sum of weighted float vectors spread over ranks:
// sum_k w_k g_k / total_weight. Each term is rounded once to a 64-bit fixed
// point number whose scale comes from the largest |w_k g_k| over all ranks
// (one MPI_Allreduce(max)); the integers are summed with MPI_Allreduce (exact,
// in any order) and converted back. Relative to the largest term the result is
// exact to 2^-(62 - log2 K) (each term is truncated the same way wherever it
// is computed: deterministic, not rounded to nearest); any non-finite term
// makes the whole result NaN
// (the trainer then reports divergence).
class ExactSum {
 public:
  void Begin(size_t n, int total_terms);
  // One term held by this rank: copied, or written into the returned buffer
  // ([n] floats, valid until the next Begin).
  void Add(const float* g, double weight);
  float* Add(double weight);
  // The weight of this step's term j (for a term added before its weight was known).
  void SetWeight(size_t j, double weight) { weights_.at(j) = weight; }
  // Collective: every rank calls it with the same total_weight.
  Status Reduce(double total_weight, float* out);
  // Reduce in two halves, for a caller that carries the scale in a collective
  // of its own (DataParallel: with the step statistics, one collective less
  // per step): this rank's max |w g| (infinity where a term is not finite),
  // then the sum given the max over all ranks.
  // With `slices` (Size() + 1 offsets, SliceBegin): only this rank's slice
  // [lo, hi) of the sum, into out[0, hi - lo), by MPI_Reduce_scatter.
  double LocalMax() const;
  Status ReduceWithMax(double global_max, double total_weight, float* out,
                       const std::vector<size_t>* slices = nullptr);

  // The pieces, shared with NodeSum (node_sum.h): max |w g| over terms
  // (infinity where one is not finite); the scale exponent for a global max
  // and K terms; elements [lo, hi) of sum_k trunc(w_k 2^shift g_k[i]) / 2^shift
  // / total_weight into out[lo, hi).
  static double MaxOf(const float* g, size_t n, double weight);
  static int Shift(double global_max, int total_terms);
  static void SumRange(const std::vector<const float*>& g, const std::vector<double>& w,
                       int shift, double total_weight, size_t lo, size_t hi, float* out);

 private:
  size_t n_ = 0;
  int total_terms_ = 1;
  std::vector<std::vector<float>> terms_;
  std::vector<double> weights_;
  std::vector<int64_t> q_;
};

class DataParallel {
 public:
  // nullptr unless Active() (mpirun with more than one rank).
  static std::unique_ptr<DataParallel> Make(int shards, size_t params);

  // A training step over the global batch and the optimizer update: this
  // rank's shards through the backend, the exact sum of all shards'
  // gradients, then `opt` at `step` (ApplyOptimizer), the global statistics
  // returned. The optimizer is sharded (ZeRO-1): each rank updates its slice
  // (SliceBegin) and the weights are gathered, through shared memory on one
  // host (NodeSum), else by MPI_Reduce_scatter of the sum and MPI_Allgatherv
  // of the weights; with NCCL every rank updates every weight. Either way
  // the backend holds the same weights on every rank. `rank0_cancel`: rank 0's
  // Ctrl-C, carried to the next Cancel() on the shared-memory path.
  Result<StepStats> Step(TrainBackend& backend, const Batch& global, uint64_t dropout_seed,
                         const OptimizerConfig& opt, int64_t step, bool rank0_cancel);
  // Rank 0's Ctrl-C on every rank: the value the last Step carried (once),
  // else one broadcast (Decide).
  bool Cancel(bool rank0_value);
  // Collective: where the optimizer is sharded, every rank's slices of the
  // state ([m, v]: 2 x params, the backends' layout) gathered into `state`,
  // so that a checkpoint holds the whole state; a no-op otherwise.
  Status GatherOptimizerState(std::vector<float>* state);

  // The DP-SGD step after rank 0 drew `ids` (the other ranks' ids are
  // replaced by rank 0's): the noisy mean clipped gradient left in the
  // backend's grads, as the trainer's DpStep computes it.
  struct DpInputs {
    const RecordData* records = nullptr;
    float l2_norm_clip = 1;
    SecureGaussian* noise = nullptr;  // rank 0's is used
    double noise_stddev = 0, expected_batch_size = 1;
    int batch_size = 1;
  };
  Result<StepStats> DpStep(TrainBackend& backend, std::vector<int64_t> ids, const DpInputs& in,
                           uint64_t dropout_seed);

  // Validation batches spread over the ranks: batch b is rank b % N's.
  bool Owns(int64_t b) const { return b % Size() == Rank(); }
  // Collective: fills in the entries of the other ranks' batches (this
  // rank's others are zero), exactly; true on every rank when rank 0 was
  // interrupted (rank0_cancelled there: one collective per validation).
  bool FillIn(std::vector<StepStats>* per, bool rank0_cancelled);

  // rank 0's decision (time budget, Ctrl-C) on every rank. An MPI failure
  // is kept and returned by the next Step / DpStep.
  bool Decide(bool rank0_value);
  // One line for the log: ranks, shards, the share of the step time spent
  // summing gradients.
  std::string Report() const;

  double comm_seconds() const { return comm_seconds_; }
  double step_seconds() const { return step_seconds_; }
  int shards() const { return shards_; }

 private:
  DataParallel(int shards, size_t params) : shards_(shards), params_(params), grad_(params) {}
  // The shards' statistics in shard order, and (with_max) the max over the
  // ranks of ExactSum::LocalMax, in one collective.
  Result<StepStats> SumStats(const std::vector<StepStats>& mine, const std::vector<int>& ids,
                             int count, double* max = nullptr);

  int shards_;
  size_t params_;
  // The optimizer is sharded on every path but NCCL's: rank r updates
  // [slices_[r], slices_[r + 1]).
  bool sharded_ = false;
  std::vector<size_t> slices_;
  std::vector<float> grad_;     // the sum, or this rank's slice of it (sharded)
  std::vector<float> weights_;  // sharded over MPI: the gathered weights
  bool carried_ = false, cancel_ = false;  // rank 0's Ctrl-C from the last Step
  ExactSum sum_;
  std::unique_ptr<NodeSum> node_;  // all ranks on one host (node_sum.h)
  bool node_tried_ = false;
  double comm_seconds_ = 0, step_seconds_ = 0;  // wall
  double comm_cpu_ = 0, step_cpu_ = 0;          // CPU time of this process
  Status error_;
};

// The model directory of this rank's training run: rank 0 trains into
// `model_dir`; every other rank into a private scratch directory that only
// keeps its own run going (removed afterwards), with a copy of model_dir's
// files when resuming (the model directory must be readable by every rank).
// The scratch directories are under DATASYNTH_MPI_SCRATCH, else /dev/shm
// (1 GiB free), else $TMPDIR or /tmp.
Result<std::string> RankModelDir(const std::string& model_dir, bool resume);

// kInternal naming `what` unless every rank holds the same values (the
// network, the data's steps per epoch and the initial weights' checksum).
Status CheckSame(const std::vector<int64_t>& values, const std::string& what);

// The first parameter of rank r's slice of n (r = ranks: n): about n / ranks
// each, starting on multiples of 16 floats (a cache line).
size_t SliceBegin(size_t n, int r, int ranks);

// Rows [lo, hi) of a batch (every [B, T] array: inputs, targets, weights, legal ids).
void SliceBatch(const Batch& b, int lo, int hi, Batch* out);

}  // namespace ds::dist
