#include "kernels/thread_team.h"

namespace atl::kernels::internal {

ThreadTeam::ThreadTeam(int helpers) {
  threads_.reserve(static_cast<size_t>(helpers));
  for (int i = 0; i < helpers; ++i) threads_.emplace_back([this, i] { Help(i); });
}

ThreadTeam::~ThreadTeam() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ThreadTeam::Run(int parts, const std::function<void(int)>& part) {
  {
    std::lock_guard lock(mu_);
    ++job_;
    parts_ = parts;
    part_ = &part;
    pending_ = parts - 1;
  }
  if (parts > 1) work_.notify_all();
  part(0);
  std::unique_lock lock(mu_);
  done_.wait(lock, [this] { return pending_ == 0; });
  part_ = nullptr;
}

void ThreadTeam::Help(int index) {
  uint64_t seen = 0;
  std::unique_lock lock(mu_);
  while (true) {
    work_.wait(lock, [&] { return stop_ || job_ != seen; });
    if (stop_) return;
    seen = job_;
    if (index + 1 >= parts_) continue;  // not needed for this job
    const std::function<void(int)>& part = *part_;
    lock.unlock();
    part(index + 1);
    lock.lock();
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace atl::kernels::internal
