// LiveFeed: what `atoll top` and `atoll dashboard` read a cluster through. A SUB socket on
// the RM's event bus (subscribed to the topics a ClusterView uses, not to object.* events)
// and a DEALER to the RM for GetClusterStatus.
//
// Example:
//   LiveFeed feed(context, *info);
//   ATOLL_RETURN_IF_ERROR(feed.Connect());
//   ClusterView view;
//   if (auto s = feed.Status(1s); s.ok()) view.ApplyStatus(*s);
//   for (const Event& e : feed.Receive(100ms).value()) view.Apply(e);
//
// Used from one thread (it owns two ZeroMQ sockets).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "atoll/status.h"
#include "common/net/event_reader.h"
#include "common/net/transport.h"
#include "common/proto/protocol.h"
#include "launcher/cluster_info.h"

namespace atl {

class LiveFeed {
 public:
  // `info` needs rm_endpoint and events_out.
  LiveFeed(zmq::context_t& context, const ClusterInfo& info);

  // Connects both sockets (ZeroMQ connects lazily: this fails only on a malformed endpoint).
  Status Connect();

  // Asks the RM for the cluster's status, waiting at most `timeout`; DeadlineExceeded when
  // it does not answer.
  Result<proto::ClusterStatus> ClusterStatus(std::chrono::milliseconds timeout);

  // Waits up to `wait` for the first event, then takes every event already there (at most
  // `max`). Malformed events are skipped and counted in malformed().
  Result<std::vector<Event>> Receive(std::chrono::milliseconds wait, size_t max = 10000);

  uint64_t malformed() const { return malformed_; }

  // The topic prefixes the feed subscribes to.
  static const std::vector<std::string>& Topics();

 private:
  std::string events_endpoint_;
  zmq::socket_t sub_;
  net::Requester rm_;
  uint64_t malformed_ = 0;
};

}  // namespace atl
