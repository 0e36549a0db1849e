// Reading the event stream (see events.h): an event's two frames decoded into JSON fields,
// and the one-line human form that `atoll watch` prints.
#pragma once

#include <string>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "atoll/status.h"

namespace atl {

struct Event {
  std::string topic;
  nlohmann::json fields;  // including ts_us and src
};

// Decodes the two frames of an event; malformed bytes give InvalidArgument.
Result<Event> DecodeEvent(const zmq::message_t& topic, const zmq::message_t& body);

// "18:41:35.123456 program.submitted   src=client/1 run=5 nodes=4"
std::string FormatEventLine(const Event& event);

}  // namespace atl
