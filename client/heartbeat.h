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
  HeartbeatThread(zmq::context_t& context, uint64_t client_id, std::string rm_endpoint,
                  std::chrono::milliseconds period);
  ~HeartbeatThread();  // stops and joins

  // Adds a service (an object store or a scheduler) to heartbeat from now on. Thread-safe.
  void AddWatcher(const std::string& endpoint);

 private:
  void Loop();

  zmq::context_t& context_;
  const uint64_t client_id_;
  const std::string rm_endpoint_;
  const std::chrono::milliseconds period_;
  Mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> watchers_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace atl
