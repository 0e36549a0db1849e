// The cluster an example program runs on: a running one (--rm), or else one of its own,
// started from a config (on free loopback ports, the way tests start theirs) and stopped
// and removed when this object goes away.
#pragma once

#include <memory>
#include <string>

#include "atoll/status.h"
#include "cli/local_cluster.h"

namespace atl::examples {

class ExampleCluster {
 public:
  ExampleCluster() = default;
  ~ExampleCluster();
  ExampleCluster(const ExampleCluster&) = delete;
  ExampleCluster& operator=(const ExampleCluster&) = delete;

  // The RM endpoint: `rm` when given, else that of a cluster started from `config`.
  Result<std::string> Endpoint(const std::string& rm, const std::string& config);

 private:
  std::string dir_;
  std::unique_ptr<LocalCluster> cluster_;
};

}  // namespace atl::examples
