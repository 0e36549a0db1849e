// The `atoll` subcommands, one file each. Each Add*Command adds its subcommand to `app`;
// the subcommand's callback runs the command (see global_options.h for the conventions).
// `global` must outlive app.parse().
#pragma once

#include <CLI/CLI.hpp>

#include "cli/global_options.h"

namespace atl {

void AddUpCommand(CLI::App& app, const GlobalOptions& global);          // up.cc
void AddStartCommand(CLI::App& app, const GlobalOptions& global);       // start.cc
void AddSuperviseCommand(CLI::App& app, const GlobalOptions& global);   // supervise.cc
void AddStopCommands(CLI::App& app, const GlobalOptions& global);       // stop.cc: stop, down
void AddStatusCommand(CLI::App& app, const GlobalOptions& global);      // status.cc
void AddWatchCommand(CLI::App& app, const GlobalOptions& global);       // watch.cc
void AddTopCommand(CLI::App& app, const GlobalOptions& global);         // top.cc
void AddDashboardCommand(CLI::App& app, const GlobalOptions& global);   // dashboard.cc
void AddExampleCommand(CLI::App& app, const GlobalOptions& global);     // example.cc
void AddKeygenCommand(CLI::App& app, const GlobalOptions& global);      // keygen.cc
void AddProbeCommand(CLI::App& app, const GlobalOptions& global);       // probe.cc
void AddCheckpointCommand(CLI::App& app, const GlobalOptions& global);  // checkpoint.cc
void AddOnnxCommand(CLI::App& app, const GlobalOptions& global);        // onnx.cc

}  // namespace atl
