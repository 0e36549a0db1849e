#include "common/net/handshake_watch.h"

#include <atomic>
#include <cstring>
#include <vector>

#include "common/net/transport.h"

namespace atl::net {

namespace {

constexpr int kWatchedEvents =
    ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
    ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED;

// How many handshakes in a row the peer must drop, with no reason given, before the watch
// calls it a refusal rather than a peer that went down mid-handshake.
constexpr uint64_t kDroppedHandshakesRefused = 2;

std::string NewMonitorEndpoint() {
  static std::atomic<uint64_t> next{0};
  return "inproc://handshake-watch-" + std::to_string(next.fetch_add(1));
}

}  // namespace

HandshakeWatch::HandshakeWatch(zmq::context_t& context, zmq::socket_t& socket, std::string endpoint)
    : events_(context, zmq::socket_type::pair), endpoint_(std::move(endpoint)) {
  const std::string monitor = NewMonitorEndpoint();
  if (zmq_socket_monitor(socket.handle(), monitor.c_str(), kWatchedEvents) != 0) return;
  events_.set(zmq::sockopt::linger, 0);
  events_.connect(monitor);
}

std::optional<Status> HandshakeWatch::Failure() {
  Drain();
  return failure_;
}

bool HandshakeWatch::Connected() {
  Drain();
  return connected_;
}

uint64_t HandshakeWatch::Drops() {
  Drain();
  return drops_;
}

bool HandshakeWatch::WaitConnected(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    Drain();
    if (connected_ || failure_) return connected_;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    std::vector<zmq::pollitem_t> items{{events_.handle(), 0, ZMQ_POLLIN, 0}};
    if (!Poll(items, left).ok()) return false;  // the context is closing
  }
}

void HandshakeWatch::Drain() {
  while (true) {
    // Each event is two frames: [uint16 event, uint32 value] and the endpoint.
    zmq::message_t event, address;
    try {
      if (!events_.recv(event, zmq::recv_flags::dontwait)) break;
      if (event.more()) (void)events_.recv(address, zmq::recv_flags::dontwait);
    } catch (const zmq::error_t&) {
      break;
    }
    if (event.size() < 6) continue;
    uint16_t kind = 0;
    std::memcpy(&kind, event.data(), sizeof(kind));
    if (kind == ZMQ_EVENT_HANDSHAKE_SUCCEEDED || kind == ZMQ_EVENT_DISCONNECTED) {
      if (kind == ZMQ_EVENT_DISCONNECTED && connected_) drops_++;
      connected_ = kind == ZMQ_EVENT_HANDSHAKE_SUCCEEDED;
      if (connected_) dropped_handshakes_ = 0;
    } else if (failure_) {
      continue;  // the first failure stands
    } else if (kind == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      failure_ = PermissionDenied(endpoint_ +
                                  " refused this process's key: it is not one the cluster "
                                  "allows (see `atoll keygen --client` and $ATOLL_KEYS)");
    } else if (kind == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
               ++dropped_handshakes_ >= kDroppedHandshakesRefused) {
      // Without a protocol error, the peer closed the connection before the handshake was
      // done. A server that cannot read this process's greeting (plain text, or another
      // cluster's server key) does so on every attempt; a peer killed while the kernel had
      // accepted the connection does so once, and is down, not refusing: its next attempts
      // find no listener.
      failure_ = PermissionDenied(
          "the security handshake with " + endpoint_ +
          " failed: one side uses CURVE keys and the other plain text, or the keys do not "
          "match the cluster's (see $ATOLL_KEYS and the config's security.mode)");
    }
  }
}

}  // namespace atl::net
