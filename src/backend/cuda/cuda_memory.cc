#include "backend/cuda/cuda_memory.h"

#include <map>
#include <memory>
#include <mutex>

#include "backend/cuda/cuda_check.h"

namespace ds::cuda {

void* CudaHeap::Malloc(size_t bytes) {
  DS_CUDA_CHECK(cudaSetDevice(device_));
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it
    return nullptr;
  }
  DS_CUDA_CHECK(e);
  return p;
}

void CudaHeap::Free(void* ptr) {
  DS_CUDA_CHECK(cudaSetDevice(device_));
  DS_CUDA_CHECK(cudaFree(ptr));
}

void CudaHeap::Synchronize() {
  DS_CUDA_CHECK(cudaSetDevice(device_));
  DS_CUDA_CHECK(cudaDeviceSynchronize());
}

size_t CudaHeap::TotalBytes() const {
  auto r = MemoryInfo(device_);
  return r.ok() ? r->second : 0;
}

size_t CudaHeap::FreeBytes() const {
  auto r = MemoryInfo(device_);
  return r.ok() ? r->first : 0;
}

std::string CudaHeap::Name() const { return fmt::format("cuda:{}", device_); }

namespace {
struct DeviceState {
  std::unique_ptr<CudaHeap> heap;
  std::unique_ptr<CachingAllocator> alloc;
};
std::mutex& AllocMutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::map<int, DeviceState>& AllocMap() {
  static auto* m = new std::map<int, DeviceState>;  // leaked on purpose, see header
  return *m;
}
}  // namespace

Result<CachingAllocator*> ProcessAllocator(int device, const AllocatorConfig& config) {
  std::lock_guard<std::mutex> lock(AllocMutex());
  auto& m = AllocMap();
  auto it = m.find(device);
  if (it != m.end()) return it->second.alloc.get();
  DeviceState st;
  st.heap = std::make_unique<CudaHeap>(device);
  Status s = Capture([&]() -> Status {
    DS_ASSIGN_OR_RETURN(st.alloc, CachingAllocator::Create(st.heap.get(), config));
    return Status::Ok();
  });
  if (!s.ok()) return s.WithContext(fmt::format("cuda:{}", device));
  CachingAllocator* a = st.alloc.get();
  m.emplace(device, std::move(st));
  return a;
}

CachingAllocator* ExistingProcessAllocator(int device) {
  std::lock_guard<std::mutex> lock(AllocMutex());
  auto& m = AllocMap();
  auto it = m.find(device);
  return it == m.end() ? nullptr : it->second.alloc.get();
}

DeviceBuffer::DeviceBuffer(CachingAllocator* alloc, size_t bytes, cudaStream_t stream) {
  auto r = alloc->Allocate(bytes, reinterpret_cast<StreamId>(stream));
  ThrowIfError(r.status());
  alloc_ = alloc;
  ptr_ = *r;
  bytes_ = bytes;
}

void DeviceBuffer::Reset() {
  if (ptr_ != nullptr) alloc_->Free(ptr_);
  alloc_ = nullptr;
  ptr_ = nullptr;
  bytes_ = 0;
}

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) DS_CUDA_CHECK(cudaMallocHost(&ptr_, bytes));
}

PinnedBuffer::~PinnedBuffer() {
  if (ptr_ != nullptr) cudaFreeHost(ptr_);
}

bool ProbeDevice(std::string* why) {
  std::string reason;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    reason = fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
  } else if (n == 0) {
    reason = "no CUDA device found";
  } else {
    int major = 0, minor = 0;
    e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
    if (e != cudaSuccess) {
      cudaGetLastError();
      reason = fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
    } else if (major < 9) {
      // This build holds sm_90 code and compute_90 PTX, which older GPUs cannot run.
      reason = fmt::format(
          "GPU 0 is sm_{}{}, older than the sm_90 this build targets (rebuild with "
          "-DCMAKE_CUDA_ARCHITECTURES={}{})",
          major, minor, major, minor);
    }
  }
  if (why != nullptr) *why = reason;
  return reason.empty();
}

Result<std::pair<size_t, size_t>> MemoryInfo(int device) {
  DS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  size_t free_b = 0, total_b = 0;
  DS_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_b, &total_b));
  return std::make_pair(free_b, total_b);
}

}  // namespace ds::cuda
