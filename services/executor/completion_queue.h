// CompletionQueue: what device threads hand back to the executor's loop: finished shards
// (their outputs still to be sent) and collective partials to send to other hosts. A push
// to an empty queue wakes the loop through an eventfd, which the loop polls; later pushes
// join what that wake-up takes (a write(2) a push cost a microsecond or more, on threads
// whose next shard waits).
//
// Thread-safe: any thread pushes; the loop takes. Open, the destructor and fd() belong to
// the loop thread.
#pragma once

#include <string>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/base/mutex.h"
#include "common/proto/protocol.h"
#include "services/executor/work_item.h"

namespace atl::executor {

class CompletionQueue {
 public:
  // A tuple a device thread wants sent (a collective partial); the loop sends it.
  struct OutgoingTuple {
    std::string endpoint;
    proto::TupleHeader header;
    Result<Tensor> value;  // an error travels as the tuple's error
  };
  // Everything pushed since the last Take, each kind in push order.
  struct Batch {
    std::vector<Completion> done;
    std::vector<OutgoingTuple> outgoing;
  };

  CompletionQueue() = default;
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;
  ~CompletionQueue();  // closes the eventfd

  // Creates the eventfd; Internal when the system refuses.
  Status Open();
  // Readable while something waits to be taken (after Open).
  int fd() const { return fd_; }

  void Push(Completion done);
  void Push(OutgoingTuple tuple);
  // Takes everything pushed so far and clears the eventfd.
  Batch Take();

 private:
  bool Empty() const REQUIRES(mu_) { return pending_.done.empty() && pending_.outgoing.empty(); }
  void Wake();

  int fd_ = -1;
  Mutex mu_;
  Batch pending_ GUARDED_BY(mu_);
};

}  // namespace atl::executor
