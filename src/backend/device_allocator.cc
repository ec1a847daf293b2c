#include "backend/device_allocator.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <tuple>

namespace ds {
namespace {

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

bool Compatible(StreamId a, StreamId b, StreamId any) { return a == b || a == any || b == any; }

}  // namespace

std::string FormatBytes(size_t bytes) {
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double v = double(bytes);
  int u = -1;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{:.2f} {}", v, kUnits[u]);
}

std::string AllocatorStats::ToString() const {
  return fmt::format(
      "allocated {} (peak {}), reserved {} (peak {}), limit {}; {} allocs, {} frees, {} segments "
      "({} obtained, {} released), {} OOM retries, {} OOM failures",
      FormatBytes(allocated_bytes), FormatBytes(peak_allocated_bytes), FormatBytes(reserved_bytes),
      FormatBytes(peak_reserved_bytes), limit_bytes ? FormatBytes(limit_bytes) : "none", num_allocs,
      num_frees, num_segments, num_segment_allocs, num_segment_frees, num_oom_retries,
      num_oom_failures);
}

Result<size_t> ParseMemoryLimit(std::string_view text, size_t total_bytes) {
  std::string s(text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t start = 0;
  while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start]))) ++start;
  s = s.substr(start);
  if (s.empty()) return DS_ERR(kInvalidArgument, "memory limit: empty value");
  const char* begin = s.c_str();
  char* end = nullptr;
  double v = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(v) || v < 0 || s[0] == '-' || s[0] == '+' ||
      !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.')) {
    return DS_ERR(kInvalidArgument, "memory limit '{}': expected a number with a unit, e.g. 4GiB",
                  text);
  }
  std::string unit(end);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front()))) unit.erase(0, 1);
  std::string lower;
  for (char c : unit) lower += char(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "%") {
    if (v <= 0 || v > 100) {
      return DS_ERR(kInvalidArgument, "memory limit '{}': a percentage must be in (0, 100]", text);
    }
    if (total_bytes == 0) {
      return DS_ERR(kInvalidArgument,
                    "memory limit '{}': a percentage needs the device's total memory", text);
    }
    return size_t(std::floor(double(total_bytes) * v / 100.0));
  }
  double mult = 0;
  if (lower.empty() || lower == "b")
    mult = 1;
  else if (lower == "kib" || lower == "k")
    mult = 1024.0;
  else if (lower == "mib" || lower == "m")
    mult = 1024.0 * 1024;
  else if (lower == "gib" || lower == "g")
    mult = 1024.0 * 1024 * 1024;
  else if (lower == "tib" || lower == "t")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else if (lower == "kb")
    mult = 1e3;
  else if (lower == "mb")
    mult = 1e6;
  else if (lower == "gb")
    mult = 1e9;
  else if (lower == "tb")
    mult = 1e12;
  else {
    return DS_ERR(kInvalidArgument,
                  "memory limit '{}': unknown unit '{}' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, "
                  "TB or %)",
                  text, unit);
  }
  double bytes = std::floor(v * mult);
  if (bytes >= 1.8e19) return DS_ERR(kInvalidArgument, "memory limit '{}': too large", text);
  if (mult == 1 && bytes != v) {
    return DS_ERR(kInvalidArgument, "memory limit '{}': a byte count must be whole", text);
  }
  return size_t(bytes);
}

Result<size_t> WorkerShare(size_t free_bytes, int workers, size_t context_reserve) {
  if (workers < 1) return DS_ERR(kInvalidArgument, "workers must be >= 1, got {}", workers);
  size_t share = free_bytes / size_t(workers);
  if (share < context_reserve + CachingAllocator::kSmallBuffer) {
    return DS_ERR(kResourceExhausted,
                  "{} workers cannot share {} of free device memory: each would get {}, not "
                  "enough beyond the {} its CUDA context needs; use fewer workers",
                  workers, FormatBytes(free_bytes), FormatBytes(share),
                  FormatBytes(context_reserve));
  }
  size_t limit = share - context_reserve;
  return limit / CachingAllocator::kRoundLarge * CachingAllocator::kRoundLarge;
}

// ---------------------------------------------------------------------------

bool CachingAllocator::BlockLess::operator()(const Block* a, const Block* b) const {
  return std::tie(a->stream, a->size, a->ptr) < std::tie(b->stream, b->size, b->ptr);
}

CachingAllocator::CachingAllocator(DeviceHeap* heap, const AllocatorConfig& config)
    : heap_(heap), config_(config) {
  stats_.limit_bytes = config.limit_bytes;
}

