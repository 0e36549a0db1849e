// Watches a connecting socket's security handshakes (a ZeroMQ socket monitor), so that a
// peer refusing this process's key, or speaking another mechanism (CURVE against plain
// text), is told at once with a clear error instead of as a silent timeout: ZeroMQ itself
// just retries the connection.
//
// Not thread-safe: use it on the thread that uses the socket.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "atoll/status.h"

namespace atl::net {

class HandshakeWatch {
 public:
  // Starts watching `socket` (before it connects to `endpoint`, so no handshake is missed).
  HandshakeWatch(zmq::context_t& context, zmq::socket_t& socket, std::string endpoint);

  // The first failed handshake since the watch started, if any: PermissionDenied when the
  // peer refused this process's key or mechanism. A peer that drops a handshake without
  // saying why is called refusing only once it does so twice in a row: once is also what a
  // peer killed mid-handshake looks like. Never waits.
  std::optional<Status> Failure();
  // Whether a connection to the peer completed its handshake and has not dropped since:
  // false while the peer is down or unreachable (ZeroMQ retries in the background). Never
  // waits.
  bool Connected();
  // How many established connections to the peer have dropped since the watch started. A
  // drop loses what was in flight on it, both ways, and may mean the peer restarted (a new
  // process at the same address knows nothing of the old one's requests). Never waits.
  uint64_t Drops();
  // Waits up to `timeout` for a handshake to complete (true) or fail (false, Failure() says
  // why); false too when the time runs out first.
  bool WaitConnected(std::chrono::milliseconds timeout);

 private:
  // Reads the events that came, in order.
  void Drain();

  zmq::socket_t events_;
  std::string endpoint_;
  std::optional<Status> failure_;
  bool connected_ = false;
  uint64_t drops_ = 0;
  uint64_t dropped_handshakes_ = 0;  // in a row, since the last handshake that succeeded
};

}  // namespace atl::net
