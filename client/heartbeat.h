// The client's liveness signal: its heartbeats to the RM and to every object store and
// scheduler the client has used, so that a client that dies (or hangs) has its slices,
// objects and queued runs collected after `liveness` missed beats. They go from a thread of
// their own, not the client's (which may be busy for long in the caller's code), shared by
// the process's clients of the same key (HeartbeatSender).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "client/heartbeat_sender.h"
#include "common/net/security.h"

namespace atl {

class ClientHeartbeat {
 public:
  // Beats client `client_id`, holding `credentials`, to the RM at `rm_endpoint` every
  // `period`, the first beat at once.
  ClientHeartbeat(const net::Credentials& credentials, uint64_t client_id,
                  const std::string& rm_endpoint, std::chrono::milliseconds period);
  ~ClientHeartbeat();  // no beat of this client leaves after it

  // Adds a service (an object store or a scheduler) to heartbeat from now on. Thread-safe.
  void AddWatcher(const std::string& endpoint);

 private:
  const std::shared_ptr<HeartbeatSender> sender_;
  const uint64_t client_id_;
};

}  // namespace atl
