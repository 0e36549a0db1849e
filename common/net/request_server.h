// Serving requests on a ROUTER socket, the same way in every service: drain what is
// waiting, parse it, hand it to the service's handler. A message that does not parse, or a
// request whose handler returns an error, is answered with an Error reply naming what was
// wrong and published as an `error.<service>` event; the service goes on serving.
#pragma once

#include <functional>
#include <string>

#include <zmq.hpp>

#include "common/net/events.h"
#include "common/proto/codec.h"

namespace atl::net {

// A handler replies to a request itself on success and returns OK; when it returns an
// error, ServeRequests replies with that error.
using RequestHandler = std::function<Status(proto::Incoming&)>;

// Handles at most `max_messages` waiting messages without blocking; returns how many.
int ServeRequests(zmq::socket_t& router, EventPublisher& events, const std::string& error_topic,
                  const RequestHandler& handle, int max_messages = 256);

}  // namespace atl::net
