// CheckpointWorker: the object store's one thread for checkpoint file I/O, so that a write
// of gigabytes (or a slow disk's fsync) never holds up the event loop: the loop goes on
// serving requests and heartbeating the RM, which would otherwise declare the store lost
// once a write outlasted the liveness window (docs/design-notes.md, "Checkpoints").
//
// A job runs on the worker and returns its completion, which the loop runs: the job
// touches only the disk and memory the loop pinned for it (Directory::Pin); the completion
// sends the reply and changes the directory. Jobs run one at a time in the order posted,
// so one client's save, commit and load keep their order; completions run in the same
// order. A push of a completion wakes the loop through an eventfd (fd()).
//
// Stop() (and the destructor) ends the thread within one chunk of the job in progress:
// the job sees `stopping` set (CheckpointDir stops between 8 MiB chunks), jobs not started
// are dropped, and so are completions not run yet: the loop has ended.
//
// Thread-safe: Post, RunCompletions and Stop belong to the loop's thread; the job runs on
// the worker's.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "atoll/status.h"
#include "common/base/mutex.h"

namespace atl::store {

class CheckpointWorker {
 public:
  using Completion = std::function<void()>;
  using Job = std::function<Completion(const std::atomic<bool>& stopping)>;

  CheckpointWorker() = default;
  CheckpointWorker(const CheckpointWorker&) = delete;
  CheckpointWorker& operator=(const CheckpointWorker&) = delete;
  ~CheckpointWorker();  // Stop()

  // Makes the eventfd and starts the thread; Internal when the system refuses. A store
  // starts it at its first checkpoint request: a process of hundreds of simulated hosts
  // that never save one has no thread per store.
  Status Start();
  bool started() const { return thread_.joinable(); }
  // Readable while completions wait to be run (after Start).
  int fd() const { return fd_; }
  // Jobs posted and not completed yet (their completions not run).
  size_t in_flight() const { return in_flight_; }

  void Post(Job job);
  // Runs the completions of the jobs finished so far, in order; returns how many.
  size_t RunCompletions();
  // Stops the job in progress at its next chunk, drops the rest, joins the thread.
  void Stop();

 private:
  void Work();

  int fd_ = -1;
  size_t in_flight_ = 0;  // the loop's
  std::atomic<bool> stopping_{false};
  Mutex mu_;
  std::condition_variable posted_;
  std::deque<Job> jobs_ GUARDED_BY(mu_);
  std::vector<Completion> done_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace atl::store
