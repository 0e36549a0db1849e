#include "common/net/events.h"

#include <chrono>

#include <msgpack.hpp>

#include "common/net/transport.h"

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

zmq::message_t EncodeEventBody(std::string_view source, const EventFields& fields, int64_t ts_us) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  packer.pack_map(static_cast<uint32_t>(fields.size() + 2));
  packer.pack(std::string_view("ts_us"));
  packer.pack(ts_us != 0 ? ts_us : NowMicros());
  packer.pack(std::string_view("src"));
  packer.pack(source);
  for (const auto& [key, value] : fields) {
    packer.pack(key);
    std::visit([&](const auto& v) { packer.pack(v); }, value);
  }
  return zmq::message_t(buffer.data(), buffer.size());
}

void EventPublisher::Publish(std::string_view topic, const EventFields& fields, int64_t ts_us) {
  if (!connected_) return;
  try {
    socket_.send(zmq::buffer(topic), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    socket_.send(EncodeEventBody(source_, fields, ts_us), zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
    // Dropped: see the class comment.
  }
}

}  // namespace atl
