#include "examples/common/example_cluster.h"

#include <stdlib.h>

#include <filesystem>

#include <CLI/CLI.hpp>

#include "common/base/state_dir.h"

namespace atl::examples {

ExampleCluster::ExampleCluster(std::string default_config) : config_(std::move(default_config)) {}

ExampleCluster::~ExampleCluster() {
  if (cluster_) (void)cluster_->Stop();
  if (!dir_.empty()) std::filesystem::remove_all(dir_);
}

void ExampleCluster::AddOptions(CLI::App& app) {
  app.add_option("--rm", rm_, "the RM of a running cluster; default: start one");
  app.add_option("--config", config_, "the cluster to start when --rm is not given")
      ->capture_default_str();
}

Result<std::unique_ptr<Client>> ExampleCluster::Connect(const std::string& name) {
  std::string endpoint = rm_;
  std::string keys_dir;  // a running cluster's: the client finds them ($ATOLL_KEYS, ~/.atoll)
  if (endpoint.empty()) {
    char pattern[] = "/tmp/atoll-example-XXXXXX";
    if (mkdtemp(pattern) == nullptr) return Unavailable("cannot make a temporary directory");
    dir_ = pattern;
    LocalClusterOptions options;
    options.config_path = config_;
    options.state_dir = dir_;
    // Checkpoints outlive this cluster, where `atoll up`'s clusters keep theirs: a run may
    // resume from them on the next one.
    options.checkpoint_root = DefaultStateDir() + "/checkpoints";
    cluster_ = std::make_unique<LocalCluster>(options);
    ATOLL_RETURN_IF_ERROR(
        cluster_->Start().WithContext("starting a local cluster from " + config_));
    endpoint = cluster_->info().rm_endpoint;
    keys_dir = cluster_->keys_dir();
  }
  return Client::Connect({.rm_endpoint = endpoint, .name = name, .keys_dir = keys_dir});
}

}  // namespace atl::examples
