// The caching device allocator's policy, over a simulated heap (no GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <thread>

#include "backend/device_allocator.h"
#include "util/rng.h"

namespace ds {
namespace {

constexpr size_t KiB = 1024, MiB = 1024 * 1024, GiB = 1024 * MiB;

// A fake device: hands out addresses from a private range (never dereferenced),
// enforces a capacity and can be told to fail.
class SimulatedHeap : public DeviceHeap {
 public:
  explicit SimulatedHeap(size_t capacity) : capacity_(capacity) {}
  ~SimulatedHeap() override { EXPECT_TRUE(live_.empty()) << "allocator leaked segments"; }
  void* Malloc(size_t bytes) override {
    ++malloc_calls;
    if (fail_all || used_ + bytes > capacity_) return nullptr;
    auto* p = reinterpret_cast<void*>(next_);
    next_ += (bytes + 4 * MiB - 1) / (2 * MiB) * (2 * MiB) + 2 * MiB;  // gaps between segments
    live_[p] = bytes;
    used_ += bytes;
    max_used = std::max(max_used, used_);
    return p;
  }
  void Free(void* p) override {
    auto it = live_.find(p);
    ASSERT_NE(it, live_.end()) << "free of a pointer the heap never gave";
    used_ -= it->second;
    live_.erase(it);
    ++free_calls;
  }
  void Synchronize() override { ++sync_calls; }
  size_t TotalBytes() const override { return capacity_; }
  size_t FreeBytes() const override { return capacity_ - used_; }
  std::string Name() const override { return "simulated device"; }

  size_t used() const { return used_; }
  const std::map<void*, size_t>& live() const { return live_; }
  bool fail_all = false;
  int malloc_calls = 0, free_calls = 0, sync_calls = 0;
  size_t max_used = 0;

