// What `atoll up` and its supervisor (`atoll supervise`, supervise.cc) share: the
// supervisor's options, which `up` passes on its command line, and its log file.
#pragma once

#include <string>

namespace atl {

struct SuperviseOptions {
  std::string config;
  std::string bin_dir;
  std::string log_level;
  double ready_timeout_s = 20;
  std::string ready_file;  // where the supervisor says "ready" or "failed" (ready_file.h)
};

// <state_dir>/logs/supervisor.log: the supervisor's stdout and stderr.
std::string SupervisorLog(const std::string& state_dir);

}  // namespace atl
