#include "common/net/event_reader.h"

#include <ctime>

#include <fmt/format.h>
#include <msgpack.hpp>

#include "common/base/utf8.h"
#include "common/proto/codec.h"

namespace atl {

namespace {

nlohmann::json ToJson(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL:
      return nullptr;
    case msgpack::type::BOOLEAN:
      return o.via.boolean;
    case msgpack::type::POSITIVE_INTEGER:
      return o.via.u64;
    case msgpack::type::NEGATIVE_INTEGER:
      return o.via.i64;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      return o.via.f64;
    case msgpack::type::STR:
      // Made valid UTF-8 here, once, so that every watcher can write the event as JSON.
      return ToValidUtf8({o.via.str.ptr, o.via.str.size});
    case msgpack::type::ARRAY: {
      auto arr = nlohmann::json::array();
      for (uint32_t i = 0; i < o.via.array.size; ++i) arr.push_back(ToJson(o.via.array.ptr[i]));
      return arr;
    }
    case msgpack::type::MAP: {
      auto obj = nlohmann::json::object();
      for (uint32_t i = 0; i < o.via.map.size; ++i) {
        const auto& kv = o.via.map.ptr[i];
        if (kv.key.type != msgpack::type::STR) throw std::runtime_error("map key is not a string");
        obj[ToValidUtf8({kv.key.via.str.ptr, kv.key.via.str.size})] = ToJson(kv.val);
      }
      return obj;
    }
    default:
      throw std::runtime_error("unsupported msgpack type in event");
  }
}

}  // namespace

Result<Event> DecodeEvent(const zmq::message_t& topic, const zmq::message_t& body) {
  Event event;
  event.topic = ToValidUtf8(topic.to_string_view());
  try {
    auto handle = msgpack::unpack(static_cast<const char*>(body.data()), body.size(), nullptr,
                                  nullptr, proto::UntrustedLimit(body.size()));
    if (handle.get().type != msgpack::type::MAP) {
      return InvalidArgument("event body is not a map");
    }
    event.fields = ToJson(handle.get());
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("malformed event: ") + e.what());
  }
  return event;
}

std::string FormatEventLine(const Event& event) {
  std::string when = "-";
  if (event.fields.contains("ts_us") && event.fields["ts_us"].is_number_integer()) {
    const int64_t us = event.fields["ts_us"].get<int64_t>();
    const std::time_t secs = us / 1000000;
    std::tm tm{};
    localtime_r(&secs, &tm);
    when = fmt::format("{:02}:{:02}:{:02}.{:06}", tm.tm_hour, tm.tm_min, tm.tm_sec, us % 1000000);
  }
  std::string line = fmt::format("{} {:<20}", when, event.topic);
  for (const auto& [key, value] : event.fields.items()) {
    if (key == "ts_us") continue;
    line += " " + key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
  }
  return line;
}

}  // namespace atl
