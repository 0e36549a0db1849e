// `atoll submit`: runs a job on the cluster (see submit.cc). Follows the conventions of
// global_options.h: output on stdout, failures as "atoll: ..." on stderr plus
// CLI::RuntimeError(exit code).
#pragma once

#include <CLI/CLI.hpp>

#include "cli/global_options.h"

namespace atl {

void AddSubmitCommand(CLI::App& app, const GlobalOptions& global);

}  // namespace atl
