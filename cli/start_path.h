// The one way the CLI starts services: `atoll up`, `atoll start head` and `atoll start host`
// each make a StartPlan and hand it to StartSupervised, which runs it in the background
// under a supervisor of its own (`atoll supervise`, supervise.cc, in a session of its own)
// and returns once every service is ready, with the record the supervisor wrote.
#pragma once

#include <string>

#include "atoll/status.h"
#include "cli/global_options.h"
#include "cli/supervise.h"
#include "launcher/cluster_info.h"

namespace atl {

// The default config: ./config/local.toml, else the source tree's (ATOLL_DEFAULT_CONFIG),
// else <bin>/../config/local.toml, else <bin>/../share/atoll/local.toml.
std::string DefaultConfig();

// Starts `options.plan` under a new supervisor (options.config: empty for DefaultConfig())
// and waits for its word. Fails, with nothing left running, when a service does not come
// up (the error names it and quotes its log), when the supervisor dies first, or past the
// ready timeout of each of the four stages; FailedPrecondition when the state dir's record
// for the plan names processes that still run.
Result<ClusterInfo> StartSupervised(SuperviseOptions options, const GlobalOptions& global);

// The state dir `global` names, absolute.
std::string AbsoluteStateDir(const GlobalOptions& global);

// Prints the "security" line of a start's summary, its first column `width` wide: CURVE
// with the keys folder of `info`, or plain text.
void PrintSecurity(const ClusterInfo& info, int width);

// " --state-dir D" when `state_dir` is not the default one, else "": what a command printed
// for the user to run next needs to find the same state dir.
std::string StateDirFlag(const std::string& state_dir);

}  // namespace atl
