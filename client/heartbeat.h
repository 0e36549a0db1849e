// The client's liveness signal: a thread with its own sockets that heartbeats the RM and
// every object store and scheduler the client has used, so that a client that dies (or
// hangs) has its slices, objects and queued runs collected after `liveness` missed beats.
#pragma once

#include <chrono>
#include <condition_variable>
#include <set>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "common/base/mutex.h"

namespace atl {

class HeartbeatThread {
 public:
  // Connects to the RM at once, before the client has said hello: under CURVE a new
  // connection's handshake waits its turn on the RM's I/O thread behind every other client's,
  // and a heartbeat connection opened only after the hello often got its first beat to the
  // RM later than the liveness window the RM counts from the hello (issue 48). Beats start
  // with Start.
  HeartbeatThread(zmq::context_t& context, std::string rm_endpoint);
  ~HeartbeatThread();  // stops and joins

  // Beats as client `client_id` every `period` from now on, the first beat at once.
  void Start(uint64_t client_id, std::chrono::milliseconds period);
  // Adds a service (an object store or a scheduler) to heartbeat from now on. Thread-safe.
  void AddWatcher(const std::string& endpoint);

 private:
  void Loop();

  zmq::context_t& context_;
  const std::string rm_endpoint_;
  Mutex mu_;
  std::condition_variable cv_;
  uint64_t client_id_ GUARDED_BY(mu_) = 0;  // 0 until Start
  std::chrono::milliseconds period_ GUARDED_BY(mu_){0};
  std::set<std::string> watchers_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace atl
