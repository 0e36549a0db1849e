#include "common/service/service_main.h"

#include <cstdlib>

#include <CLI/CLI.hpp>

#include "common/net/event_loop.h"
#include "common/net/security.h"
#include "common/service/advertise.h"
#include "common/service/log.h"

namespace atl {

void AddServiceOptions(CLI::App& app, ServiceOptions& options) {
  app.add_option("--config", options.config_path, "cluster configuration (TOML)")->required();
  app.add_option("--ready-file", options.ready_file, "write the bound endpoints here once serving");
  app.add_option("--log-level", options.log_level, "trace, debug, info, warn, error or off");
  app.add_option("--events-in", options.events_in, "the RM's event input endpoint");
  app.add_option("--keys", options.keys_dir, "the CURVE keys directory (atoll keygen)");
  app.add_option("--bind", options.bind,
                 "the address to bind: an interface's address or name, or 0.0.0.0 for every "
                 "one (overrides cluster.bind_host)");
  app.add_option("--advertise", options.advertise,
                 "the address peers reach this service at, put in the endpoints it registers "
                 "(default: the bound one; for 0.0.0.0, the interface that routes to the RM)");
  app.add_option("--checkpoint-root", options.checkpoint_root,
                 "where an object store keeps checkpoints (overrides checkpoints.root)");
}

Result<ClusterConfig> StartService(const std::string& service_name, ServiceOptions& options) {
  auto config = LoadClusterConfig(options.config_path);
  InitLogging(service_name, !options.log_level.empty() ? options.log_level
                            : config.ok()              ? config->log_level
                                                       : "info");
  if (!config.ok()) return config.status();
  if (!options.events_in.empty()) config->events_in_endpoint = options.events_in;
  if (!options.keys_dir.empty()) config->security.keys_dir = options.keys_dir;
  if (!options.checkpoint_root.empty()) config->checkpoint_root = options.checkpoint_root;
  // Containers: the address to bind and advertise is known only where the service runs
  // (a pod's IP, a container's interface), so the environment may override the config's.
  if (const char* bind_host = std::getenv("ATOLL_BIND_HOST"); bind_host && *bind_host) {
    config->bind_host = bind_host;
  }
  if (!options.bind.empty()) config->bind_host = options.bind;
  if (IsWildcardHost(options.advertise) && !options.advertise.empty()) {
    return InvalidArgument("--advertise " + options.advertise +
                           " is no address a peer can connect to");
  }
  config->advertise_host = options.advertise;
  InstallShutdownSignals();
  return config;
}

Result<std::unique_ptr<net::ZapHandler>> SecureService(zmq::context_t& context,
                                                       const ClusterConfig& config) {
  if (!config.security.curve()) {
    spdlog::warn("security.mode is \"plain\": every peer that reaches a port is believed");
    return std::unique_ptr<net::ZapHandler>();
  }
  if (config.security.keys_dir.empty()) {
    return FailedPrecondition(
        "security.mode is \"curve\" but no keys directory is given (--keys or "
        "security.keys_dir; `atoll keygen` makes one)");
  }
  ATOLL_ASSIGN_OR_RETURN(net::Credentials credentials,
                         net::ServiceCredentials(config.security.keys_dir));
  net::SetCredentials(context, credentials);
  return net::ZapHandler::Start(context, credentials.own.public_key, config.security.keys_dir);
}

int ExitCode(const Status& status) {
  if (status.ok()) return 0;
  spdlog::error("{}", status.ToString());
  return 1;
}

}  // namespace atl
