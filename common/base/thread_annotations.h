// Clang's thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html),
// so that "guarded by mu_" is checked at compile time rather than written in a comment:
//   Mutex mu_;
//   std::deque<Item> queue_ GUARDED_BY(mu_);
//   void PopLocked() REQUIRES(mu_);
// With clang and -Wthread-safety (scripts/thread_safety.sh), reading queue_ or calling
// PopLocked without holding mu_ is an error. Other compilers see nothing.
#pragma once

#if defined(__clang__)
#define ATOLL_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define ATOLL_THREAD_ANNOTATION(x)
#endif

// A type that is a lock (Mutex).
#define CAPABILITY(x) ATOLL_THREAD_ANNOTATION(capability(x))
// A type that holds a lock for its scope (MutexLock).
#define SCOPED_CAPABILITY ATOLL_THREAD_ANNOTATION(scoped_lockable)
// A field read or written only with the lock held.
#define GUARDED_BY(x) ATOLL_THREAD_ANNOTATION(guarded_by(x))
// A pointer whose pointee is read or written only with the lock held.
#define PT_GUARDED_BY(x) ATOLL_THREAD_ANNOTATION(pt_guarded_by(x))
// A function called with the lock held (and returning with it held).
#define REQUIRES(...) ATOLL_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// A function called without the lock (it takes it itself).
#define EXCLUDES(...) ATOLL_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// A function that takes the lock, or releases it.
#define ACQUIRE(...) ATOLL_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) ATOLL_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) ATOLL_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// A function the analysis does not check (say why where it is used).
#define NO_THREAD_SAFETY_ANALYSIS ATOLL_THREAD_ANNOTATION(no_thread_safety_analysis)
