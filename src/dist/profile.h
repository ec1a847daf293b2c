// Where a rank's time goes (docs/scale.md "Where the time goes"): wall and
// CPU seconds per phase of a training run, process-wide. The trainer marks its
// phases with a Timed scope (setup, validation, optimizer, saving), the
// data-parallel step its own (shard steps, fixed-point work, waiting for the
// other ranks, the gradient allreduce). Under mpirun the trainer logs every
// rank's breakdown at the end (ProfileLines, collective); without mpirun
// nothing is logged and the cost is two clock reads per scope.
#pragma once

#include <string>
#include <vector>

#include "util/status.h"

namespace ds::dist {

enum class Phase {
  kSetup,      // reading, rules, tokenizer, sequences, network (to the first epoch)
  kValidate,   // validation batches (the untrained loss included)
  kSteps,      // this rank's backend steps (forward and backward of its shards)
  kFixed,      // fixed-point conversions of the gradient sum (local work)
  kWait,       // the first collective of a step: waiting for the slowest rank
  kAllreduce,  // the int64 gradient allreduce
  kOptimizer,  // the optimizer step
  kSave,       // epoch files (rank 0: the model; others: their scratch copy)
  kCalibrate,  // the pair calibration after training (its sampling spread over the ranks)
  kCount
};

double WallNow();
double CpuNow();  // this process's CPU time (all threads)

void AddTime(Phase p, double wall, double cpu);

// Adds the scope's wall and CPU time to a phase.
class Timed {
 public:
  explicit Timed(Phase p) : p_(p), w0_(WallNow()), c0_(CpuNow()) {}
  ~Timed() { Stop(); }
  // Ends the scope early (later calls and the destructor add nothing).
  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    AddTime(p_, WallNow() - w0_, CpuNow() - c0_);
  }
  Timed(const Timed&) = delete;
  Timed& operator=(const Timed&) = delete;

 private:
  Phase p_;
  double w0_, c0_;
  bool stopped_ = false;
};

// Collective under mpirun: one line per rank ("mpi profile rank 1: setup
// 0.21s (cpu 0.20s), ..., other ...; process cpu ...") on rank 0, from every
// rank's totals; `total_wall` is this rank's run time (the rest is "other");
// the process's CPU time counts from its start (exec, MPI_Init, reading the
// configuration: what no phase covers).
Result<std::vector<std::string>> ProfileLines(double total_wall);

}  // namespace ds::dist
