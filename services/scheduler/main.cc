// atoll-scheduler: the gang scheduler of one island.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "common/ready_file.h"
#include "common/service_main.h"
#include "services/scheduler/scheduler_service.h"

namespace {

constexpr auto kRegisterTimeout = std::chrono::seconds(10);

atl::Status Serve(atl::ServiceOptions& options, const std::string& island,
                  const std::string& rm_endpoint) {
  ATOLL_ASSIGN_OR_RETURN(atl::ClusterConfig config,
                         atl::StartService("scheduler/" + island, options));
  if (!rm_endpoint.empty()) config.rm_endpoint = rm_endpoint;
  zmq::context_t context;
  atl::scheduler::SchedulerService scheduler(context, std::move(config), island);
  ATOLL_RETURN_IF_ERROR(scheduler.Start(kRegisterTimeout));
  ATOLL_RETURN_IF_ERROR(
      atl::WriteReadyFile(options.ready_file, {{"endpoint", scheduler.endpoint()}}));
  spdlog::info("scheduling island {} on {}", island, scheduler.endpoint());
  scheduler.Run();
  spdlog::info("stopped");
  return atl::Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"atoll island scheduler"};
  atl::ServiceOptions options;
  std::string island, rm_endpoint;
  atl::AddServiceOptions(app, options);
  app.add_option("--island", island, "the island this scheduler orders")->required();
  app.add_option("--rm", rm_endpoint, "the RM's request endpoint (overrides rm.endpoint)");
  CLI11_PARSE(app, argc, argv);
  return atl::ExitCode(Serve(options, island, rm_endpoint));
}
