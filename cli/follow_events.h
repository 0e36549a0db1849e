// Following the cluster's event bus from a command (`atoll watch`, `atoll trace`): find the
// bus, subscribe, and hand every event to the command until it has what it wants, a time
// limit passes, or SIGINT/SIGTERM.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cli/global_options.h"
#include "common/net/event_reader.h"

namespace atl {

// Returns true to go on, false to stop; an error means the event was malformed, which is
// reported once on stderr ("atoll: <command>: skipping malformed events (...)") and skipped.
using OnEvent = std::function<Result<bool>(const Event&)>;

struct FollowOptions {
  std::string command;              // "watch", "trace": prefixes every message
  std::vector<std::string> topics;  // topic prefixes; empty: all
  double timeout_s = 0;             // 0: until on_event says stop or a signal
  std::string banner;               // printed on stderr when it is a terminal; {} = endpoint
};

// Fails the command (Fail) when no bus is known or it cannot be reached or read.
void FollowEvents(const GlobalOptions& global, const FollowOptions& options,
                  const OnEvent& on_event);

}  // namespace atl
