// IslandOrder: the island's single total order of gangs, and what decides when each gang
// gets its place. Submitted programs queue per client; gangs are released one by one,
// chosen by the scheduling policy, while fewer than `window` gangs are in flight (0: no
// limit). A released gang gets the next sequence number, and its shards are appended, in
// that order, to one Dispatch per executor. A run's gangs are released in program order;
// a sequential gang waits until the run has nothing in flight.
//
// Pure logic, no sockets: the scheduler service feeds it and sends what it releases.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/proto/protocol.h"
#include "services/scheduler/policy.h"

namespace atl::scheduler {

class IslandOrder {
 public:
  IslandOrder(std::unique_ptr<SchedulingPolicy> policy, size_t window);

  // Checks that `program` lists each node's shards together, each shard once, and queues
  // its gangs. InvalidArgument names what is wrong; nothing is queued then.
  Status Submit(proto::SubmitProgram program);
  // Records finished shards of a gang, reported once per executor; the gang leaves the
  // flight when all its shards did.
  void OnGangDone(const proto::GangDone& done);
  // Releases every gang the policy and the window allow now. Returns, per executor
  // control endpoint, its entries in gang order.
  std::map<std::string, proto::Dispatch> Release();

  size_t in_flight() const { return in_flight_.size(); }
  size_t queued() const;
  const SchedulingPolicy& policy() const { return *policy_; }

 private:
  struct Gang {
    uint32_t node = 0;
    uint64_t function_id = 0;
    bool sequential = false;
    uint64_t arrival = 0;
    std::vector<proto::PlacedEntry> shards;
  };
  struct Run {
    uint64_t run_id = 0;
    std::deque<Gang> gangs;
  };
  struct ClientQueue {
    double weight = 1.0;
    std::deque<Run> runs;
  };
  struct Flight {
    uint64_t client = 0;
    uint64_t run = 0;
    uint64_t function_id = 0;
    size_t shards_left = 0;
    uint64_t busy_us = 0;  // the longest shard's device time
  };

  // The client's next gang, if it may be released now.
  const Gang* Head(const ClientQueue& queue) const;
  double ExpectedCost(uint64_t function_id) const;

  std::unique_ptr<SchedulingPolicy> policy_;
  const size_t window_;
  std::map<uint64_t, ClientQueue> clients_;
  std::map<uint64_t, Flight> in_flight_;      // by gang sequence number
  std::map<uint64_t, size_t> run_in_flight_;  // gangs in flight per run
  std::map<uint64_t, double> cost_us_;        // running mean device time per function
  uint64_t next_seq_ = 1;
  uint64_t next_arrival_ = 1;
};

}  // namespace atl::scheduler
