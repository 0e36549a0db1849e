// atoll-simhosts: many simulated hosts in one process (sim_hosts.h), each an executor and
// an object store with sockets of their own. Takes the cluster configuration and the names
// of hosts of kind "sim" in it (--hosts h0,h1,...), registers every one with the RM and
// then writes its ready file (keys `hosts` and `arena_<host>`). Runs until SIGINT or
// SIGTERM, then exits 0 with every arena unlinked.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "common/service/host_options.h"
#include "common/service/ready_file.h"
#include "common/service/service_main.h"
#include "services/simhosts/sim_hosts.h"

namespace {

// Per host: hundreds register one after another with one RM.
constexpr auto kStartTimeout = std::chrono::seconds(10);

atl::Status Serve(atl::ServiceOptions& options, const std::vector<std::string>& names,
                  const std::string& rm_endpoint) {
  ATOLL_ASSIGN_OR_RETURN(atl::ClusterConfig config, atl::StartService("simhosts", options));
  if (!rm_endpoint.empty()) config.rm_endpoint = rm_endpoint;
  std::vector<atl::HostPlacement> hosts;
  for (const std::string& name : names) {
    // Only hosts the configuration names: their sizes (small arenas) come from it.
    ATOLL_RETURN_IF_ERROR(atl::FindHost(config, name).status());
    ATOLL_ASSIGN_OR_RETURN(atl::HostPlacement where, atl::ResolveHost(config, name, {}));
    hosts.push_back(std::move(where));
  }
  ATOLL_ASSIGN_OR_RETURN(auto sim, atl::simhosts::SimHosts::Start(config, hosts, kStartTimeout));
  ATOLL_RETURN_IF_ERROR(atl::WriteReadyFile(options.ready_file, sim->ReadyValues()));
  spdlog::info("serving {} simulated hosts", hosts.size());
  sim->Wait();
  spdlog::info("stopped");
  return atl::Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"atoll simulated hosts: many sim hosts' executors and object stores in one process"};
  atl::ServiceOptions options;
  std::vector<std::string> hosts;
  std::string rm_endpoint;
  atl::AddServiceOptions(app, options);
  app.add_option("--hosts", hosts, "the hosts to run, of kind \"sim\" in the configuration")
      ->required()
      ->delimiter(',');
  app.add_option("--rm", rm_endpoint, "the RM's request endpoint (overrides rm.endpoint)");
  CLI11_PARSE(app, argc, argv);
  return atl::ExitCode(Serve(options, hosts, rm_endpoint));
}
