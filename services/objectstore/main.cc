// atoll-objectstore: the host's object store. Reads the cluster configuration, creates the
// host's shared-memory arena, serves the object-store protocol on a free port and writes
// the ready file (keys `endpoint` and `arena`). Runs until SIGINT or SIGTERM, then exits 0
// with the arena unlinked. Exit 1: it could not start; exit 2: bad command line.
#include <cstdio>
#include <exception>
#include <string>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "common/config.h"
#include "common/event_loop.h"
#include "common/log.h"
#include "common/ready_file.h"
#include "services/objectstore/store_service.h"

namespace {

struct Flags {
  std::string config_path;
  std::string host;
  std::string events_in;   // empty: the config's rm.events_in
  std::string ready_file;  // empty: write none
  std::string log_level;   // empty: the config's cluster.log_level
};

atl::Status Serve(const Flags& flags) {
  ATOLL_ASSIGN_OR_RETURN(const atl::ClusterConfig config,
                         atl::LoadClusterConfig(flags.config_path));
  if (flags.log_level.empty()) {
    auto level = spdlog::level::from_str(config.log_level);
    if (level == spdlog::level::off && config.log_level != "off") level = spdlog::level::info;
    spdlog::set_level(level);
  }
  ATOLL_ASSIGN_OR_RETURN(const atl::HostLocation where, atl::FindHost(config, flags.host));
  atl::InstallShutdownSignals();

  atl::store::StoreOptions options;
  options.host = flags.host;
  options.bind_endpoint = "tcp://" + config.bind_host + ":*";
  options.arena_bytes = where.host->arena_bytes;
  options.heartbeat = std::chrono::milliseconds(config.heartbeat_ms);
  options.liveness = config.liveness;
  options.events_in = flags.events_in.empty() ? config.events_in_endpoint : flags.events_in;

  zmq::context_t context;
  ATOLL_ASSIGN_OR_RETURN(auto service, atl::store::StoreService::Create(context, options));
  ATOLL_RETURN_IF_ERROR(atl::WriteReadyFile(
      flags.ready_file, {{"endpoint", service->endpoint()}, {"arena", service->arena_name()}}));
  service->Run();
  return atl::Status::Ok();  // `service` unlinks the arena as it goes out of scope
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"atoll-objectstore: the host's shared-memory object store"};
  Flags flags;
  app.add_option("--config", flags.config_path, "cluster configuration (TOML)")->required();
  app.add_option("--host", flags.host, "this host's name in the configuration")->required();
  app.add_option("--events-in", flags.events_in,
                 "event bus endpoint to publish to (default: the config's rm.events_in)");
  app.add_option("--ready-file", flags.ready_file,
                 "where to write endpoint and arena name once serving");
  app.add_option("--log-level", flags.log_level,
                 "trace, debug, info, warn, error or off (default: the config's)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  // Logging starts before the configuration is read, so that its errors are logged too; the
  // configuration's level applies once it is loaded, unless --log-level was given.
  atl::InitLogging("objectstore/" + flags.host, flags.log_level.empty() ? "info" : flags.log_level);
  try {
    const atl::Status status = Serve(flags);
    if (!status.ok()) {
      spdlog::error("atoll-objectstore: {}", status.ToString());
      return 1;
    }
    spdlog::info("stopped");
    return 0;
  } catch (const std::exception& e) {
    spdlog::critical("atoll-objectstore: unexpected exception: {}", e.what());
    return 1;
  }
}
