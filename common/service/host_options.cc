#include "common/service/host_options.h"

#include <CLI/CLI.hpp>

namespace atl {

void AddHostOptions(CLI::App& app, HostOptions& options) {
  app.add_option("--island", options.island,
                 "the host's island (default: the configuration's; required for a host it "
                 "does not name)");
  app.add_option("--devices", options.devices, "how many devices the host has")
      ->check(CLI::Range(int64_t{1}, kMaxDevicesPerHost));
  app.add_option("--kind", options.kind, "the devices' kind: cpu or sim");
}

Result<HostPlacement> ResolveHost(const ClusterConfig& config, const std::string& name,
                                  const HostOptions& options) {
  HostPlacement placement;
  if (auto named = FindHost(config, name); named.ok()) {
    placement = {named->island->name, *named->host};
  } else if (options.island.empty()) {
    return InvalidArgument("host '" + name +
                           "' is not in the configuration: --island must say where it joins");
  } else {
    placement.host.name = name;
  }
  if (!options.island.empty()) placement.island = options.island;
  if (options.devices != 0) placement.host.devices = options.devices;
  if (!options.kind.empty()) placement.host.kind = options.kind;
  ATOLL_RETURN_IF_ERROR(CheckDeviceKind(placement.host.kind).WithContext("host " + name));
  return placement;
}

}  // namespace atl
