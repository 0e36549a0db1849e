// SpinCondition: a condition variable whose waiters first spin a little before they sleep.
//
// Waking a sleeping thread costs 10-50 us on the machines atoll runs on (the other vCPU may
// have halted), several times the work of a chained computation. The threads that hand work
// to each other on the hot path (the shards of a gang meeting in an all-reduce, a device
// thread awaiting its next item) usually hear from each other within microseconds, so a
// waiter may look again for up to `spin` before it blocks, yielding the CPU between looks.
// That pays only where each waiter has a core to itself: on 2 cores shared by a cluster the
// spinning threads took the cores from those with work (see the design notes), so the
// executors' default is 0, which blocks at once like std::condition_variable.
//
// Thread-safe. Use it as std::condition_variable: change the shared state under the mutex,
// then NotifyAll (under the mutex or not).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace atl {

class SpinCondition {
 public:
  // `spin`: how long a waiter looks again before it blocks; 0 blocks at once.
  explicit SpinCondition(std::chrono::microseconds spin) : spin_(spin) {}

  void NotifyAll() {
    epoch_.fetch_add(1, std::memory_order_release);
    cv_.notify_all();
  }

  // Waits until `ready()` (called with `lock` held) or `timeout` has passed; returns ready().
  template <typename Ready>
  bool WaitFor(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::duration timeout,
               Ready ready) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    if (ready() || Spin(lock, deadline, ready)) return true;
    return cv_.wait_until(lock, deadline, ready);
  }

  // Waits until `ready()`, with no bound: for a thread that is always woken at shutdown.
  template <typename Ready>
  void Wait(std::unique_lock<std::mutex>& lock, Ready ready) {
    if (ready() || Spin(lock, std::chrono::steady_clock::time_point::max(), ready)) return;
    cv_.wait(lock, ready);
  }

 private:
  // Looks again, unlocked, at each notification until `ready()` or until `spin_` (or
  // `deadline`) has passed; `lock` is held again on return. True when ready.
  template <typename Ready>
  bool Spin(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point deadline,
            Ready& ready) {
    if (spin_.count() <= 0) return false;
    const auto until = std::min(deadline, std::chrono::steady_clock::now() + spin_);
    while (std::chrono::steady_clock::now() < until) {
      const uint64_t seen = epoch_.load(std::memory_order_acquire);
      lock.unlock();
      while (epoch_.load(std::memory_order_acquire) == seen &&
             std::chrono::steady_clock::now() < until) {
        std::this_thread::yield();
      }
      lock.lock();
      if (ready()) return true;
    }
    return false;
  }

  const std::chrono::microseconds spin_;
  std::atomic<uint64_t> epoch_{0};
  std::condition_variable cv_;
};

}  // namespace atl
