// MessageTally: how many control and data messages every process of a cluster has sent,
// grouped by flow ("scheduler->executor"), from the services' `net.stats` events (see
// common/sent_counters.h) and this process's own counters (the client's). Heartbeats are
// left out: they are periodic, not caused by a computation. A reply is counted under
// "<sender>->reply" (its receiver is whoever asked).
//
// Example:
//   MessageTally tally(context, cluster.info().events_out, /*services=*/2 * hosts + 2);
//   ATOLL_RETURN_IF_ERROR(tally.Start());
//   ATOLL_ASSIGN_OR_RETURN(Flows before, tally.Snapshot());
//   ... run computations, let the cluster settle ...
//   ATOLL_ASSIGN_OR_RETURN(Flows after, tally.Snapshot());
//   Flows cost = Minus(after, before);
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include <zmq.hpp>

#include "atoll/status.h"
#include "common/protocol.h"

namespace atl::bench {

struct Flow {
  uint64_t messages = 0;
  uint64_t bytes = 0;
};
using Flows = std::map<std::string, Flow>;  // by "<sender>-><receiver>"

// The role a message of `kind` goes to ("executor", "scheduler", "store", "rm", "client"),
// or "reply" for replies; empty for heartbeats (not tallied).
std::string ReceiverOf(proto::Kind kind);

// Adds one process's counters ("Dispatch.msgs", "Dispatch.bytes", ...) to `flows` as sent by
// `sender`. Fields that name no message kind are ignored.
void AddCounts(const std::string& sender, const std::map<std::string, uint64_t>& counts,
               Flows& flows);

// after - before, flow by flow; flows that did not change are left out.
Flows Minus(const Flows& after, const Flows& before);

class MessageTally {
 public:
  // `services`: how many services publish net.stats (executors, stores, schedulers, RM).
  MessageTally(zmq::context_t& context, std::string events_out, size_t services);

  Status Start();

  // Every flow's totals so far: each service's first report published after this call
  // (so it holds everything the service sent before), plus this process's counters.
  Result<Flows> Snapshot(std::chrono::milliseconds timeout = std::chrono::seconds(30));

 private:
  zmq::socket_t socket_;
  std::string endpoint_;
  size_t services_;
};

}  // namespace atl::bench
