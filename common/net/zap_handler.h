// The process's ZAP handler (ZeroMQ's authentication protocol, RFC 27): a thread that
// answers every CURVE handshake on the process's bound sockets. A peer holding the
// cluster's public key is a member (user id "member"); on a socket open to everyone (see
// Audience in security.h), a peer whose key is one of the keys directory's allowed/*.pub
// is client "client:NAME"; anyone else is refused and the connection never opens. The
// allowed folder is read again when its modification time changes, so adding or removing a
// file takes effect at the next handshake, without a restart.
//
// Thread-safe: the handler runs on its own thread, with its own socket.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "atoll/status.h"

namespace atl::net {

class ZapHandler {
 public:
  // Serves ZAP for `context` (one handler per context) until destroyed.
  static Result<std::unique_ptr<ZapHandler>> Start(zmq::context_t& context,
                                                   std::string cluster_public_key,
                                                   std::string keys_dir);
  ~ZapHandler();  // stops and joins

  uint64_t accepted() const { return accepted_.load(); }
  uint64_t refused() const { return refused_.load(); }

 private:
  ZapHandler(zmq::socket_t socket, std::string cluster_public_key, std::string keys_dir);
  void Loop();
  // The user id for a CURVE `key` on `domain`, or empty to refuse it.
  std::string Authenticate(const std::string& domain, const std::string& key);
  void ReloadAllowedIfChanged();

  zmq::socket_t socket_;
  const std::string cluster_public_key_;
  const std::string keys_dir_;
  std::map<std::string, std::string> allowed_;  // Z85 key -> name; only the thread uses it
  int64_t allowed_mtime_ns_ = -1;
  std::set<std::string> refused_keys_;  // logged once each
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> refused_{0};
  std::thread thread_;
};

}  // namespace atl::net
