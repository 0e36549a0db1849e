// The event stream. Every service publishes events through the RM's XSUB/XPUB proxy as
// two frames: [topic][msgpack map]. Topics are dotted and prefixed by area: "device.",
// "slice.", "program.", "gang.", "object.", "error.". Every map holds "ts_us" (wall-clock
// microseconds since the epoch) and "src" (the publishing service), then the event's own
// fields. Events are rare enough (per gang, not per tuple) for maps to be the right form.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "atoll/status.h"

namespace atl {

using EventValue = std::variant<int64_t, uint64_t, double, bool, std::string>;
using EventFields = std::vector<std::pair<std::string, EventValue>>;

// Publishes events from one thread. A publisher that is not connected drops events (the
// stream is for watching; no service depends on it for correctness).
class EventPublisher {
 public:
  EventPublisher(zmq::context_t& context, std::string source);
  Status Connect(const std::string& events_in_endpoint);
  void Publish(std::string_view topic, const EventFields& fields);

 private:
  std::string source_;
  zmq::socket_t socket_;
  bool connected_ = false;
};

struct Event {
  std::string topic;
  nlohmann::json fields;  // including ts_us and src
};

// Decodes the two frames of an event; malformed bytes give InvalidArgument.
Result<Event> DecodeEvent(const zmq::message_t& topic, const zmq::message_t& body);

// "18:41:35.123456 program.submitted   src=client/1 run=5 nodes=4"
std::string FormatEventLine(const Event& event);

// Wall-clock microseconds since the epoch.
int64_t NowMicros();

}  // namespace atl
