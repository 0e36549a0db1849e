// What every service's main() shares: the common command-line options, loading the
// cluster configuration, logging and signal setup.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "atoll/status.h"
#include "common/service/config.h"

namespace atl {

struct ServiceOptions {
  std::string config_path;
  std::string ready_file;  // empty: write none
  std::string log_level;   // empty: the config's cluster.log_level
  std::string events_in;   // empty: the config's rm.events_in
};

// Adds --config, --ready-file, --log-level and --events-in to `app`.
void AddServiceOptions(CLI::App& app, ServiceOptions& options);

// Loads the configuration named by --config, applies the overrides in `options` and the
// environment's ATOLL_BIND_HOST (when set and not empty, it replaces cluster.bind_host: an
// IP address or interface name such as "eth0", for containers), starts logging as
// `service_name` and installs the shutdown signal handlers.
Result<ClusterConfig> StartService(const std::string& service_name, ServiceOptions& options);

// Runs `body` and turns its Status into an exit code, logging the error.
int ExitCode(const Status& status);

}  // namespace atl
