// Placeholder: the real `atoll submit` replaces this file.
#include "cli/submit.h"

#include <iostream>

namespace atl {

void AddSubmitCommand(CLI::App& app, const GlobalOptions& global) {
  auto* cmd = app.add_subcommand("submit", "Submit a job to the cluster (not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] {
    std::cerr << "submit: not implemented yet" << std::endl;
    throw CLI::RuntimeError(2);
  });
}

}  // namespace atl
