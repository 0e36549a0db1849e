// What the commands that start services (`atoll up`, `atoll start head`, `atoll start
// host`; start_path.h) and their supervisor (`atoll supervise`, supervise.cc) share: the
// supervisor's options, which they pass on its command line, and its log file.
#pragma once

#include <string>

#include "atoll/status.h"
#include "launcher/start_plan.h"

namespace atl {

struct SuperviseOptions {
  std::string config;
  std::string bin_dir;
  std::string log_level;
  double ready_timeout_s = 20;
  std::string ready_file;  // where the supervisor says "ready" or "failed" (ready_file.h)
  StartPlan plan;          // what it starts
  std::string keys_dir;    // LocalClusterOptions::keys_dir: empty, the config's or the state dir's
};

// The supervisor's stdout and stderr: <state_dir>/logs/supervisor.log for the head's record,
// <state_dir>/logs/supervisor-<record>.log for a host's.
std::string SupervisorLog(const std::string& state_dir, const std::string& record);

// A plan as one JSON object, as `atoll supervise --plan` takes it, and back; the hosts'
// sizes are not part of it (services take them from the config, see StartPlan).
std::string PlanToJson(const StartPlan& plan);
Result<StartPlan> PlanFromJson(const std::string& json);

}  // namespace atl
