// The parent's side of the generation workers (generate/workers.h describes
// the process model, generate/worker_protocol.h the frames): forks the
// workers, hands out the scheduler's attempts evenly, collects their results
// into the scheduler, and replaces what a dying worker leaves: its unfinished
// attempts go back to the scheduler for the others.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "generate/batch_sampler.h"
#include "generate/generator.h"
#include "generate/scheduler.h"
#include "util/subprocess.h"

namespace ds {

class WorkerPool {
 public:
  // `sched` receives the results; `warning` is told of each worker that died.
  WorkerPool(const GenerationModel& model, const RunPlan& plan, int slots, AttemptScheduler* sched,
             std::function<void(const std::string&)> warning);
  ~WorkerPool() { Stop(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Forks n workers; in_child runs first in each child (e.g. to close the
  // output's descriptor). Worker 0 gets the kill_after test hook. On an error
  // the workers already started are stopped. One CPU worker without the kill
  // hook runs in this process instead (no fork, no socket, no exit of a copy
  // of the process): the records are the same (a record is a function of its
  // attempt id), the start is shorter (docs/typed_fields.md, "Generation
  // speed").
  Status Start(int n, int64_t kill_after, const std::function<void()>& in_child);

  // One round: hands out attempts (at most 2 x slots outstanding per worker,
  // chunks of at most `slots`, split evenly over the live workers), waits up
  // to timeout_ms for results and passes them to the scheduler. Errors: a
  // worker's ERROR frame, a failed poll. A worker that died or sent a
  // malformed frame is removed (with a warning) without an error.
  Status Exchange(int timeout_ms);

  // Closes the sockets (the workers exit), waits 2 s, then kills the rest.
  void Stop();

  int size() const { return local_ ? 1 : int(workers_.size()); }
  int alive() const;
  bool in_process() const { return local_ != nullptr; }
  int failures() const { return failures_; }
  int64_t tokens() const { return tokens_; }  // of the results received
  // GPU workers: each worker's allocator statistics as last reported.
  const std::vector<AllocatorStats>& memory() const { return memory_; }

 private:
  struct Worker {
    int index = 0;
    Subprocess proc;
    bool alive = false;
    bool broken = false;  // a send failed: read what is left, then remove it
    std::string in, out;
    std::unordered_map<uint64_t, GenTask> outstanding;
  };
  void HandOut();
  void Flush(Worker& w);
  Status Receive(Worker& w);
  // why = "" : the worker's socket closed (its exit status is reported);
  // else the worker is killed and `why` reported.
  void Remove(Worker& w, const std::string& why);
  // The in-process worker: the backend, filter and sampler a worker process
  // would build (worker_protocol.cc's WorkerMain), and one Exchange round.
  struct Local {
    std::unique_ptr<InferBackend> backend;
    std::unique_ptr<TokenFilter> filter;
    std::unique_ptr<BatchSampler> sampler;
    std::vector<GeneratedRecord> done;
  };
  Status StartLocal();
  Status ExchangeLocal(int timeout_ms);

  const GenerationModel& model_;
  const RunPlan& plan_;
  const int slots_;
  AttemptScheduler* sched_;
  std::function<void(const std::string&)> warning_;
  std::vector<Worker> workers_;
  std::unique_ptr<Local> local_;
  int failures_ = 0;
  int64_t tokens_ = 0;
  std::vector<AllocatorStats> memory_;
  std::vector<GenTask> tasks_;  // scratch
};

}  // namespace ds
