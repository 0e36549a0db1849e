// MessageTally: how many control and data messages every process of a cluster has sent,
// by flow ("executor->scheduler GangDone": sender, receiver and message kind), from the
// services' `net.stats` events (see common/sent_counters.h) and this process's own counters
// (the client's). Heartbeats are kept apart as periodic traffic: they are sent every
// heartbeat period whatever runs, so they are a rate, not a cost of a computation. A reply
// is counted under "<sender>->reply" (its receiver is whoever asked).
//
// Example:
//   MessageTally tally(context, cluster.info().events_out, /*services=*/2 * hosts + 2);
//   ATOLL_RETURN_IF_ERROR(tally.Start());
//   ATOLL_ASSIGN_OR_RETURN(Traffic before, tally.Snapshot());
//   ... run computations, let the cluster settle ...
//   ATOLL_ASSIGN_OR_RETURN(Traffic after, tally.Snapshot());
//   Traffic cost = Minus(after, before);  // cost.caused: what the runs sent
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include <zmq.hpp>

#include "atoll/status.h"
#include "common/proto/protocol.h"

namespace atl::bench {

struct Flow {
  uint64_t messages = 0;
  uint64_t bytes = 0;
};
using Flows = std::map<std::string, Flow>;  // by "<sender>-><receiver> <kind>"

struct Traffic {
  Flows caused;    // sent because something ran: requests, replies, Dispatch, tuples, ...
  Flows periodic;  // heartbeats
};

// The role a message of `kind` goes to ("executor", "scheduler", "store", "rm", "client",
// "rm/store" for heartbeats), or "reply" for replies.
std::string ReceiverOf(proto::Kind kind);

// Whether `kind` is sent on a timer rather than because of a request or a computation.
bool IsPeriodic(proto::Kind kind);

// Adds one process's counters ("Dispatch.msgs", "Dispatch.bytes", ...) to `traffic` as sent
// by `sender`. Fields that name no message kind are ignored.
void AddCounts(const std::string& sender, const std::map<std::string, uint64_t>& counts,
               Traffic& traffic);

// after - before, flow by flow; flows that did not change are left out.
Traffic Minus(const Traffic& after, const Traffic& before);

class MessageTally {
 public:
  // `services`: how many services publish net.stats (executors, stores, schedulers, RM).
  MessageTally(zmq::context_t& context, std::string events_out, size_t services);

  Status Start();

  // Every flow's totals so far: each service's first report published after this call
  // (so it holds everything the service sent before), plus this process's counters.
  Result<Traffic> Snapshot(std::chrono::milliseconds timeout = std::chrono::seconds(30));

 private:
  zmq::socket_t socket_;
  std::string endpoint_;
  size_t services_;
};

}  // namespace atl::bench
