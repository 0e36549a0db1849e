// The event stream. Every service publishes events through the RM's XSUB/XPUB proxy as
// two frames: [topic][msgpack map]. Topics are dotted and prefixed by area: "device.",
// "slice.", "program.", "gang.", "object.", "error.". Every map holds "ts_us" (wall-clock
// microseconds since the epoch) and "src" (the publishing service), then the event's own
// fields. Events are rare enough (per gang, not per tuple) for maps to be the right form.
// Watchers decode them with event_reader.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <zmq.hpp>

#include "atoll/status.h"
#include "common/net/event_fields.h"

namespace atl {

// Publishes events from one thread. A publisher that is not connected drops events (the
// stream is for watching; no service depends on it for correctness).
class EventPublisher {
 public:
  EventPublisher(zmq::context_t& context, std::string source);
  Status Connect(const std::string& events_in_endpoint);
  // `ts_us`: when it happened (NowMicros), for an event published after more urgent work
  // that followed it (a result's readers answered first); 0: now.
  void Publish(std::string_view topic, const EventFields& fields, int64_t ts_us = 0);

 private:
  std::string source_;
  zmq::socket_t socket_;
  bool connected_ = false;
};

// An event's second frame: the msgpack map of "ts_us" (`ts_us`, or now when 0), "src"
// (`source`) and `fields`.
zmq::message_t EncodeEventBody(std::string_view source, const EventFields& fields,
                               int64_t ts_us = 0);

// Wall-clock microseconds since the epoch.
int64_t NowMicros();

}  // namespace atl
