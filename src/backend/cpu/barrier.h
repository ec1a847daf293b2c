// Barrier for the per-timestep synchronisation of the recurrence threads.
//
// `#pragma omp barrier` spins for a long time (libgomp's GOMP_SPINCOUNT) before
// sleeping; when the machine is oversubscribed (other processes, CPU quotas),
// a spinning waiter burns the time slice its partner needs and a training step
// gets many times slower. This barrier spins briefly (the partner normally
// arrives within microseconds) and then yields the CPU on every further check.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ds::cpu {

class SpinBarrier {
 public:
  explicit SpinBarrier(int n) : n_(n) {}
  SpinBarrier(const SpinBarrier&) = delete;
  SpinBarrier& operator=(const SpinBarrier&) = delete;

  void Wait() {
    if (n_ <= 1) return;
    const uint32_t gen = gen_.load(std::memory_order_acquire);
    if (count_.fetch_add(1, std::memory_order_acq_rel) == n_ - 1) {
      count_.store(0, std::memory_order_relaxed);
      gen_.store(gen + 1, std::memory_order_release);
      return;
    }
    for (int i = 0; gen_.load(std::memory_order_acquire) == gen; ++i) {
      if (i < kSpins) {
#if defined(__x86_64__)
        _mm_pause();
#endif
      } else {
        std::this_thread::yield();
      }
    }
  }

 private:
  static constexpr int kSpins = 4000;  // ~10-40 us of pause before yielding
  const int n_;
  alignas(64) std::atomic<int> count_{0};
  alignas(64) std::atomic<uint32_t> gen_{0};
};

}  // namespace ds::cpu
