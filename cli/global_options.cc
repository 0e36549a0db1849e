#include "cli/global_options.h"

#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>

#include "common/net/security.h"
#include "launcher/process.h"

namespace atl {

Result<ClusterInfo> ResolveCluster(const GlobalOptions& global) {
  const std::string state_dir = global.state_dir.empty() ? DefaultStateDir() : global.state_dir;
  auto recorded = ReadClusterInfo(state_dir);
  if (!recorded.ok() && recorded.status().code() == Code::kNotFound) {
    // A machine that only joined hosts to a cluster knows the RM they joined.
    const std::vector<std::string> records = ClusterRecords(state_dir);
    if (!records.empty()) recorded = ReadClusterInfo(state_dir, records.front());
  }
  if (!global.rm_endpoint.empty()) {
    ClusterInfo info;
    info.state_dir = state_dir;
    info.rm_endpoint = global.rm_endpoint;
    info.events_out = global.events_endpoint;
    if (info.events_out.empty() && recorded.ok()) info.events_out = recorded->events_out;
    return info;
  }
  if (!recorded.ok()) {
    if (recorded.status().code() == Code::kNotFound) {
      return Unavailable("no cluster running: " + ClusterInfoPath(state_dir) +
                         " does not exist (start one with `atoll up`, or pass --rm EP)");
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
  if (!global.events_endpoint.empty()) recorded->events_out = global.events_endpoint;
  return recorded;
}

std::string KeysDir(const GlobalOptions& global) {
  if (!global.keys_dir.empty()) return global.keys_dir;
  const std::string state_dir = global.state_dir.empty() ? DefaultStateDir() : global.state_dir;
  const std::string keys = state_dir + "/keys";
  return std::filesystem::exists(net::ClusterPublicKeyPath(keys)) ? keys : "plain";
}

Status SecureContext(zmq::context_t& context, const GlobalOptions& global) {
  ATOLL_ASSIGN_OR_RETURN(net::Credentials credentials,
                         net::FindClientCredentials(KeysDir(global), ""));
  net::SetCredentials(context, std::move(credentials));
  return Status::Ok();
}

void Fail(std::string_view message, int exit_code) {
  std::cerr << "atoll: " << message << std::endl;
  throw CLI::RuntimeError(exit_code);
}

void Fail(const Status& status, int exit_code) { Fail(status.message(), exit_code); }

}  // namespace atl
