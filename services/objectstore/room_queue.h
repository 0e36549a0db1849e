// RoomQueue: the object store's requests for room in a device's memory that did not fit when
// they came (backpressure): reservations (CreateObject), and executors' puts, whose bytes
// wait with them. Each device has one queue, strictly in arrival order, so that a small
// request never overtakes a large one: the executor sends them in the island scheduler's
// order. A request that arrives while its device's queue is not empty joins it even if it
// would fit. Host-arena requests never wait, and a request that can never fit or is over
// its owner's quota is refused at once, not queued: at its turn it would only be refused.
//
// After a free the store takes, one at a time, the heads that no longer wait (TakeReady),
// and answers each before it takes the next: answering one may free memory again (a refusal
// frees an object released before it existed), so a batch taken at once could be stale.
//
// Pure: no socket, no thread; it creates shards in the Directory it is given, and returns
// what the store must answer. Not thread-safe: the store's event loop owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "atoll/status.h"
#include "common/proto/store_messages.h"
#include "services/objectstore/directory.h"
#include "services/objectstore/reply_to.h"

namespace atl::store {

class RoomQueue {
 public:
  // A device shard waiting for room: a reservation, or a put whose bytes wait with it.
  struct Pending {
    ReplyTo to;
    proto::CreateObject request;
    std::optional<std::vector<std::byte>> put;
  };
  // A request out of its queue: its shard created, or Create's error when it is not
  // OutOfMemory (its owner's other reservations took its quota while it waited, ...).
  struct Ready {
    Pending pending;
    Result<ShardInfo> created;
  };

  // What Admit did with a request.
  enum class Outcome {
    kCreated,  // its shard was created now
    kQueued,   // it waits for room
    kRefused,  // for good: it can never fit, or is over its owner's quota
  };
  struct Admitted {
    Outcome outcome = Outcome::kCreated;
    ReplyTo to;           // kCreated, kRefused: the request's, given back to answer it
    uint64_t nbytes = 0;  // the shard's size
    ShardInfo created;    // kCreated: where it lies
    size_t ahead = 0;     // kQueued: how many were queued before it
    Status refusal;       // kRefused: why (OutOfMemory naming the sizes, ResourceExhausted)
  };

  // `directory` must outlive the queue; `host` names this store in refusals.
  RoomQueue(Directory& directory, std::string host)
      : directory_(directory), host_(std::move(host)) {}

  // Admits a request for room (a reservation, or a put with its bytes in `put`). A host-arena
  // shard is created now or fails. A device shard that can never fit, or would take its
  // owner over its quota, is refused; one is created now only when no request of its device
  // waits and it fits, else it waits behind them (its bytes copied). Errors (a bad dtype,
  // shape or device, Create's errors other than room and quota) leave nothing queued.
  Result<Admitted> Admit(ReplyTo to, const proto::CreateObject& request,
                         std::optional<std::span<const std::byte>> put);
  // Whether requests wait for room in `device`'s memory: a new one must queue behind them.
  bool Queued(int32_t device) const;
  // Takes the first head, in device order, that no longer waits: its shard is created now
  // (or cannot be, for a reason other than room). Empty when every head still waits.
  std::optional<Ready> TakeReady();
  // Takes the requests of `client`, whose objects were collected.
  std::vector<Pending> TakeClient(uint64_t client);
  // Takes every request: the executor that made them is lost.
  std::vector<Pending> TakeAll();

  // Why (object, shard) may not be sealed yet when memory is short, for a read that timed
  // out: its own request waits for room (and how many are ahead of it), or some device has
  // requests waiting (its producer's may be held up before it reaches the store); with the
  // pool's use and a remedy. "" when no request waits for room.
  std::string DescribeWait(uint64_t object, uint32_t shard) const;

  size_t size() const;

 private:
  // Queues a request (a put's bytes are copied) behind those of its device; returns how
  // many were queued ahead of it.
  size_t Enqueue(ReplyTo to, proto::CreateObject request,
                 std::optional<std::span<const std::byte>> put);

  Directory& directory_;
  const std::string host_;
  std::map<int32_t, std::deque<Pending>> queues_;  // by device, in arrival order
};

}  // namespace atl::store
