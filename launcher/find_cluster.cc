#include "launcher/find_cluster.h"

#include <filesystem>

#include "common/net/curve_keys.h"
#include "launcher/process.h"

namespace atl {

namespace {

std::string StateDirOf(const ClusterLookup& lookup) {
  return lookup.state_dir.empty() ? DefaultStateDir() : lookup.state_dir;
}

}  // namespace

std::string KeysDir(const ClusterLookup& lookup) {
  if (!lookup.keys_dir.empty()) return lookup.keys_dir;
  const std::string keys = StateDirOf(lookup) + "/keys";
  return std::filesystem::exists(net::ClusterPublicKeyPath(keys)) ? keys : "plain";
}

Result<ClusterInfo> ResolveCluster(const ClusterLookup& lookup) {
  const std::string state_dir = StateDirOf(lookup);
  auto recorded = ReadClusterInfo(state_dir);
  if (!recorded.ok() && recorded.status().code() == Code::kNotFound) {
    // A machine that only joined hosts to a cluster knows the RM they joined.
    const std::vector<std::string> records = ClusterRecords(state_dir);
    if (!records.empty()) recorded = ReadClusterInfo(state_dir, records.front());
  }
  if (!lookup.rm_endpoint.empty()) {
    ClusterInfo info;
    info.state_dir = state_dir;
    info.rm_endpoint = lookup.rm_endpoint;
    info.events_out = lookup.events_endpoint;
    if (info.events_out.empty() && recorded.ok()) info.events_out = recorded->events_out;
    return info;
  }
  if (!recorded.ok()) {
    if (recorded.status().code() == Code::kNotFound) {
      return Unavailable(
          "no cluster running: " + ClusterInfoPath(state_dir) +
          " does not exist (start one with `atoll up`, or name its RM: --rm EP or $ATOLL_RM)");
    }
    return Unavailable("no cluster running: " + recorded.status().message());
  }
  const ProcessInfo* rm = recorded->Find("rm");
  auto runs = [](const ProcessInfo& p) {
    return proc::IsProgram(static_cast<pid_t>(p.pid),
                           std::filesystem::path(p.program).filename().string());
  };
  if (rm != nullptr && !runs(*rm)) {
    if (recorded->supervisor.pid != 0 && runs(recorded->supervisor)) {
      return Unavailable("the RM is down and its supervisor (pid " +
                         std::to_string(recorded->supervisor.pid) +
                         ") is starting it again; try again shortly (its log: " + rm->log + ")");
    }
    return Unavailable("no cluster running: the RM recorded in " + ClusterInfoPath(state_dir) +
                       " (pid " + std::to_string(rm->pid) +
                       ") is gone; run `atoll down` to clean up, then `atoll up`");
  }
  if (!lookup.events_endpoint.empty()) recorded->events_out = lookup.events_endpoint;
  return recorded;
}

}  // namespace atl
