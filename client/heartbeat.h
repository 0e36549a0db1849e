// The client's liveness signal: a thread with its own socket that heartbeats the RM, so that
// a client that dies (or hangs) has its slices, objects and queued runs collected after
// `liveness` missed beats. The RM alone: the object stores and schedulers follow its table
// of live clients (ClientLiveness::FollowTable), so that a client opens one connection for
// its beats, not one per service it uses (each a CURVE handshake; issue 48).
#pragma once

#include <chrono>
#include <condition_variable>
#include <optional>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "atoll/status.h"
#include "common/base/mutex.h"

namespace atl {

class HeartbeatThread {
 public:
  // Connects to the RM at once. The RM counts a client's silence from its hello, so the
  // client waits (WaitConnected) for this connection's handshake before it says hello: under
  // CURVE a handshake waits its turn on the RM's I/O thread behind every other client's, and
  // 256 clients connecting at once had beats reach the RM up to 2 s after their hello, some
  // never within their lifetime (issue 48). Beats start with Start.
  HeartbeatThread(zmq::context_t& context, std::string rm_endpoint);
  ~HeartbeatThread();  // stops and joins

  // Waits up to `timeout` for the connection to the RM to complete its handshake: Ok, the
  // handshake's failure (PermissionDenied: a key or mechanism the RM refuses), or
  // Unavailable once the time is out.
  Status WaitConnected(std::chrono::milliseconds timeout);
  // Beats as client `client_id` every `period` from now on, the first beat at once.
  void Start(uint64_t client_id, std::chrono::milliseconds period);

 private:
  void Loop();

  zmq::context_t& context_;
  const std::string rm_endpoint_;
  Mutex mu_;
  std::condition_variable cv_;
  uint64_t client_id_ GUARDED_BY(mu_) = 0;  // 0 until Start
  std::chrono::milliseconds period_ GUARDED_BY(mu_){0};
  std::optional<Status> rm_link_ GUARDED_BY(mu_);  // unset while the handshake runs
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace atl