 private:
  size_t capacity_;
  size_t used_ = 0;
  uintptr_t next_ = uintptr_t(1) << 40;
  std::map<void*, size_t> live_;
};

char* Alloc(CachingAllocator& a, size_t bytes, StreamId s = 0) {
  auto r = a.Allocate(bytes, s);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? static_cast<char*>(*r) : nullptr;
}

std::unique_ptr<CachingAllocator> Make(SimulatedHeap& heap, AllocatorConfig cfg = {}) {
  return CachingAllocator::Create(&heap, cfg).ValueOrThrow();
}

TEST(AllocatorTest, RoundsTo512AndUsesSmallSegments) {
  SimulatedHeap heap(1 * GiB);
  auto a = Make(heap);
  char* p = Alloc(*a, 1);
  auto s = a->stats();
  EXPECT_EQ(s.allocated_bytes, 512u);
  EXPECT_EQ(s.requested_bytes, 1u);
  EXPECT_EQ(s.reserved_bytes, 2 * MiB);
  EXPECT_EQ(heap.used(), 2 * MiB);
  char* q = Alloc(*a, 513);  // split from the same segment, right after p
  EXPECT_EQ(q, p + 512);
  EXPECT_EQ(a->stats().allocated_bytes, 512u + 1024u);
  EXPECT_EQ(heap.malloc_calls, 1);
  a->Free(p);
  a->Free(q);
}

TEST(AllocatorTest, LargePoolSegmentSizes) {
  SimulatedHeap heap(1 * GiB);
  auto a = Make(heap);
  char* p = Alloc(*a, 5 * MiB);  // < 10 MiB: a 20 MiB segment
  EXPECT_EQ(a->stats().reserved_bytes, 20 * MiB);
  char* q = Alloc(*a, 16 * MiB + 1);  // >= 10 MiB and no cached fit: rounded up to 2 MiB
  EXPECT_EQ(a->stats().reserved_bytes, 38 * MiB);
  char* r = Alloc(*a, 6 * MiB);  // fits in the rest of the first segment (15 MiB left)
  EXPECT_EQ(r, p + 5 * MiB);
  EXPECT_EQ(a->stats().num_segments, 2);
  for (char* x : {p, q, r}) a->Free(x);
}

TEST(AllocatorTest, BestFitPicksTheSmallestCachedBlock) {
  SimulatedHeap heap(1 * GiB);
  auto a = Make(heap);
  char* big = Alloc(*a, 300 * KiB);
  char* bar1 = Alloc(*a, 4 * KiB);
  char* small = Alloc(*a, 100 * KiB);
  char* bar2 = Alloc(*a, 4 * KiB);
  a->Free(big);
  a->Free(small);
  // Three free blocks now: 300 KiB, 100 KiB and the segment's tail; 90 KiB goes
  // to the 100 KiB hole, 250 KiB to the 300 KiB one.
  EXPECT_EQ(Alloc(*a, 90 * KiB), small);
  EXPECT_EQ(Alloc(*a, 250 * KiB), big);
  EXPECT_EQ(heap.malloc_calls, 1);
  a->Free(bar1);
  a->Free(bar2);
  a->Free(small);
  a->Free(big);
}

TEST(AllocatorTest, SplitLeavesTheRemainderCached) {
  SimulatedHeap heap(1 * GiB);
  auto a = Make(heap);
  char* p = Alloc(*a, 1000);
  char* q = Alloc(*a, 1000);
  EXPECT_EQ(q, p + 1024);
  // Large pool: a remainder of at most 1 MiB is not split off.
  char* l = Alloc(*a, 19 * MiB + 512 * KiB);  // 20 MiB segment, 512 KiB over
  EXPECT_EQ(a->stats().allocated_bytes, 2048u + 20 * MiB);
  char* m = Alloc(*a, 12 * MiB);  // the 20 MiB block was not split: a new segment
  EXPECT_EQ(a->stats().num_segments, 3);
  for (char* x : {p, q, l, m}) a->Free(x);
}

TEST(AllocatorTest, CoalescesFreeNeighbours) {
  SimulatedHeap heap(1 * GiB);
  auto a = Make(heap);
  char* x = Alloc(*a, 4 * KiB);
  char* y = Alloc(*a, 4 * KiB);
  char* z = Alloc(*a, 4 * KiB);
  a->Free(x);
  a->Free(z);                        // merges with the tail
  a->Free(y);                        // merges with x (before) and z+tail (after): one 2 MiB block
  EXPECT_EQ(Alloc(*a, 1 * MiB), x);  // only possible if everything was merged back
  EXPECT_EQ(heap.malloc_calls, 1);
  a->Free(x);
  EXPECT_EQ(a->EmptyCache(), 2 * MiB);  // whole segment free again: released
  EXPECT_EQ(heap.used(), 0u);
  EXPECT_EQ(a->stats().reserved_bytes, 0u);
}

TEST(AllocatorTest, LimitIsEnforced) {
  SimulatedHeap heap(1 * GiB);
  auto a = Make(heap, {.limit_bytes = 8 * MiB});
  char* p = Alloc(*a, 3 * MiB);  // a 20 MiB segment would cross the limit: exact size
  char* q = Alloc(*a, 3 * MiB);
  EXPECT_EQ(a->stats().reserved_bytes, 6 * MiB);
  auto r = a->Allocate(3 * MiB);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kResourceExhausted);
  EXPECT_NE(r.status().message().find("limit 8.00 MiB"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("per-process memory limit"), std::string::npos);
  EXPECT_LE(heap.max_used, 8 * MiB);
  // Small requests still fit in the 2 MiB left.
  char* s = Alloc(*a, 100 * KiB);
  EXPECT_EQ(a->stats().reserved_bytes, 8 * MiB);
  for (char* x : {p, q, s}) a->Free(x);
}

TEST(AllocatorTest, OutOfMemoryFreesTheCacheAndRetries) {
  SimulatedHeap heap(24 * MiB);
  auto a = Make(heap);
  std::vector<char*> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(Alloc(*a, 1 * MiB));  // 5 small segments
  EXPECT_EQ(a->stats().reserved_bytes, 10 * MiB);
  for (char* b : blocks) a->Free(b);
  EXPECT_EQ(a->stats().reserved_bytes, 10 * MiB);  // cached, not returned
  // 20 MiB does not fit next to the 10 MiB cache on a 24 MiB device: the cache
  // is released and the allocation retried.
  char* big = Alloc(*a, 20 * MiB);
  ASSERT_NE(big, nullptr);
  auto s = a->stats();
  EXPECT_EQ(s.num_oom_retries, 1);
  EXPECT_EQ(s.num_oom_failures, 0);
  EXPECT_EQ(s.num_segment_frees, 5);
  EXPECT_EQ(s.reserved_bytes, 20 * MiB);
  EXPECT_GE(heap.sync_calls, 1);
  a->Free(big);
}

TEST(AllocatorTest, OutOfMemoryFailureExplains) {
  SimulatedHeap heap(24 * MiB);
  auto a = Make(heap);
  char* p = Alloc(*a, 20 * MiB);
  auto r = a->Allocate(10 * MiB);
  ASSERT_FALSE(r.ok());
  const std::string& m = r.status().message();
  EXPECT_EQ(r.status().code(), Code::kResourceExhausted);
  EXPECT_NE(m.find("cannot allocate 10.00 MiB"), std::string::npos) << m;
  EXPECT_NE(m.find("20.00 MiB allocated, 20.00 MiB reserved, limit none"), std::string::npos) << m;
  EXPECT_NE(m.find("no free memory"), std::string::npos) << m;
  EXPECT_NE(m.find("simulated device"), std::string::npos) << m;
  auto s = a->stats();
  EXPECT_EQ(s.num_oom_retries, 1);
  EXPECT_EQ(s.num_oom_failures, 1);
  a->Free(p);
  // The failure left the allocator usable.
  heap.fail_all = true;
  EXPECT_EQ(Alloc(*a, 10 * MiB), p);  // served from the cache, no heap call needed
  a->Free(p);
}

TEST(AllocatorTest, Statistics) {
  SimulatedHeap heap(1 * GiB);
  auto a = Make(heap);
  char* p = Alloc(*a, 3000);  // 3072
  char* q = Alloc(*a, 16 * MiB);
  a->Free(p);
  auto s = a->stats();
  EXPECT_EQ(s.allocated_bytes, 16 * MiB);
  EXPECT_EQ(s.peak_allocated_bytes, 16 * MiB + 3072);
  EXPECT_EQ(s.requested_bytes, 16 * MiB);
  EXPECT_EQ(s.reserved_bytes, 2 * MiB + 16 * MiB);
  EXPECT_EQ(s.peak_reserved_bytes, 18 * MiB);
  EXPECT_EQ(s.num_allocs, 2);
  EXPECT_EQ(s.num_frees, 1);
  EXPECT_EQ(s.num_segments, 2);
  EXPECT_EQ(s.num_segment_allocs, 2);
  a->Free(q);
  a->EmptyCache();
  s = a->stats();
  EXPECT_EQ(s.reserved_bytes, 0u);
  EXPECT_EQ(s.peak_reserved_bytes, 18 * MiB);
  EXPECT_EQ(s.num_segment_frees, 2);
  a->ResetPeakStats();
  EXPECT_EQ(a->stats().peak_reserved_bytes, 0u);
  EXPECT_NE(s.ToString().find("reserved 0 B (peak 18.00 MiB)"), std::string::npos) << s.ToString();
}

TEST(AllocatorTest, PreallocateReservesTheLimitOnce) {
  SimulatedHeap heap(1 * GiB);
  auto a = Make(heap, {.limit_bytes = 64 * MiB, .preallocate = true});
  EXPECT_EQ(heap.malloc_calls, 1);
  EXPECT_EQ(heap.used(), 64 * MiB);
  EXPECT_EQ(a->stats().reserved_bytes, 64 * MiB);
  char* p = Alloc(*a, 1000);  // small requests are carved from the arena too
  char* q = Alloc(*a, 40 * MiB);
  EXPECT_EQ(q, p + 1024);
  EXPECT_EQ(heap.malloc_calls, 1);
  auto r = a->Allocate(30 * MiB);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("preallocated pool is exhausted"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(heap.malloc_calls, 1);  // never grows
  a->Free(p);
  a->Free(q);
  EXPECT_EQ(a->EmptyCache(), 0u);     // the arena stays
  EXPECT_EQ(Alloc(*a, 64 * MiB), p);  // everything coalesced back
  a->Free(p);
}

TEST(AllocatorTest, PreallocateFailsCleanly) {
  SimulatedHeap heap(32 * MiB);
  auto r = CachingAllocator::Create(&heap, {.limit_bytes = 64 * MiB, .preallocate = true});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kResourceExhausted);
}

TEST(AllocatorTest, BlocksAreReusedOnTheirStreamUntilSynchronized) {
  SimulatedHeap heap(1 * GiB);
  auto a = Make(heap);
  const StreamId s1 = 11, s2 = 22;
  char* p1 = Alloc(*a, 4 * KiB, s1);
  a->Free(p1);  // cached for s1 (the whole segment now is)
  char* p3 = Alloc(*a, 4 * KiB, s1);
  EXPECT_EQ(p3, p1);  // same stream: reused at once
  char* p2 = Alloc(*a, 4 * KiB, s2);
  EXPECT_NE(p2, p1 + 4 * KiB);  // s2 may not take s1's cache: s1's work may still use it
  EXPECT_EQ(a->stats().num_segments, 2);
  a->Free(p2);
  a->Free(p3);
  a->Synchronize();  // all streams idle: any stream may reuse anything
  EXPECT_EQ(Alloc(*a, 4 * KiB, s2), p1);
  a->Free(p1);
}

TEST(AllocatorTest, MarkStreamIdleReleasesOneStream) {
  SimulatedHeap heap(1 * GiB);
  auto a = Make(heap);
  char* p1 = Alloc(*a, 4 * KiB, 1);
  char* p2 = Alloc(*a, 4 * KiB, 2);  // same segment, right after p1 (the tail was any-stream)
  EXPECT_EQ(p2, p1 + 4 * KiB);
  a->Free(p1);           // tagged stream 1
  a->MarkStreamIdle(3);  // another stream: changes nothing
  EXPECT_NE(Alloc(*a, 4 * KiB, 3), p1);
  a->MarkStreamIdle(1);
  EXPECT_EQ(Alloc(*a, 4 * KiB, 3), p1);
  EXPECT_EQ(heap.sync_calls, 0);  // no device-wide synchronisation
  EXPECT_EQ(a->stats().allocated_bytes, 3 * 4 * KiB);
  // Leak check in ~SimulatedHeap: the allocator frees its segments itself.
}

TEST(AllocatorTest, RecordedBlocksWaitForSynchronize) {
  SimulatedHeap heap(1 * GiB);
  auto a = Make(heap);
  char* p = Alloc(*a, 4 * KiB, 1);
  a->RecordStream(p, 2);  // also used by stream 2
  a->Free(p);
  char* q = Alloc(*a, 4 * KiB, 1);
  EXPECT_NE(q, p);  // held back even from its own stream
  a->Free(q);
  a->Synchronize();
  EXPECT_EQ(Alloc(*a, 4 * KiB, 2), p);
  a->Free(p);
}

// Random allocations and frees on three streams: live blocks never overlap,
// lie inside the heap's segments, and everything returns at the end.
TEST(AllocatorTest, RandomOpsKeepBlocksDisjoint) {
  SimulatedHeap heap(512 * MiB);
  auto a = Make(heap, {.limit_bytes = 256 * MiB});
  Philox rng(7, 0);
  std::map<char*, size_t> live;
  for (int op = 0; op < 4000; ++op) {
    if (!live.empty() && rng.Below(100) < 45) {
      auto it = live.begin();
      std::advance(it, rng.Below(live.size()));
      a->Free(it->first);
      live.erase(it);
    } else {
      size_t bytes = rng.Below(4) == 0 ? 1 + rng.Below(24 * MiB) : 1 + rng.Below(600 * KiB);
      auto r = a->Allocate(bytes, rng.Below(3));
      if (!r.ok()) {
        EXPECT_EQ(r.status().code(), Code::kResourceExhausted);
        continue;
      }
      live[static_cast<char*>(*r)] = bytes;
    }
    if (op % 500 == 0) a->Synchronize();
    EXPECT_LE(a->stats().reserved_bytes, 256 * MiB);
  }
  char* prev_end = nullptr;
  for (auto& [p, n] : live) {
    EXPECT_GE(p, prev_end) << "overlapping blocks";
    prev_end = p + n;
    auto seg = heap.live().upper_bound(p);
    ASSERT_NE(seg, heap.live().begin());
    --seg;
    EXPECT_LE(p + n, static_cast<char*>(seg->first) + seg->second) << "block outside its segment";
  }
  for (auto& [p, n] : live) a->Free(p);
  EXPECT_EQ(a->stats().allocated_bytes, 0u);
  a->EmptyCache();
  EXPECT_EQ(heap.used(), 0u);
}

TEST(AllocatorTest, ConcurrentUseIsSafe) {
  SimulatedHeap heap(1 * GiB);
  auto a = Make(heap);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Philox rng(3, t);
      std::vector<char*> mine;
      for (int i = 0; i < 2000; ++i) {
        if (!mine.empty() && rng.Below(2)) {
          a->Free(mine.back());
          mine.pop_back();
        } else {
          mine.push_back(static_cast<char*>(a->Allocate(1 + rng.Below(64 * KiB), t).value()));
        }
      }
      for (char* p : mine) a->Free(p);
    });
  }
  for (auto& th : threads) th.join();
  auto s = a->stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.num_allocs, s.num_frees);
}

