// Sends raw multipart messages to one endpoint of a running service as fast as it takes
// them, never waiting: a DEALER (or a PUB, for the RM's event input) made by
// net::MakeSocket and connected by net::Connect, so that it authenticates however its
// ZeroMQ context says (plain text today; keys given to the context once the cluster is
// secured). A short high-water mark: a message the peer's queue has no room for is not
// sent (and not counted) rather than waited for. Replies are read and dropped, so that a
// service answering every message never finds this peer full.
//
// Not thread-safe: one thread per sender.
#pragma once

#include <cstdint>
#include <string>

#include <zmq.hpp>

#include "atoll/status.h"
#include "common/net/transport.h"
#include "tests/e2e/wire_mutator.h"

namespace atl::testing {

class WireSender {
 public:
  // `type`: dealer for request sockets, pub for the event input.
  WireSender(zmq::context_t& context, zmq::socket_type type, std::string endpoint)
      : endpoint_(std::move(endpoint)), socket_(net::MakeSocket(context, type)) {
    socket_.set(zmq::sockopt::sndhwm, 16);
    socket_.set(zmq::sockopt::rcvhwm, 16);
  }

  Status Connect() { return net::Connect(socket_, endpoint_); }

  // Queues `message` if there is room, without waiting; true when it was queued.
  Result<bool> TrySend(const WireMessage& message) {
    try {
      for (size_t i = 0; i < message.size(); ++i) {
        const auto flags =
            zmq::send_flags::dontwait |
            (i + 1 < message.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
        // Only the first frame can find no room: ZeroMQ takes the rest of a message whose
        // first frame it took.
        if (!socket_.send(zmq::buffer(message[i]), flags)) return false;
      }
      ++sent_;
      return true;
    } catch (const zmq::error_t& e) {
      return Unavailable("send to " + endpoint_ + ": " + e.what());
    }
  }

  // Reads and drops whatever replies are waiting; returns how many messages.
  uint64_t DrainReplies() {
    if (socket_.get(zmq::sockopt::type) != ZMQ_DEALER) return 0;
    uint64_t n = 0;
    while (true) {
      auto frames = net::RecvFrames(socket_, std::chrono::milliseconds(0));
      if (!frames.ok() || !frames->has_value()) return n;
      ++n;
    }
  }

  void* handle() { return socket_.handle(); }  // for zmq::poll
  const std::string& endpoint() const { return endpoint_; }
  uint64_t sent() const { return sent_; }

 private:
  std::string endpoint_;
  zmq::socket_t socket_;
  uint64_t sent_ = 0;
};

}  // namespace atl::testing
