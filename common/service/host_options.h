// A host's description on a service's command line (`--island`, `--devices`, `--kind`), so
// that a host the configuration does not name can join a running cluster (`atoll start
// host`), and one it names can be started with other settings. The object store and the
// executor of a host take the same options, and resolve them the same way.
#pragma once

#include <cstdint>
#include <string>

#include "atoll/status.h"
#include "common/service/cli_app.h"
#include "common/service/config.h"

namespace atl {

struct HostOptions {
  std::string island;    // empty: the configuration's
  uint32_t devices = 0;  // 0: the configuration's
  std::string kind;      // empty: the configuration's
};

// Adds --island, --devices and --kind to `app`.
void AddHostOptions(CLI::App& app, HostOptions& options);

// Where a host is and what it has.
struct HostPlacement {
  std::string island;
  HostConfig host;
};

// Host `name`: the configuration's entry for it with what `options` set replacing its
// values, or, when the configuration does not name it, `options` alone with HostConfig's
// defaults for the rest (one device, "cpu", 256 MiB each, a 256 MiB arena).
// InvalidArgument when such a host names no island or an unknown device kind.
Result<HostPlacement> ResolveHost(const ClusterConfig& config, const std::string& name,
                                  const HostOptions& options);

}  // namespace atl