Result<std::unique_ptr<CachingAllocator>> CachingAllocator::Create(DeviceHeap* heap,
                                                                   const AllocatorConfig& config) {
  DS_CHECK(heap != nullptr);
  std::unique_ptr<CachingAllocator> a(new CachingAllocator(heap, config));
  if (config.preallocate) {
    size_t bytes = config.limit_bytes;
    if (bytes == 0) bytes = heap->FreeBytes() / kRoundLarge * kRoundLarge;
    bytes = RoundUp(std::max<size_t>(bytes, kMinBlockSize), kMinBlockSize);
    void* p = heap->Malloc(bytes);
    if (p == nullptr) {
      return DS_ERR(kResourceExhausted,
                    "preallocating {} on {} failed ({} free): lower the memory limit",
                    FormatBytes(bytes), heap->Name(), FormatBytes(heap->FreeBytes()));
    }
    auto seg = std::make_unique<Segment>();
    seg->ptr = static_cast<char*>(p);
    seg->size = bytes;
    seg->small = false;
    Block* b = new Block;
    b->ptr = seg->ptr;
    b->size = bytes;
    b->stream = kAnyStream;
    b->segment = seg.get();
    seg->head = b;
    a->large_pool_.insert(b);
    a->segments_.push_back(std::move(seg));
    a->stats_.limit_bytes = bytes;
    a->stats_.reserved_bytes = a->stats_.peak_reserved_bytes = bytes;
    a->stats_.num_segments = a->stats_.num_segment_allocs = 1;
  }
  return a;
}

CachingAllocator::~CachingAllocator() {
  for (auto& seg : segments_) {
    for (Block* b = seg->head; b != nullptr;) {
      Block* n = b->next;
      delete b;
      b = n;
    }
    heap_->Free(seg->ptr);
  }
}

bool CachingAllocator::UseSmallPool(size_t rounded) const {
  return !config_.preallocate && rounded <= kSmallSize;
}

CachingAllocator::Block* CachingAllocator::FindFree(bool small, size_t rounded, StreamId stream) {
  Pool& pool = PoolFor(small);
  auto best_of = [&](StreamId tag) -> Pool::iterator {
    Block key;
    key.stream = tag;
    key.size = rounded;
    key.ptr = nullptr;
    auto it = pool.lower_bound(&key);
    if (it != pool.end() && (*it)->stream == tag) return it;
    return pool.end();
  };
  auto same = best_of(stream);
  auto any = best_of(kAnyStream);
  auto pick = same;
  if (pick == pool.end() || (any != pool.end() && (*any)->size < (*pick)->size)) pick = any;
  if (pick == pool.end()) return nullptr;
  Block* b = *pick;
  pool.erase(pick);
  return b;
}

CachingAllocator::Block* CachingAllocator::NewSegment(bool small, size_t rounded) {
  size_t seg = small                      ? kSmallBuffer
               : rounded < kMinLargeAlloc ? kLargeBuffer
                                          : RoundUp(rounded, kRoundLarge);
  if (config_.limit_bytes != 0 && stats_.reserved_bytes + seg > config_.limit_bytes) {
    if (stats_.reserved_bytes + rounded > config_.limit_bytes) {
      last_oom_limit_ = true;
      return nullptr;
    }
    seg = rounded;  // the rounded segment does not fit under the limit, the request does
  }
  void* p = heap_->Malloc(seg);
  if (p == nullptr) {
    last_oom_limit_ = false;
    return nullptr;
  }
  auto s = std::make_unique<Segment>();
  s->ptr = static_cast<char*>(p);
  s->size = seg;
  s->small = small;
  Block* b = new Block;
  b->ptr = s->ptr;
  b->size = seg;
  b->small = small;
  b->stream = kAnyStream;
  b->segment = s.get();
  s->head = b;
  segments_.push_back(std::move(s));
  stats_.reserved_bytes += seg;
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  ++stats_.num_segments;
  ++stats_.num_segment_allocs;
  return b;
}

void CachingAllocator::SplitAndUse(Block* b, size_t rounded, size_t requested, StreamId stream) {
  size_t remaining = b->size - rounded;
  bool split =
      (b->small || config_.preallocate) ? remaining >= kMinBlockSize : remaining > kSmallSize;
  if (split) {
    Block* rest = new Block;
    rest->ptr = b->ptr + rounded;
    rest->size = remaining;
    rest->stream = b->stream;  // the free tag carries over
    rest->small = b->small;
    rest->segment = b->segment;
    rest->prev = b;
    rest->next = b->next;
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = rounded;
    PoolFor(rest->small).insert(rest);
  }
  b->allocated = true;
  b->recorded = false;
  b->stream = stream;
  b->requested = requested;
  allocated_[b->ptr] = b;
  stats_.allocated_bytes += b->size;
  stats_.requested_bytes += requested;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  ++stats_.num_allocs;
}

Result<void*> CachingAllocator::Allocate(size_t bytes, StreamId stream) {
  DS_CHECK(stream != kAnyStream);
  std::lock_guard<std::mutex> lock(mu_);
  size_t rounded = RoundUp(std::max<size_t>(bytes, 1), kMinBlockSize);
  bool small = UseSmallPool(rounded);
  Block* b = FindFree(small, rounded, stream);
  if (b == nullptr && !config_.preallocate) b = NewSegment(small, rounded);
  if (b == nullptr) {
    // Out of memory: make every cached block reusable, hand fully free
    // segments back to the heap and try once more.
    ++stats_.num_oom_retries;
    SynchronizeLocked();
    if (!config_.preallocate) ReleaseFreeSegments();
    b = FindFree(small, rounded, stream);
    if (b == nullptr && !config_.preallocate) b = NewSegment(small, rounded);
  }
  if (b == nullptr) {
    ++stats_.num_oom_failures;
    return OomError(bytes, rounded, config_.preallocate || last_oom_limit_);
  }
  SplitAndUse(b, rounded, bytes, stream);
  return static_cast<void*>(b->ptr);
}

