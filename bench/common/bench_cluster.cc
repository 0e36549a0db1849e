#include "bench/common/bench_cluster.h"

#include <filesystem>
#include <fstream>

namespace atl::bench {

Result<std::unique_ptr<LocalCluster>> StartBenchCluster(const std::string& dir,
                                                        const std::string& config_toml,
                                                        const std::string& bin_dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return Unavailable("cannot create " + dir + ": " + error.message());
  LocalClusterOptions options;
  options.config_path = dir + "/cluster.toml";
  options.state_dir = dir + "/state";
  options.bin_dir = bin_dir;
  std::ofstream(options.config_path) << config_toml;
  auto cluster = std::make_unique<LocalCluster>(options);
  ATOLL_RETURN_IF_ERROR(cluster->Start());
  return cluster;
}

}  // namespace atl::bench
