// The event bus: an XSUB socket that every service's publisher connects to, forwarded to
// an XPUB socket that watchers subscribe to. Runs zmq::proxy on a thread of its own (its
// sockets never leave that thread).
#pragma once

#include <string>
#include <thread>

#include <zmq.hpp>

#include "atoll/status.h"

namespace atl::rm {

class EventProxy {
 public:
  explicit EventProxy(zmq::context_t& context) : context_(context) {}
  ~EventProxy() { Stop(); }

  // Binds both sides and starts forwarding. Returns once bound; the bound addresses are
  // then available (a "*" port resolved).
  Status Start(const std::string& in_endpoint, const std::string& out_endpoint);
  void Stop();

  const std::string& in_endpoint() const { return in_endpoint_; }
  const std::string& out_endpoint() const { return out_endpoint_; }

 private:
  zmq::context_t& context_;
  std::string control_endpoint_;
  std::string in_endpoint_;
  std::string out_endpoint_;
  std::thread thread_;
};

}  // namespace atl::rm
