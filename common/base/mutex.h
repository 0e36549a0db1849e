// Mutex and MutexLock: std::mutex and a lock on it, annotated for clang's thread-safety
// analysis (thread_annotations.h). libstdc++'s own types carry no annotations, so fields
// GUARDED_BY a std::mutex could not be checked.
//
// Example:
//   Mutex mu_;
//   int count_ GUARDED_BY(mu_) = 0;
//   void Add() {
//     MutexLock lock(mu_);
//     ++count_;
//     cv_.wait(lock.native(), ...);  // a std::condition_variable waits on native()
//   }
#pragma once

#include <mutex>

#include "common/base/thread_annotations.h"

namespace atl {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds a Mutex from construction to destruction, like std::unique_lock: Unlock and Lock
// let go of it and take it again in between.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : lock_(mu.mu_) {}
  ~MutexLock() RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() { lock_.unlock(); }
  void Lock() ACQUIRE() { lock_.lock(); }

  // For std::condition_variable (and SpinCondition), whose waits let go of the mutex and
  // take it again before they return: to the analysis it stays held throughout.
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace atl
