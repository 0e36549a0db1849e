// GangReports: what an executor tells its schedulers about finished gangs. A scheduler only
// needs to know when a gang left the flight, so an executor reports each gang once, when
// the last of its local shards of it finished, not shard by shard: the control messages a
// gang costs grow with the hosts it spans, not with its shards. Each gang's report is a
// message of its own, so that their count does not depend on which gangs happened to
// finish together.
//
// While the host's devices still have shards to run, more reports are coming: a ready one
// is held (`HoldLimits`: at most `hold` after the first held one became ready, or until
// `max_held` are ready), so that one wake-up of the scheduler and of both sides' ZeroMQ
// threads takes several, instead of one each per computation of a chain. Once the devices
// have nothing left, what is ready goes at once: a synchronous call is not delayed.
//
// Not thread-safe: the executor's loop owns it.
//
// Example:
//   for (const auto& e : dispatch.entries) reports.Expect(scheduler, e.gang_seq);
//   ... as each shard finishes:
//   reports.ShardDone(scheduler, gang_seq, busy_us, outputs.status());
//   ... at the end of the loop turn, and when NextDue() passes:
//   for (auto& [scheduler, done] : reports.TakeDue(devices_busy, now)) { send done }
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "atoll/status.h"
#include "common/proto/protocol.h"

namespace atl::executor {

class GangReports {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  struct HoldLimits {
    std::chrono::microseconds hold{250};
    size_t max_held = 64;
  };

  GangReports() = default;
  explicit GangReports(HoldLimits limits) : limits_(limits) {}

  // One more shard of gang `gang_seq` from `scheduler` (its routing id) runs here.
  void Expect(const std::string& scheduler, uint64_t gang_seq);
  // A shard of the gang finished (`outcome` not OK: it failed, and the report names the
  // first such error). The gang's report is ready once every expected shard did; a shard
  // never expected is reported on its own.
  void ShardDone(const std::string& scheduler, uint64_t gang_seq, uint64_t busy_us,
                 const Status& outcome);
  // The reports ready and due at `now`, in the order they became ready, each with the
  // scheduler it goes to: all of them unless `devices_busy` (the host's devices have shards
  // queued or running) and the hold limits allow holding them longer.
  std::vector<std::pair<std::string, proto::GangDone>> TakeDue(bool devices_busy, TimePoint now);
  // When the reports held now fall due; empty when none is held.
  std::optional<TimePoint> NextDue() const;
  // Gangs with shards still running here.
  size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    uint32_t shards_left = 0;
    proto::GangDone report;
  };
  std::map<std::pair<std::string, uint64_t>, Pending> pending_;  // by (scheduler, gang)
  std::vector<std::pair<std::string, proto::GangDone>> ready_;
  std::optional<TimePoint> held_since_;  // when TakeDue first held what is ready
  HoldLimits limits_;
};

}  // namespace atl::executor
