// GangReports: what an executor tells its schedulers about finished gangs. A scheduler only
// needs to know when a gang left the flight, so an executor reports each gang once, when
// the last of its local shards of it finished, not shard by shard: the control messages a
// gang costs grow with the hosts it spans, not with its shards. A report waits only for the
// end of the loop turn that made it ready (it is latency-critical: the scheduler's window
// moves on it), and each gang's report is a message of its own, so that their count does
// not depend on which gangs happened to finish in the same turn.
//
// Not thread-safe: the executor's loop owns it.
//
// Example:
//   for (const auto& e : dispatch.entries) reports.Expect(scheduler, e.gang_seq);
//   ... as each shard finishes:
//   reports.ShardDone(scheduler, gang_seq, busy_us, outputs.status());
//   ... at the end of the loop turn:
//   for (auto& [scheduler, done] : reports.TakeReady()) { send done to scheduler }
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "atoll/status.h"
#include "common/proto/protocol.h"

namespace atl::executor {

class GangReports {
 public:
  // One more shard of gang `gang_seq` from `scheduler` (its routing id) runs here.
  void Expect(const std::string& scheduler, uint64_t gang_seq);
  // A shard of the gang finished (`outcome` not OK: it failed, and the report names the
  // first such error). The gang's report is ready once every expected shard did; a shard
  // never expected is reported on its own.
  void ShardDone(const std::string& scheduler, uint64_t gang_seq, uint64_t busy_us,
                 const Status& outcome);
  // The reports ready since the last call, in the order they became ready, each with the
  // scheduler it goes to.
  std::vector<std::pair<std::string, proto::GangDone>> TakeReady();
  // Gangs with shards still running here.
  size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    uint32_t shards_left = 0;
    proto::GangDone report;
  };
  std::map<std::pair<std::string, uint64_t>, Pending> pending_;  // by (scheduler, gang)
  std::vector<std::pair<std::string, proto::GangDone>> ready_;
};

}  // namespace atl::executor
