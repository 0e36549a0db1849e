// Serving requests on a ROUTER socket, the same way in every service: drain what is
// waiting, parse it, hand it to the service's handler. A message that does not parse, or a
// request whose handler returns an error, is answered with an Error reply naming what was
// wrong and published as an `error.<service>` event, one per message; the service goes on
// serving. Its log gets the rejections rate-limited per peer (a RejectionLog of the service's,
// naming each peer by its routing id in hex), so that a flood of bad messages cannot flood it.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include <zmq.hpp>

#include "common/net/events.h"
#include "common/net/rejection_log.h"
#include "common/proto/codec.h"

namespace atl::net {

// A handler replies to a request itself on success and returns OK; when it returns an
// error, ServeRequests replies with that error.
using RequestHandler = std::function<Status(proto::Incoming&)>;

// Reports a request refused as ServeRequests does (the log, rate-limited per peer, and the
// `error_topic` event), for a service that answers it later, once work done on another
// thread failed; the service sends the Error reply itself.
void ReportRejection(EventPublisher& events, const std::string& error_topic, RejectionLog& rejected,
                     std::string_view routing_id, proto::Kind kind, const Status& status);

// Handles at most `max_messages` waiting messages without blocking; returns how many.
int ServeRequests(zmq::socket_t& router, EventPublisher& events, const std::string& error_topic,
                  RejectionLog& rejected, const RequestHandler& handle, int max_messages = 256);

}  // namespace atl::net
