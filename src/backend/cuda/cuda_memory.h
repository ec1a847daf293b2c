// Device memory for the CUDA backend: the cudaMalloc-backed DeviceHeap, the
// process-wide caching allocator per device (policy in
// backend/device_allocator.h), and RAII buffers over it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

#include "backend/device_allocator.h"
#include "util/status.h"

namespace ds::cuda {

// cudaMalloc / cudaFree on one device. Malloc returns nullptr on
// cudaErrorMemoryAllocation (the allocator then frees its cache and retries)
// and throws ds::Error on any other failure.
class CudaHeap : public DeviceHeap {
 public:
  explicit CudaHeap(int device) : device_(device) {}
  void* Malloc(size_t bytes) override;
  void Free(void* ptr) override;
  void Synchronize() override;
  size_t TotalBytes() const override;
  size_t FreeBytes() const override;
  std::string Name() const override;

 private:
  int device_;
};

// The process's allocator for `device`, created by the first call with
// `config`; later calls get the same allocator and `config` is ignored (the
// limit is per process). Never destroyed (the CUDA runtime may already be
// shutting down at static destruction time; the OS reclaims the memory).
Result<CachingAllocator*> ProcessAllocator(int device, const AllocatorConfig& config);
// The allocator of `device` if one was created, else nullptr.
CachingAllocator* ExistingProcessAllocator(int device);

// A block from the caching allocator, returned to it on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Throws ds::Error (kResourceExhausted with the allocator's message) on OOM.
  DeviceBuffer(CachingAllocator* alloc, size_t bytes, cudaStream_t stream);
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      std::swap(alloc_, o.alloc_);
      std::swap(ptr_, o.ptr_);
      std::swap(bytes_, o.bytes_);
    }
    return *this;
  }
  void Reset();
  template <typename T = float>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  CachingAllocator* alloc_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory (cudaMallocHost) for fast, asynchronous copies.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// True when a GPU this build can run on is present; else false with the
// reason (the CUDA error string, or the architecture mismatch) in `why`.
bool ProbeDevice(std::string* why);
// cudaMemGetInfo on `device`.
Result<std::pair<size_t, size_t>> MemoryInfo(int device);  // {free, total}

}  // namespace ds::cuda
