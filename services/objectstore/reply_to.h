// ReplyTo: where the object store's answer to a request goes, kept while the request waits
// (a read for a shard not sealed yet, a reservation waiting for room): the peer's routing id
// on the store's ROUTER socket and the request id it used. Only bytes, no socket, so the
// parts that keep waiting requests (WaitingReads, RoomQueue) are tested without one.
#pragma once

#include <cstdint>

#include <zmq.hpp>

namespace atl::store {

struct ReplyTo {
  zmq::message_t routing_id;
  uint64_t request_id = 0;
};

}  // namespace atl::store
