// `atoll start head|host --foreground`: the command stays attached to what it started, as a
// container's main process must. It returns when its supervisor exits (an error: the part
// is down, and the container with it) or when it is told to stop (SIGTERM, SIGINT), when
// it stops its part as `atoll stop` would: a host drained first, then the supervisor and
// the services.
#pragma once

#include <chrono>

#include "atoll/status.h"
#include "launcher/cluster_info.h"

namespace atl {

// Waits in the foreground for the supervisor of `info`, a child of this process that
// StartSupervised started; InstallShutdownSignals() must have been called before it was
// started. OK once a requested stop is done (each process given `stop_timeout` after
// SIGTERM before SIGKILL); Unavailable, naming its log, when the supervisor ended on its
// own, or when stopping left processes running.
Status StayInForeground(const ClusterInfo& info, std::chrono::milliseconds stop_timeout);

}  // namespace atl
