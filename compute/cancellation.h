// Cooperative cancellation of a running shard. Whoever runs a shard owns an atomic flag and
// sets it to stop the shard; RunFunction checks it between ops, and a long kernel (spin)
// while it runs. The op table calls every kernel with the same (op, operands) signature,
// so the flag reaches such a kernel through the thread that runs it: RunFunction makes it
// the thread's current flag for its duration (ScopedCancelFlag).
#pragma once

#include <atomic>

namespace atl::compute {

// The flag of the shard running on this thread; nullptr when none can be cancelled.
const std::atomic<bool>* CurrentCancelFlag();

// Makes `flag` this thread's current flag until destroyed, then restores the previous one.
class ScopedCancelFlag {
 public:
  explicit ScopedCancelFlag(const std::atomic<bool>* flag);
  ~ScopedCancelFlag();
  ScopedCancelFlag(const ScopedCancelFlag&) = delete;
  ScopedCancelFlag& operator=(const ScopedCancelFlag&) = delete;

 private:
  const std::atomic<bool>* previous_;
};

}  // namespace atl::compute
