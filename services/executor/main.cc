// atoll-executor: runs one host's devices.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "common/service/host_options.h"
#include "common/service/ready_file.h"
#include "common/service/service_main.h"
#include "services/executor/executor_service.h"

namespace {

constexpr auto kStartTimeout = std::chrono::seconds(10);

atl::Status Serve(atl::ServiceOptions& options, const std::string& host,
                  const atl::HostOptions& host_options, const std::string& store_endpoint,
                  const std::string& rm_endpoint, const std::string& control_endpoint,
                  const std::string& data_endpoint) {
  ATOLL_ASSIGN_OR_RETURN(atl::ClusterConfig config, atl::StartService("executor/" + host, options));
  if (!rm_endpoint.empty()) config.rm_endpoint = rm_endpoint;
  ATOLL_ASSIGN_OR_RETURN(const atl::HostPlacement where,
                         atl::ResolveHost(config, host, host_options));
  zmq::context_t context;
  // Before any socket: each socket takes the keys its context has when it is made.
  ATOLL_ASSIGN_OR_RETURN(auto zap, atl::SecureService(context, config));
  atl::executor::ExecutorService executor(context, std::move(config), where, store_endpoint);
  executor.BindOn(control_endpoint, data_endpoint);
  ATOLL_RETURN_IF_ERROR(executor.Start(kStartTimeout));
  std::map<std::string, std::string> ready;
  atl::AddReadyEndpoint(ready, "control", executor.control_endpoint());
  atl::AddReadyEndpoint(ready, "data", executor.data_endpoint());
  ATOLL_RETURN_IF_ERROR(atl::WriteReadyFile(options.ready_file, ready));
  spdlog::info("serving: control {} data {}", executor.control_endpoint().advertised,
               executor.data_endpoint().advertised);
  executor.Run();
  spdlog::info("stopped");
  return atl::Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"atoll executor"};
  atl::ServiceOptions options;
  atl::HostOptions host_options;
  std::string host, store_endpoint, rm_endpoint, control_endpoint, data_endpoint;
  atl::AddServiceOptions(app, options);
  atl::AddHostOptions(app, host_options);
  app.add_option("--host", host, "this host's name")->required();
  app.add_option("--store", store_endpoint, "the host's object store endpoint")->required();
  app.add_option("--rm", rm_endpoint, "the RM's request endpoint (overrides rm.endpoint)");
  app.add_option("--control-endpoint", control_endpoint,
                 "the address schedulers and the RM reach it on (default: a free port on "
                 "cluster.bind_host)");
  app.add_option("--data-endpoint", data_endpoint,
                 "the address peer executors send tuples to (default: a free port on "
                 "cluster.bind_host)");
  CLI11_PARSE(app, argc, argv);
  return atl::ExitCode(Serve(options, host, host_options, store_endpoint, rm_endpoint,
                             control_endpoint, data_endpoint));
}
