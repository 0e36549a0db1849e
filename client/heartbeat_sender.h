// HeartbeatSender: one thread that sends the heartbeats of every client of this process
// holding the same key, over one connection per service, each client's beat every
// `period`. A connection per client and service (as the clients had once) cost each client
// three more CURVE handshakes (x25519 work on both ends, a ZAP check) to the RM, its store
// and its scheduler: half of what connecting a client cost the cluster. A service accepts a
// client's beat only from a connection authenticated with the key that client said hello
// with, which holds here: one sender per key.
//
// Sends never wait: a service that is down or not reading must not delay the beats of the
// others (a beat that finds its connection's queue full is dropped; the next one goes).
//
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <zmq.hpp>

#include "common/base/mutex.h"
#include "common/net/security.h"

namespace atl {

class HeartbeatSender {
 public:
  // The sender this process's clients of `credentials` and `period` share, started by the
  // first of them and stopped when the last lets go of it.
  static std::shared_ptr<HeartbeatSender> Shared(const net::Credentials& credentials,
                                                 std::chrono::milliseconds period);

  HeartbeatSender(net::Credentials credentials, std::chrono::milliseconds period);
  ~HeartbeatSender();  // stops and joins

  // Beats client `client` to the service at `endpoint` from now on; its first beat there
  // goes at once (a service counts a client's silence from when it first hears of it, and
  // a new connection takes a while on a loaded machine).
  void Add(uint64_t client, const std::string& endpoint);
  // Stops `client`'s beats everywhere: none leaves after this returns.
  void Remove(uint64_t client);

 private:
  void Loop();
  // Sends one beat of `client` to `endpoint`, connecting first if need be. Holds mu_: a
  // Remove waits for the beat in progress.
  void Beat(uint64_t client, const std::string& endpoint) REQUIRES(mu_);

  net::KeyedContext context_;
  const std::chrono::milliseconds period_;
  Mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, zmq::socket_t> sockets_ GUARDED_BY(mu_);         // by endpoint
  std::set<std::pair<uint64_t, std::string>> beats_ GUARDED_BY(mu_);     // (client, endpoint)
  std::vector<std::pair<uint64_t, std::string>> first_ GUARDED_BY(mu_);  // due at once
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace atl
