#include "services/objectstore/checkpoint_worker.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

namespace atl::store {

CheckpointWorker::~CheckpointWorker() {
  Stop();
  if (fd_ >= 0) close(fd_);
}

Status CheckpointWorker::Start() {
  fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd_ < 0) return Internal(std::string("eventfd: ") + std::strerror(errno));
  try {
    thread_ = std::thread([this] { Work(); });
  } catch (const std::system_error& e) {
    close(fd_);
    fd_ = -1;
    return Internal(std::string("cannot start the checkpoint thread: ") + e.what());
  }
  return Status::Ok();
}

void CheckpointWorker::Post(Job job) {
  {
    MutexLock lock(mu_);
    jobs_.push_back(std::move(job));
  }
  ++in_flight_;
  posted_.notify_one();
}

size_t CheckpointWorker::RunCompletions() {
  // Cleared before the swap: a completion pushed after it wakes the loop again.
  uint64_t count = 0;
  [[maybe_unused]] auto n = read(fd_, &count, sizeof(count));
  std::vector<Completion> done;
  {
    MutexLock lock(mu_);
    done.swap(done_);
  }
  for (Completion& completion : done) {
    --in_flight_;
    if (completion) completion();
  }
  return done.size();
}

void CheckpointWorker::Stop() {
  {
    MutexLock lock(mu_);
    stopping_.store(true);
    jobs_.clear();
  }
  posted_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void CheckpointWorker::Work() {
  while (true) {
    Job job;
    {
      MutexLock lock(mu_);
      // The predicate runs with mu_ held (wait takes it again first): unseen by the analysis.
      posted_.wait(lock.native(), [this]() NO_THREAD_SAFETY_ANALYSIS {
        return stopping_.load() || !jobs_.empty();
      });
      if (stopping_.load()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    Completion completion = job(stopping_);
    if (stopping_.load()) return;  // the loop has ended: nobody runs it
    {
      MutexLock lock(mu_);
      done_.push_back(std::move(completion));
    }
    const uint64_t one = 1;
    [[maybe_unused]] auto n = write(fd_, &one, sizeof(one));
  }
}

}  // namespace atl::store
