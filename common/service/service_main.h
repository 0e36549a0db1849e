// What every service's main() shares: the common command-line options, loading the
// cluster configuration, logging and signal setup.
#pragma once

#include <memory>
#include <string>

#include "atoll/status.h"
#include "common/net/zap_handler.h"
#include "common/service/cli_app.h"
#include "common/service/config.h"

namespace atl {

struct ServiceOptions {
  std::string config_path;
  std::string ready_file;       // empty: write none
  std::string log_level;        // empty: the config's cluster.log_level
  std::string events_in;        // empty: the config's rm.events_in
  std::string keys_dir;         // empty: the config's security.keys_dir
  std::string bind;             // empty: $ATOLL_BIND_HOST, else the config's cluster.bind_host
  std::string advertise;        // empty: see ClusterConfig::advertise_host
  std::string checkpoint_root;  // empty: the config's checkpoints.root (object stores use it)
};

// Adds --config, --ready-file, --log-level, --events-in, --keys, --bind, --advertise and
// --checkpoint-root to `app`.
void AddServiceOptions(CLI::App& app, ServiceOptions& options);

// Loads the configuration named by --config, applies the overrides in `options` and the
// environment's ATOLL_BIND_HOST (when set and not empty, it replaces cluster.bind_host: an
// IP address or interface name such as "eth0", for containers; --bind replaces both),
// starts logging as `service_name` and installs the shutdown signal handlers.
// InvalidArgument when --advertise is a wildcard.
Result<ClusterConfig> StartService(const std::string& service_name, ServiceOptions& options);

// Secures `context` as the config says: with security.mode "curve", gives its sockets the
// cluster's key pair from the keys directory and starts the process's ZAP handler (kept
// alive by the returned pointer); with "plain", does nothing and returns null.
// FailedPrecondition when "curve" names no keys directory.
Result<std::unique_ptr<net::ZapHandler>> SecureService(zmq::context_t& context,
                                                       const ClusterConfig& config);

// Runs `body` and turns its Status into an exit code, logging the error.
int ExitCode(const Status& status);

}  // namespace atl
