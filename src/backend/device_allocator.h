// A caching device-memory allocator: the POLICY, independent of CUDA.
//
// The allocator sits between the backends and a DeviceHeap (cudaMalloc /
// cudaFree on a GPU, a simulated heap in tests). It follows PyTorch's
// CUDACachingAllocator, so that several generation worker processes can share
// one GPU, each taking memory only as it needs it and never more than its cap:
//
// * Grow on demand (the default). Memory is obtained from the heap in
//   SEGMENTS only when no cached block fits; freed blocks go back to a cache,
//   not to the heap, so steady-state training/generation never calls
//   cudaMalloc (which synchronises the device and is slow).
// * Preallocate (AllocatorConfig::preallocate; TensorFlow's default, kept for
//   comparison): one segment of the whole limit (or all free memory) is
//   reserved at creation and every block is carved from it; it never grows.
// * Hard per-process limit (limit_bytes, 0 = none): the bytes RESERVED from the
//   heap (sum of segment sizes) never exceed it. ParseMemoryLimit() reads
//   "4GiB", "512MiB", "1.5GB", "123456" (bytes) or "25%" (of the device).
// * Sizes are rounded up to 512 B. Requests of at most 1 MiB come from the
//   SMALL pool, whose segments are 2 MiB; larger requests come from the LARGE
//   pool, whose segments are 20 MiB for requests under 10 MiB and the request
//   rounded up to 2 MiB otherwise (when a rounded segment would cross the
//   limit but the exact request fits, the exact size is used).
// * Best fit: the smallest cached block (of the same stream, see below) that is
//   large enough. A block is SPLIT when the remainder is worth keeping (>= 512
//   B in the small pool, > 1 MiB in the large pool) and freed blocks are
//   COALESCED with free neighbours of the same segment.
// * Stream-aware reuse: a block remembers the stream it was allocated on. Once
//   freed, it is reused only by allocations on that same stream (work queued
//   on a stream runs in order, so the reuse is safe without synchronising).
//   After Synchronize() (all streams idle) every cached block may serve any
//   stream. A block also used on another stream must be announced with
//   RecordStream(); when freed it is held back (reusable by nobody) until the
//   next Synchronize().
// * Out of memory (heap returns null or the limit would be crossed): the
//   allocator synchronises, returns every fully free cached segment to the
//   heap and retries once; if that fails too, Allocate() returns
//   kResourceExhausted with a message giving the request, the bytes allocated
//   and reserved, and the limit.
// * Statistics: current and peak allocated / reserved bytes, number of allocs,
//   frees, segments, OOM retries and failures (stats(), ToString()).
//
// Thread-safe (one mutex). Blocks are never handed back to the heap except on
// out-of-memory, EmptyCache() or destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "util/status.h"

namespace ds {

// A stream handle as an integer (a cudaStream_t cast; 0 = the default stream).
using StreamId = uint64_t;

// Raw device memory. Implementations: CudaHeap (backend/cuda), SimulatedHeap
// (tests).
class DeviceHeap {
 public:
  virtual ~DeviceHeap() = default;
  // `bytes` of device memory, or nullptr when the device is out of memory.
  virtual void* Malloc(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  // Waits until the work queued on every stream has finished.
  virtual void Synchronize() {}
  virtual size_t TotalBytes() const = 0;  // the device's memory, for "25%"
  virtual size_t FreeBytes() const = 0;   // currently free on the device
  virtual std::string Name() const { return "device"; }
};

struct AllocatorConfig {
  size_t limit_bytes = 0;    // cap on reserved bytes; 0 = no cap but the device
  bool preallocate = false;  // reserve limit_bytes (or all free memory) up front
  bool operator==(const AllocatorConfig&) const = default;
};

struct AllocatorStats {
  size_t allocated_bytes = 0;  // in blocks handed out (rounded sizes)
  size_t peak_allocated_bytes = 0;
  size_t requested_bytes = 0;  // as asked for, before rounding
  size_t reserved_bytes = 0;   // in segments obtained from the heap
  size_t peak_reserved_bytes = 0;
  size_t limit_bytes = 0;  // 0 = none
  int64_t num_allocs = 0;  // successful Allocate() calls
  int64_t num_frees = 0;
  int64_t num_segments = 0;        // currently reserved segments
  int64_t num_segment_allocs = 0;  // heap Malloc calls that succeeded
  int64_t num_segment_frees = 0;
  int64_t num_oom_retries = 0;   // cache flushed and retried
  int64_t num_oom_failures = 0;  // Allocate() returned kResourceExhausted
  std::string ToString() const;
};

// "1.50 GiB", "512.00 MiB", "100 B".
std::string FormatBytes(size_t bytes);

// Parses a memory limit: a number with an optional unit (B, KiB, MiB, GiB,
// TiB, KB, MB, GB, TB; case-insensitive; "K"/"M"/"G" mean KiB/MiB/GiB), or a
// percentage of `total_bytes` ("25%"). "0" means no limit.
Result<size_t> ParseMemoryLimit(std::string_view text, size_t total_bytes);

// The per-process limit when `workers` processes share `free_bytes`: an equal
// share, less `context_reserve` per process for what the CUDA context itself
// takes outside the allocator, rounded down to 2 MiB. Error when nothing is
// left.
Result<size_t> WorkerShare(size_t free_bytes, int workers, size_t context_reserve);

class CachingAllocator {
 public:
  static constexpr size_t kMinBlockSize = 512;      // rounding
  static constexpr size_t kSmallSize = 1 << 20;     // <= 1 MiB: small pool
  static constexpr size_t kSmallBuffer = 2 << 20;   // small-pool segment
  static constexpr size_t kLargeBuffer = 20 << 20;  // segment for < 10 MiB
  static constexpr size_t kMinLargeAlloc = 10 << 20;
  static constexpr size_t kRoundLarge = 2 << 20;

