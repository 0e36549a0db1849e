// The cluster an example program runs on: a running one (--rm), or else one of its own,
// started from a config (--config; on free loopback ports, the way tests start theirs) and
// stopped and removed when this object goes away, all but its checkpoints: those go where
// `atoll up`'s go (<state dir>/checkpoints), so that a later run can resume from them.
#pragma once

#include <memory>
#include <string>

#include "atoll/client.h"
#include "atoll/status.h"
#include "common/service/cli_app.h"
#include "launcher/local_cluster.h"

namespace atl::examples {

class ExampleCluster {
 public:
  // `default_config`: the cluster to start when --rm is not given.
  explicit ExampleCluster(std::string default_config);
  ~ExampleCluster();
  ExampleCluster(const ExampleCluster&) = delete;
  ExampleCluster& operator=(const ExampleCluster&) = delete;

  // Adds --rm and --config to `app`.
  void AddOptions(CLI::App& app);
  // A client called `name` of the cluster --rm names, or else of one started from --config.
  Result<std::unique_ptr<Client>> Connect(const std::string& name);

 private:
  std::string rm_;
  std::string config_;
  std::string dir_;
  std::unique_ptr<LocalCluster> cluster_;
};

}  // namespace atl::examples
