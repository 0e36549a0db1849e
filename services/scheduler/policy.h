// Scheduling policies: which client's next gang takes the next place in the island's
// order. A policy only reorders whole gangs between clients; the order it produces is
// still one total order that every executor follows, so it can never make collectives
// interleave inconsistently.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "atoll/status.h"

namespace atl::scheduler {

// A client whose next gang could be released now.
struct Candidate {
  uint64_t client = 0;
  double weight = 1.0;   // its share relative to other clients'
  uint64_t arrival = 0;  // when its next gang was submitted (a counter)
};

class SchedulingPolicy {
 public:
  virtual ~SchedulingPolicy() = default;
  virtual std::string_view name() const = 0;
  // Picks the client whose gang goes next; `candidates` is never empty.
  virtual uint64_t Pick(const std::vector<Candidate>& candidates) = 0;
  // A gang of `client` was released; `cost_us` is its expected device time.
  virtual void Charge(uint64_t client, double weight, double cost_us) = 0;
};

// First come, first served, across all clients.
std::unique_ptr<SchedulingPolicy> MakeFifoPolicy();
// Proportional share (stride scheduling): over time each busy client gets device time in
// proportion to its weight. A client that was idle rejoins at the current virtual time, so
// it cannot claim the share it did not use.
std::unique_ptr<SchedulingPolicy> MakeProportionalSharePolicy();

// "fifo" or "share"; InvalidArgument otherwise.
Result<std::unique_ptr<SchedulingPolicy>> MakePolicy(std::string_view name);

}  // namespace atl::scheduler
