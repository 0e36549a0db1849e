// The client's liveness signal: a thread with its own sockets that heartbeats the RM and
// every object store and scheduler the client has used, so that a client that dies (or
// hangs) has its slices, objects and queued runs collected after `liveness` missed beats.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <zmq.hpp>

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
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> watchers_;  // guarded by mu_
  bool stop_ = false;               // guarded by mu_
  std::thread thread_;
};

}  // namespace atl
