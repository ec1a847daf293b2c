#include "dist/nccl.h"

#include <cstdlib>
#include <string>

#include "dist/comm.h"

#ifdef DATASYNTH_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace ds::dist {

#ifdef DATASYNTH_HAVE_NCCL
struct NcclComm::Impl {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int64_t* buf = nullptr;
  size_t cap = 0;
};

namespace {
Status Cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return DS_ERR(kInternal, "{} on {}: {}", what, Where(), cudaGetErrorString(e));
}
Status Nccl(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return Status::Ok();
  return DS_ERR(kInternal, "{} on {}: {}", what, Where(), ncclGetErrorString(r));
}
}  // namespace

Result<std::unique_ptr<NcclComm>> NcclComm::Create(int device) {
  std::unique_ptr<NcclComm> c(new NcclComm());
  c->impl_ = std::make_unique<Impl>();
  DS_RETURN_IF_ERROR(Cuda(cudaSetDevice(device), "cudaSetDevice"));
  ncclUniqueId id;
  if (Rank() == 0) DS_RETURN_IF_ERROR(Nccl(ncclGetUniqueId(&id), "ncclGetUniqueId"));
  DS_RETURN_IF_ERROR(Broadcast(&id, sizeof(id)));
  DS_RETURN_IF_ERROR(Nccl(ncclCommInitRank(&c->impl_->comm, Size(), id, Rank()), "ncclCommInitRank"));
  DS_RETURN_IF_ERROR(Cuda(cudaStreamCreate(&c->impl_->stream), "cudaStreamCreate"));
  return c;
}

NcclComm::~NcclComm() {
  if (!impl_) return;
  if (impl_->buf) cudaFree(impl_->buf);
  if (impl_->stream) cudaStreamDestroy(impl_->stream);
  if (impl_->comm) ncclCommDestroy(impl_->comm);
}

Status NcclComm::AllreduceSumDevice(int64_t* data, size_t n) {
  DS_RETURN_IF_ERROR(Nccl(ncclAllReduce(data, data, n, ncclInt64, ncclSum, impl_->comm,
                                        impl_->stream),
                          "ncclAllReduce"));
  return Cuda(cudaStreamSynchronize(impl_->stream), "cudaStreamSynchronize");
}

Status NcclComm::AllreduceSum(int64_t* host, size_t n) {
  if (impl_->cap < n) {
    if (impl_->buf) cudaFree(impl_->buf);
    impl_->buf = nullptr;
    DS_RETURN_IF_ERROR(Cuda(cudaMalloc(&impl_->buf, n * sizeof(int64_t)), "cudaMalloc"));
    impl_->cap = n;
  }
  const size_t bytes = n * sizeof(int64_t);
  DS_RETURN_IF_ERROR(Cuda(cudaMemcpyAsync(impl_->buf, host, bytes, cudaMemcpyHostToDevice,
                                          impl_->stream),
                          "cudaMemcpyAsync"));
  DS_RETURN_IF_ERROR(AllreduceSumDevice(impl_->buf, n));
  DS_RETURN_IF_ERROR(Cuda(cudaMemcpy(host, impl_->buf, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy"));
  return Status::Ok();
}

NcclComm* SharedNccl(std::string* why) {
  static std::unique_ptr<NcclComm> comm;
  static std::string error;
  static bool tried = false;
  const char* env = std::getenv("DATASYNTH_NCCL");
  if (!env || std::string(env) != "1") return nullptr;
  if (!tried) {
    tried = true;
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      error = "no GPU";
    } else {
      // One GPU per rank: the local rank picks its device.
      const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
      auto c = NcclComm::Create((local ? std::atoi(local) : 0) % devices);
      if (c.ok())
        comm = std::move(c).value();
      else
        error = c.status().message();
    }
  }
  if (why) *why = error;
  return comm.get();
}
#else
struct NcclComm::Impl {};

Result<std::unique_ptr<NcclComm>> NcclComm::Create(int) {
  return DS_ERR(kUnavailable, "this build of datasynth has no NCCL (CMake found none)");
}
NcclComm::~NcclComm() = default;
Status NcclComm::AllreduceSumDevice(int64_t*, size_t) {
  return DS_ERR(kUnavailable, "this build of datasynth has no NCCL");
}
Status NcclComm::AllreduceSum(int64_t*, size_t) {
  return DS_ERR(kUnavailable, "this build of datasynth has no NCCL");
}
NcclComm* SharedNccl(std::string* why) {
  if (why) *why = "this build of datasynth has no NCCL";
  return nullptr;
}
#endif

}  // namespace ds::dist
