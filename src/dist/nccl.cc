#include "dist/nccl.h"

#include <cstdlib>
#include <string>

#include "dist/comm.h"

#ifdef DATASYNTH_HAVE_NCCL
#include "backend/module.h"
#endif

namespace ds::dist {

#ifdef DATASYNTH_HAVE_NCCL
// The CUDA and NCCL calls live in the CUDA backend module (backend/module.h
// NcclOps), loaded on first use, so that dscore links neither.
struct NcclComm::Impl {
  const NcclOps* ops = nullptr;
  void* comm = nullptr;
};

namespace {
Result<const NcclOps*> Ops() {
  DS_ASSIGN_OR_RETURN(const BackendModule* m, LoadBackendModule(DeviceKind::kCuda));
  if (m->nccl == nullptr) return DS_ERR(kUnavailable, "the CUDA module was built without NCCL");
  return m->nccl;
}
}  // namespace

Result<std::unique_ptr<NcclComm>> NcclComm::Create(int device) {
  std::unique_ptr<NcclComm> c(new NcclComm());
  c->impl_ = std::make_unique<Impl>();
  DS_ASSIGN_OR_RETURN(c->impl_->ops, Ops());
  DS_ASSIGN_OR_RETURN(c->impl_->comm,
                      c->impl_->ops->create(device, Rank(), Size(), Where(),
                                            [](void* id, size_t n) { return Broadcast(id, n); }));
  return c;
}

NcclComm::~NcclComm() {
  if (impl_ && impl_->comm) impl_->ops->destroy(impl_->comm);
}

Status NcclComm::AllreduceSumDevice(int64_t* data, size_t n) {
  return impl_->ops->allreduce_device(impl_->comm, data, n);
}

Status NcclComm::AllreduceSum(int64_t* host, size_t n) {
  return impl_->ops->allreduce_host(impl_->comm, host, n);
}

NcclComm* SharedNccl(std::string* why) {
  static std::unique_ptr<NcclComm> comm;
  static std::string error;
  static bool tried = false;
  const char* env = std::getenv("DATASYNTH_NCCL");
  if (!env || std::string(env) != "1") return nullptr;
  if (!tried) {
    tried = true;
    if (!CudaDriverHasDevice(&error)) {
      // No driver or no GPU (`error` says which): the module is not loaded.
    } else if (Result<const NcclOps*> ops = Ops(); !ops.ok()) {
      error = ops.status().message();
    } else if (const int devices = (*ops)->device_count(); devices == 0) {
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