  // `heap` must outlive the allocator. Fails when preallocation fails.
  static Result<std::unique_ptr<CachingAllocator>> Create(DeviceHeap* heap,
                                                          const AllocatorConfig& config);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` (0 counts as 1) for use on `stream`.
  Result<void*> Allocate(size_t bytes, StreamId stream = 0);
  // Returns a block to the cache. Null is ignored; an unknown pointer is a bug.
  void Free(void* ptr);
  // `ptr` is also used by work on `stream`: its reuse waits for Synchronize().
  void RecordStream(void* ptr, StreamId stream);
  // Synchronises the heap; then every cached block may serve any stream.
  void Synchronize();
  // The caller has waited for `stream` (cudaStreamSynchronize): blocks freed on
  // it may now serve any stream. Cheaper than Synchronize() (no device sync).
  void MarkStreamIdle(StreamId stream);
  // Synchronize() and return fully free segments to the heap; returns bytes
  // released. The preallocated segment is kept.
  size_t EmptyCache();

  AllocatorStats stats() const;
  void ResetPeakStats();
  const AllocatorConfig& config() const { return config_; }
  DeviceHeap* heap() const { return heap_; }

 private:
  struct Segment;
  struct Block {
    char* ptr = nullptr;
    size_t size = 0;
    size_t requested = 0;  // while allocated
    StreamId stream = 0;   // allocation stream, or the free tag
    bool allocated = false;
    bool recorded = false;  // used on another stream (RecordStream)
    bool small = false;     // pool
    Block* prev = nullptr;  // neighbours inside the segment
    Block* next = nullptr;
    Segment* segment = nullptr;
  };
  struct Segment {
    char* ptr = nullptr;
    size_t size = 0;
    bool small = false;
    Block* head = nullptr;
  };
  struct BlockLess {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockLess>;
  // Free-tag of a cached block that any stream may reuse.
  static constexpr StreamId kAnyStream = ~StreamId(0);

  CachingAllocator(DeviceHeap* heap, const AllocatorConfig& config);
  Pool& PoolFor(bool small) { return small ? small_pool_ : large_pool_; }
  bool UseSmallPool(size_t rounded) const;
  Block* FindFree(bool small, size_t rounded, StreamId stream);
  Block* NewSegment(bool small, size_t rounded);  // null on OOM
  void SplitAndUse(Block* b, size_t rounded, size_t requested, StreamId stream);
  void InsertFree(Block* b);  // coalesces, then pools
  size_t ReleaseFreeSegments();
  void SynchronizeLocked();
  // Retags free blocks of `stream` (or every free block, held ones included,
  // when `all`) as usable by any stream, coalesces, and rebuilds the pools.
  void Retag(bool all, StreamId stream);
  Status OomError(size_t requested, size_t rounded, bool limit_hit) const;

  DeviceHeap* heap_;
  AllocatorConfig config_;
  mutable std::mutex mu_;
  Pool small_pool_, large_pool_;
  std::vector<Block*> held_;  // freed but recorded on other streams
  std::unordered_map<void*, Block*> allocated_;
  std::vector<std::unique_ptr<Segment>> segments_;
  AllocatorStats stats_;
  bool last_oom_limit_ = false;  // the last NewSegment() failure was the limit
};

}  // namespace ds
