// Tabular training under mpirun: the batch models spread over the ranks
// (docs/scale.md). Rank 0 plans the table, writes the batch CSVs and the plan
// into the model directory (a directory every rank can read and write: a
// shared file system across hosts), trains batches b with b % N == 0 itself
// and sends batch b's job to rank b % N; each rank trains its jobs as
// ordinary single-process batch runs (in its own batch processes, outside
// the data-parallel trainer: dist::Local) and returns the results, which rank
// 0 reports and writes into tabular.json as usual.
#pragma once

#include <atomic>
#include <optional>
#include <vector>

#include "dist/comm.h"
#include "tabular/tabular.h"
#include "train/trainer.h"

namespace ds::dist {

struct BatchJobMessage {
  int batch = 0;
  TrainOptions options;  // cancel not carried
  int64_t width = 0, bytes = 0;
};
struct BatchRequest {
  TabularSpec spec;
  int procs = 1;                  // batch processes side by side on the rank
  std::optional<double> seconds;  // time left for the whole table
  std::vector<BatchJobMessage> jobs;
};

// Rank 0: whether batch b is trained here.
bool OwnBatch(int batch);
// Rank 0: sends each job to its rank (the request's jobs, all of them remote).
Status SendBatchJobs(const BatchRequest& request);
// Rank 0: waits for every remote job's result (stops on *cancel).
Status CollectBatchResults(const std::vector<int>& batches, const std::atomic<bool>* cancel,
                           std::vector<BatchTrainResult>* results);

// Other ranks: the next request; false when rank 0 ended the service.
Result<bool> ReceiveBatchJobs(BatchRequest* request);
// Other ranks: this request's outcome to rank 0.
Status ReturnBatchResults(const Status& status, const std::vector<BatchTrainResult>& results,
                          const std::vector<int>& batches);

// On rank 0, ends the other ranks' service when the table's training returns
// (on every path, errors included). A no-op elsewhere and without mpirun.
class BatchService {
 public:
  BatchService() = default;
  ~BatchService();
  BatchService(const BatchService&) = delete;
  BatchService& operator=(const BatchService&) = delete;
};

// A rank other than 0 of an mpirun run: it serves rank 0's batch jobs.
bool ServesBatches();

}  // namespace ds::dist
