#include "common/events.h"

#include <chrono>
#include <ctime>

#include <fmt/format.h>
#include <msgpack.hpp>

#include "common/codec.h"
#include "common/transport.h"

namespace atl {

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

EventPublisher::EventPublisher(zmq::context_t& context, std::string source)
    : source_(std::move(source)), socket_(net::MakeSocket(context, zmq::socket_type::pub)) {
  // Events must never block a service: beyond the high-water mark they are dropped.
  socket_.set(zmq::sockopt::sndtimeo, 0);
}

Status EventPublisher::Connect(const std::string& endpoint) {
  ATOLL_RETURN_IF_ERROR(net::Connect(socket_, endpoint));
  connected_ = true;
  return Status::Ok();
}

void EventPublisher::Publish(std::string_view topic, const EventFields& fields) {
  if (!connected_) return;
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  packer.pack_map(static_cast<uint32_t>(fields.size() + 2));
  packer.pack(std::string_view("ts_us"));
  packer.pack(NowMicros());
  packer.pack(std::string_view("src"));
  packer.pack(source_);
  for (const auto& [key, value] : fields) {
    packer.pack(key);
    std::visit([&](const auto& v) { packer.pack(v); }, value);
  }
  try {
    socket_.send(zmq::buffer(topic), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    socket_.send(zmq::message_t(buffer.data(), buffer.size()), zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
    // Dropped: see the class comment.
  }
}

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
      return std::string(o.via.str.ptr, o.via.str.size);
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
        obj[std::string(kv.key.via.str.ptr, kv.key.via.str.size)] = ToJson(kv.val);
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
  event.topic = topic.to_string();
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
  if (event.fields.contains("ts_us") && event.fields["ts_us"].is_number()) {
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
