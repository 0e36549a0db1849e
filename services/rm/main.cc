// atoll-rm: the resource manager and event bus of an atoll cluster.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "common/service/advertise.h"
#include "common/service/ready_file.h"
#include "common/service/service_main.h"
#include "services/rm/rm_service.h"

namespace {

atl::Status Serve(atl::ServiceOptions& options, const std::string& endpoint,
                  const std::string& events_out, const std::string& state_file) {
  ATOLL_ASSIGN_OR_RETURN(atl::ClusterConfig config, atl::StartService("rm", options));
  if (!options.bind.empty()) {
    // The RM's ports are the config's; --bind says on which interface (and --events-in,
    // which a restart passes, says all of it).
    ATOLL_ASSIGN_OR_RETURN(config.rm_endpoint, atl::WithHost(config.rm_endpoint, options.bind));
    ATOLL_ASSIGN_OR_RETURN(config.events_out_endpoint,
                           atl::WithHost(config.events_out_endpoint, options.bind));
    if (options.events_in.empty()) {
      ATOLL_ASSIGN_OR_RETURN(config.events_in_endpoint,
                             atl::WithHost(config.events_in_endpoint, options.bind));
    }
  }
  if (!endpoint.empty()) config.rm_endpoint = endpoint;
  if (!events_out.empty()) config.events_out_endpoint = events_out;
  zmq::context_t context;
  // Before any socket: each socket takes the keys its context has when it is made.
  ATOLL_ASSIGN_OR_RETURN(auto zap, atl::SecureService(context, config));
  atl::rm::RmService rm(context, std::move(config), state_file);
  ATOLL_RETURN_IF_ERROR(rm.Bind());
  std::map<std::string, std::string> ready;
  atl::AddReadyEndpoint(ready, "endpoint", rm.endpoint());
  atl::AddReadyEndpoint(ready, "events_in", rm.events_in());
  atl::AddReadyEndpoint(ready, "events_out", rm.events_out());
  ATOLL_RETURN_IF_ERROR(atl::WriteReadyFile(options.ready_file, ready));
  spdlog::info("serving on {}; events in {} out {}", rm.endpoint().advertised,
               rm.events_in().advertised, rm.events_out().advertised);
  rm.Run();
  spdlog::info("stopped");
  return atl::Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"atoll resource manager"};
  atl::ServiceOptions options;
  std::string endpoint, events_out, state_file;
  atl::AddServiceOptions(app, options);
  app.add_option("--endpoint", endpoint, "request endpoint (overrides rm.endpoint)");
  app.add_option("--events-out", events_out, "event output endpoint (overrides rm.events_out)");
  app.add_option("--state-file", state_file,
                 "where the RM keeps its state across restarts (default: nowhere)");
  CLI11_PARSE(app, argc, argv);
  return atl::ExitCode(Serve(options, endpoint, events_out, state_file));
}
