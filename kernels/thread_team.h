// ThreadTeam: a calling thread and its own helper threads, which run the parts of one job
// together (the blocks of a matmul, see kernels/matmul_threads.h). One team belongs to one
// calling thread: Run is not reentrant and must not be called from two threads at once.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace atl::kernels::internal {

class ThreadTeam {
 public:
  // Starts `helpers` threads (>= 0), which wait for work.
  explicit ThreadTeam(int helpers);
  ~ThreadTeam();  // stops and joins the helpers
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  int helpers() const { return static_cast<int>(threads_.size()); }

  // Runs part(0) .. part(parts - 1), part 0 on the calling thread and part i on helper i - 1,
  // and returns when all have returned. parts must be in [1, helpers() + 1].
  void Run(int parts, const std::function<void(int)>& part);

 private:
  void Help(int index);

  std::mutex mu_;
  std::condition_variable work_;                    // helpers wait here for a new job or stop_
  std::condition_variable done_;                    // Run waits here for pending_ to reach 0
  uint64_t job_ = 0;                                // guarded by mu_; counts the jobs started
  int parts_ = 0;                                   // guarded by mu_; the current job's parts
  const std::function<void(int)>* part_ = nullptr;  // guarded by mu_; the current job
  int pending_ = 0;    // guarded by mu_; helpers' parts of the current job not yet done
  bool stop_ = false;  // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace atl::kernels::internal
