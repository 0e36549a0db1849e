#include "services/executor/completion_queue.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace atl::executor {

CompletionQueue::~CompletionQueue() {
  if (fd_ >= 0) close(fd_);
}

Status CompletionQueue::Open() {
  fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd_ < 0) return Internal(std::string("eventfd: ") + std::strerror(errno));
  return Status::Ok();
}

void CompletionQueue::Push(Completion done) {
  bool was_empty;
  {
    MutexLock lock(mu_);
    was_empty = Empty();
    pending_.done.push_back(std::move(done));
  }
  if (was_empty) Wake();
}

void CompletionQueue::Push(OutgoingTuple tuple) {
  bool was_empty;
  {
    MutexLock lock(mu_);
    was_empty = Empty();
    pending_.outgoing.push_back(std::move(tuple));
  }
  if (was_empty) Wake();
}

CompletionQueue::Batch CompletionQueue::Take() {
  // Cleared before the swap: a push after the swap finds the queue empty and wakes the
  // loop again; one before it is taken now.
  uint64_t count = 0;
  [[maybe_unused]] auto n = read(fd_, &count, sizeof(count));
  Batch batch;
  {
    MutexLock lock(mu_);
    batch.done.swap(pending_.done);
    batch.outgoing.swap(pending_.outgoing);
  }
  return batch;
}

void CompletionQueue::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] auto n = write(fd_, &one, sizeof(one));
}

}  // namespace atl::executor
