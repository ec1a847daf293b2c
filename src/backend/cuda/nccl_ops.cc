#include "backend/cuda/nccl_ops.h"

#include <memory>

#ifdef DATASYNTH_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace ds::cuda {

#ifdef DATASYNTH_HAVE_NCCL
namespace {

struct Comm {
  std::string where;  // "rank 1 of 4"
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int64_t* buf = nullptr;
  size_t cap = 0;
};

Status Cuda(cudaError_t e, const char* what, const std::string& where) {
  if (e == cudaSuccess) return Status::Ok();
  return DS_ERR(kInternal, "{} on {}: {}", what, where, cudaGetErrorString(e));
}
Status Nccl(ncclResult_t r, const char* what, const std::string& where) {
  if (r == ncclSuccess) return Status::Ok();
  return DS_ERR(kInternal, "{} on {}: {}", what, where, ncclGetErrorString(r));
}

int DeviceCount() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return devices;
}

void Destroy(void* handle) {
  auto* c = static_cast<Comm*>(handle);
  if (c == nullptr) return;
  if (c->buf) cudaFree(c->buf);
  if (c->stream) cudaStreamDestroy(c->stream);
  if (c->comm) ncclCommDestroy(c->comm);
  delete c;
}

Result<void*> Create(int device, int rank, int size, const std::string& where,
                     const std::function<Status(void*, size_t)>& share_id) {
  std::unique_ptr<Comm, void (*)(void*)> c(new Comm(), Destroy);
  c->where = where;
  DS_RETURN_IF_ERROR(Cuda(cudaSetDevice(device), "cudaSetDevice", where));
  ncclUniqueId id;
  if (rank == 0) DS_RETURN_IF_ERROR(Nccl(ncclGetUniqueId(&id), "ncclGetUniqueId", where));
  DS_RETURN_IF_ERROR(share_id(&id, sizeof(id)));
  DS_RETURN_IF_ERROR(Nccl(ncclCommInitRank(&c->comm, size, id, rank), "ncclCommInitRank", where));
  DS_RETURN_IF_ERROR(Cuda(cudaStreamCreate(&c->stream), "cudaStreamCreate", where));
  return static_cast<void*>(c.release());
}

Status AllreduceDevice(void* handle, int64_t* data, size_t n) {
  auto* c = static_cast<Comm*>(handle);
  DS_RETURN_IF_ERROR(Nccl(ncclAllReduce(data, data, n, ncclInt64, ncclSum, c->comm, c->stream),
                          "ncclAllReduce", c->where));
  return Cuda(cudaStreamSynchronize(c->stream), "cudaStreamSynchronize", c->where);
}

Status AllreduceHost(void* handle, int64_t* host, size_t n) {
  auto* c = static_cast<Comm*>(handle);
  if (c->cap < n) {
    if (c->buf) cudaFree(c->buf);
    c->buf = nullptr;
    DS_RETURN_IF_ERROR(Cuda(cudaMalloc(&c->buf, n * sizeof(int64_t)), "cudaMalloc", c->where));
    c->cap = n;
  }
  const size_t bytes = n * sizeof(int64_t);
  DS_RETURN_IF_ERROR(Cuda(cudaMemcpyAsync(c->buf, host, bytes, cudaMemcpyHostToDevice, c->stream),
                          "cudaMemcpyAsync", c->where));
  DS_RETURN_IF_ERROR(AllreduceDevice(c, c->buf, n));
  return Cuda(cudaMemcpy(host, c->buf, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy", c->where);
}

const NcclOps kOps = {DeviceCount, Create, Destroy, AllreduceDevice, AllreduceHost};

}  // namespace

const NcclOps* NcclOpsOrNull() { return &kOps; }
#else
const NcclOps* NcclOpsOrNull() { return nullptr; }
#endif

}  // namespace ds::cuda