TEST(AllocatorTest, ParseMemoryLimit) {
  EXPECT_EQ(ParseMemoryLimit("4GiB", 0).value(), 4 * GiB);
  EXPECT_EQ(ParseMemoryLimit("512MiB", 0).value(), 512 * MiB);
  EXPECT_EQ(ParseMemoryLimit(" 2 g ", 0).value(), 2 * GiB);
  EXPECT_EQ(ParseMemoryLimit("1.5GB", 0).value(), 1500000000u);
  EXPECT_EQ(ParseMemoryLimit("100", 0).value(), 100u);
  EXPECT_EQ(ParseMemoryLimit("0", 0).value(), 0u);
  EXPECT_EQ(ParseMemoryLimit("25%", 80 * GiB).value(), 20 * GiB);
  EXPECT_EQ(ParseMemoryLimit("12.5%", 8 * GiB).value(), 1 * GiB);
  for (const char* bad : {"", "abc", "4XB", "-1GiB", "150%", "0%", "1.5", "GiB"}) {
    auto r = ParseMemoryLimit(bad, 80 * GiB);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad;
    }
  }
  auto r = ParseMemoryLimit("25%", 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("total memory"), std::string::npos);
  EXPECT_NE(ParseMemoryLimit("4XB", 0).status().message().find("unknown unit 'XB'"),
            std::string::npos);
}

TEST(AllocatorTest, WorkerShare) {
  EXPECT_EQ(WorkerShare(80 * GiB, 8, 512 * MiB).value(), 10 * GiB - 512 * MiB);
  EXPECT_EQ(WorkerShare(10 * GiB + 3, 3, 0).value(), (10 * GiB / 3) / (2 * MiB) * (2 * MiB));
  auto r = WorkerShare(1 * GiB, 32, 512 * MiB);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kResourceExhausted);
  EXPECT_FALSE(WorkerShare(1 * GiB, 0, 0).ok());
}

}  // namespace
}  // namespace ds
