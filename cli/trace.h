// `atoll trace`: the event stream of a run as a Chrome / Perfetto trace (trace_events.h).
// Declared here rather than in commands.h; registered in main.cc like the others.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/global_options.h"

namespace atl {

// Adds `atoll trace` to `app`; `global` must outlive app.parse().
void AddTraceCommand(CLI::App& app, const GlobalOptions& global);  // trace.cc

}  // namespace atl
