// A benchmark's cluster, started the way `atoll up` starts one: the given configuration is
// written to <dir>/cluster.toml, the state (logs, ready files) goes under <dir>/state, and
// the service binaries come from `bin_dir`. The cluster stops when the result is destroyed.
#pragma once

#include <memory>
#include <string>

#include "atoll/status.h"
#include "cli/local_cluster.h"

namespace atl::bench {

Result<std::unique_ptr<LocalCluster>> StartBenchCluster(const std::string& dir,
                                                        const std::string& config_toml,
                                                        const std::string& bin_dir);

}  // namespace atl::bench
