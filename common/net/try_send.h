// TrySend: one attempt to hand a message to a socket that never waits on a send (sndtimeo
// 0), for a sender that keeps what a peer's full queue refuses and tries again later, in
// order (the executors' tuple outbox, the scheduler's links to its executors).
//
// ZeroMQ refuses a message whole, at its first frame, and leaves a refused frame as it was;
// once the first frame is taken, the rest of the message is too. So a refused message can
// be kept as it is and sent later.
#pragma once

#include <zmq.hpp>

#include "atoll/status.h"
#include "common/net/transport.h"

namespace atl::net {

// True when `frames` went whole (counted as one message of `kind`); false when the peer's
// full queue refused them untouched; an error when ZeroMQ failed after taking part of them.
Result<bool> TrySend(zmq::socket_t& socket, Frames& frames, proto::Kind kind);

}  // namespace atl::net
