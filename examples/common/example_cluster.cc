#include "examples/common/example_cluster.h"

#include <stdlib.h>

#include <filesystem>

namespace atl::examples {

ExampleCluster::~ExampleCluster() {
  if (cluster_) (void)cluster_->Stop();
  if (!dir_.empty()) std::filesystem::remove_all(dir_);
}

Result<std::string> ExampleCluster::Endpoint(const std::string& rm, const std::string& config) {
  if (!rm.empty()) return rm;
  char pattern[] = "/tmp/atoll-example-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return Unavailable("cannot make a temporary directory");
  dir_ = pattern;
  LocalClusterOptions options;
  options.config_path = config;
  options.state_dir = dir_;
  cluster_ = std::make_unique<LocalCluster>(options);
  ATOLL_RETURN_IF_ERROR(cluster_->Start().WithContext("starting a local cluster from " + config));
  return cluster_->info().rm_endpoint;
}

}  // namespace atl::examples
