#include "launcher/start_plan.h"

#include "launcher/cluster_info.h"

namespace atl {

std::string StartPlan::RecordName() const {
  if (starts_rm() || hosts.empty()) return kHeadRecord;
  return "host-" + hosts.front().host.name;
}

StartPlan WholeCluster(const ClusterConfig& config) {
  StartPlan plan;
  for (const auto& island : config.islands) {
    plan.schedulers.push_back(island.name);
    for (const auto& host : island.hosts) plan.hosts.push_back({island.name, host});
  }
  return plan;
}

}  // namespace atl
