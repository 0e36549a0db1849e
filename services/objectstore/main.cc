// atoll-objectstore: the host's object store. Creates the host's shared-memory arena,
// serves the object-store protocol on a free port (or on --endpoint: a store restarted by
// its supervisor comes back where its executor and clients know it) and writes the ready
// file (keys `endpoint` and `arena`). Runs until SIGINT or SIGTERM, then exits 0 with the arena
// unlinked.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "common/service/advertise.h"
#include "common/service/host_options.h"
#include "common/service/ready_file.h"
#include "common/service/service_main.h"
#include "services/objectstore/host_store_options.h"
#include "services/objectstore/store_service.h"

namespace {

atl::Status Serve(atl::ServiceOptions& options, const std::string& host,
                  const atl::HostOptions& host_options, const std::string& rm_endpoint,
                  const std::string& endpoint) {
  ATOLL_ASSIGN_OR_RETURN(atl::ClusterConfig config,
                         atl::StartService("objectstore/" + host, options));
  if (!rm_endpoint.empty()) config.rm_endpoint = rm_endpoint;
  ATOLL_ASSIGN_OR_RETURN(const atl::HostPlacement where,
                         atl::ResolveHost(config, host, host_options));
  const atl::store::StoreOptions store = atl::store::HostStoreOptions(
      config, where, endpoint.empty() ? "tcp://" + config.bind_host + ":*" : endpoint);

  // Two I/O threads: the store keeps one for its heartbeats to the RM, so that shipping a
  // large object to a client (CURVE encrypts it on an I/O thread) never delays them past
  // the liveness window (StoreService::Create).
  zmq::context_t context(2);
  // Before any socket: each socket takes the keys its context has when it is made.
  ATOLL_ASSIGN_OR_RETURN(auto zap, atl::SecureService(context, config));
  ATOLL_ASSIGN_OR_RETURN(auto service, atl::store::StoreService::Create(context, store));
  atl::ServiceEndpoint served{service->endpoint(), ""};
  ATOLL_ASSIGN_OR_RETURN(served.advertised, atl::AdvertisedEndpoint(served.bound, config));
  std::map<std::string, std::string> ready = {{"arena", service->arena_name()}};
  atl::AddReadyEndpoint(ready, "endpoint", served);
  ATOLL_RETURN_IF_ERROR(atl::WriteReadyFile(options.ready_file, ready));
  spdlog::info("serving on {} (bound {}), arena {}", served.advertised, served.bound,
               service->arena_name());
  service->Run();
  spdlog::info("stopped");
  return atl::Status::Ok();  // `service` unlinks the arena as it goes out of scope
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"atoll object store"};
  atl::ServiceOptions options;
  atl::HostOptions host_options;
  std::string host;
  std::string rm_endpoint;
  std::string endpoint;
  atl::AddServiceOptions(app, options);
  atl::AddHostOptions(app, host_options);
  app.add_option("--host", host, "this host's name")->required();
  app.add_option("--rm", rm_endpoint, "the RM's request endpoint (overrides rm.endpoint)");
  app.add_option("--endpoint", endpoint,
                 "the address to serve on (default: a free port on cluster.bind_host)");
  CLI11_PARSE(app, argc, argv);
  return atl::ExitCode(Serve(options, host, host_options, rm_endpoint, endpoint));
}