void CachingAllocator::InsertFree(Block* b) {
  Pool& pool = PoolFor(b->small);
  auto mergeable = [&](Block* n) {
    return n != nullptr && !n->allocated && !n->recorded &&
           Compatible(n->stream, b->stream, kAnyStream);
  };
  if (mergeable(b->prev)) {
    Block* p = b->prev;
    pool.erase(p);
    p->stream = p->stream == kAnyStream ? b->stream : p->stream;
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    delete b;
    b = p;
  }
  if (mergeable(b->next)) {
    Block* n = b->next;
    pool.erase(n);
    b->stream = b->stream == kAnyStream ? n->stream : b->stream;
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    delete n;
  }
  pool.insert(b);
}

void CachingAllocator::Free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocated_.find(ptr);
  DS_CHECK(it != allocated_.end());
  Block* b = it->second;
  allocated_.erase(it);
  stats_.allocated_bytes -= b->size;
  stats_.requested_bytes -= b->requested;
  ++stats_.num_frees;
  b->allocated = false;
  b->requested = 0;
  if (b->recorded) {
    held_.push_back(b);  // other streams may still use it: wait for Synchronize()
    return;
  }
  InsertFree(b);  // tagged with its allocation stream
}

void CachingAllocator::RecordStream(void* ptr, StreamId stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocated_.find(ptr);
  DS_CHECK(it != allocated_.end());
  if (it->second->stream != stream) it->second->recorded = true;
}

void CachingAllocator::Retag(bool all, StreamId stream) {
  if (all) held_.clear();
  small_pool_.clear();
  large_pool_.clear();
  auto is_free = [&](const Block* b) { return !b->allocated && (all || !b->recorded); };
  for (auto& seg : segments_) {
    for (Block* b = seg->head; b != nullptr; b = b->next) {
      if (!is_free(b)) continue;
      b->recorded = false;
      if (all || b->stream == stream) b->stream = kAnyStream;
      // Coalesce the run of free blocks that follows, as far as the tags allow.
      while (b->next != nullptr && is_free(b->next)) {
        Block* n = b->next;
        StreamId nt = (all || n->stream == stream) ? kAnyStream : n->stream;
        if (!Compatible(b->stream, nt, kAnyStream)) break;
        if (b->stream == kAnyStream) b->stream = nt;
        b->size += n->size;
        b->next = n->next;
        if (n->next) n->next->prev = b;
        delete n;
      }
      PoolFor(b->small).insert(b);
    }
  }
}

void CachingAllocator::SynchronizeLocked() {
  heap_->Synchronize();
  Retag(true, 0);
}

void CachingAllocator::MarkStreamIdle(StreamId stream) {
  std::lock_guard<std::mutex> lock(mu_);
  Retag(false, stream);
}

void CachingAllocator::Synchronize() {
  std::lock_guard<std::mutex> lock(mu_);
  SynchronizeLocked();
}

size_t CachingAllocator::ReleaseFreeSegments() {
  size_t released = 0;
  std::vector<std::unique_ptr<Segment>> keep;
  for (auto& seg : segments_) {
    Block* h = seg->head;
    bool whole_free = !config_.preallocate && !h->allocated && !h->recorded && h->next == nullptr;
    if (!whole_free) {
      keep.push_back(std::move(seg));
      continue;
    }
    PoolFor(h->small).erase(h);
    delete h;
    heap_->Free(seg->ptr);
    released += seg->size;
    stats_.reserved_bytes -= seg->size;
    --stats_.num_segments;
    ++stats_.num_segment_frees;
  }
  segments_ = std::move(keep);
  return released;
}

size_t CachingAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mu_);
  SynchronizeLocked();
  return ReleaseFreeSegments();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingAllocator::ResetPeakStats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

Status CachingAllocator::OomError(size_t requested, size_t rounded, bool limit_hit) const {
  std::string limit = stats_.limit_bytes ? FormatBytes(stats_.limit_bytes) : "none";
  std::string why =
      config_.preallocate
          ? "the preallocated pool is exhausted; raise the memory limit or use grow-on-demand"
      : limit_hit ? "the per-process memory limit is reached; raise it or use fewer workers"
                  : fmt::format(
                        "the device has no free memory left ({} free); other processes "
                        "or models hold it",
                        FormatBytes(heap_->FreeBytes()));
  return DS_ERR(kResourceExhausted,
                "out of memory on {}: cannot allocate {} ({} rounded); this process has {} "
                "allocated, {} reserved, limit {}: {}",
                heap_->Name(), FormatBytes(requested), FormatBytes(rounded),
                FormatBytes(stats_.allocated_bytes), FormatBytes(stats_.reserved_bytes), limit,
                why);
}

}  // namespace ds
