// NCCL between the GPUs of mpirun ranks (one GPU per rank; docs/scale.md).
//
// Built when CMake finds NCCL next to CUDA (DATASYNTH_HAVE_NCCL); otherwise
// Create() is kUnavailable. The communicator is made over the MPI ranks
// (rank 0's ncclUniqueId broadcast by MPI). The sums are of int64 fixed-point
// gradients (ExactSum), so NCCL's ring or tree order does not change them:
// the result is the same as MPI's, bit for bit.
//
// ExactSum routes its integer allreduce through NCCL when the environment
// sets DATASYNTH_NCCL=1 and a GPU is present. The gradient buffer is still
// copied through the host (TrainBackend::GetGrads): a device-resident path
// needs the CUDA backend to expose its gradient buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "util/status.h"

namespace ds::dist {

class NcclComm {
 public:
  // Collective over the MPI ranks: each rank uses CUDA device `device`.
  static Result<std::unique_ptr<NcclComm>> Create(int device);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  // In place over the ranks, device memory, on this communicator's stream.
  Status AllreduceSumDevice(int64_t* data, size_t n);
  // Host memory, through a device buffer.
  Status AllreduceSum(int64_t* host, size_t n);

 private:
  NcclComm() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The communicator ExactSum uses: one per process, made on first use when
// DATASYNTH_NCCL=1; nullptr otherwise (or when it could not be made: `why`).
NcclComm* SharedNccl(std::string* why = nullptr);

}  // namespace ds::dist
