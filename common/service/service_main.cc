#include "common/service/service_main.h"

#include <cstdlib>

#include "common/net/event_loop.h"
#include "common/service/log.h"

namespace atl {

void AddServiceOptions(CLI::App& app, ServiceOptions& options) {
  app.add_option("--config", options.config_path, "cluster configuration (TOML)")->required();
  app.add_option("--ready-file", options.ready_file, "write the bound endpoints here once serving");
  app.add_option("--log-level", options.log_level, "trace, debug, info, warn, error or off");
  app.add_option("--events-in", options.events_in, "the RM's event input endpoint");
}

Result<ClusterConfig> StartService(const std::string& service_name, ServiceOptions& options) {
  auto config = LoadClusterConfig(options.config_path);
  InitLogging(service_name, !options.log_level.empty() ? options.log_level
                            : config.ok()              ? config->log_level
                                                       : "info");
  if (!config.ok()) return config.status();
  if (!options.events_in.empty()) config->events_in_endpoint = options.events_in;
  // Containers: the address to bind and advertise is known only where the service runs
  // (a pod's IP, a container's interface), so the environment may override the config's.
  if (const char* bind_host = std::getenv("ATOLL_BIND_HOST"); bind_host && *bind_host) {
    config->bind_host = bind_host;
  }
  InstallShutdownSignals();
  return config;
}

int ExitCode(const Status& status) {
  if (status.ok()) return 0;
  spdlog::error("{}", status.ToString());
  return 1;
}

}  // namespace atl
