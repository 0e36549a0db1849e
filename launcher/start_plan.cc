#include "launcher/start_plan.h"

#include "launcher/cluster_info.h"

namespace atl {

std::string StartPlan::RecordName() const {
  if (starts_rm() || hosts.empty()) return kHeadRecord;
  return "host-" + hosts.front().host.name;
}

std::vector<std::vector<std::string>> SimHostGroups(const StartPlan& plan,
                                                    const ClusterConfig& config) {
  std::vector<std::vector<std::string>> groups;
  if (config.sim_hosts_per_process == 0) return groups;
  for (const auto& planned : plan.hosts) {
    if (planned.host.kind != "sim" || !FindHost(config, planned.host.name).ok()) continue;
    if (groups.empty() || groups.back().size() == config.sim_hosts_per_process) {
      groups.emplace_back();
    }
    groups.back().push_back(planned.host.name);
  }
  return groups;
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
