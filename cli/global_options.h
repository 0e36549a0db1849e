// Options shared by every `atoll` command, and how a command finds the cluster it talks to.
//
// Conventions for a command (see main.cc): it is a CLI11 subcommand whose callback prints
// its output on stdout; on failure it prints one message starting with "atoll: " on stderr
// and throws CLI::RuntimeError(exit_code) (1 for an ordinary failure), which main() turns
// into the process's exit status without printing anything more. Use Fail() for that.
#pragma once

#include <string>
#include <string_view>

#include <zmq.hpp>

#include "atoll/status.h"
#include "launcher/find_cluster.h"

namespace atl {

// The state dir, RM, event bus and keys the user named (--state-dir, --rm/$ATOLL_RM,
// --events/$ATOLL_EVENTS, --keys/$ATOLL_KEYS), looked up as ClusterLookup says:
// ResolveCluster(global) is the cluster a command talks to, KeysDir(global) its keys.
struct GlobalOptions : ClusterLookup {};

// Gives `context`'s sockets the command's client keys (net::SetCredentials).
Status SecureContext(zmq::context_t& context, const GlobalOptions& global);

// Prints "atoll: <message>" on stderr and throws CLI::RuntimeError(exit_code).
[[noreturn]] void Fail(std::string_view message, int exit_code = 1);
[[noreturn]] void Fail(const Status& status, int exit_code = 1);

}  // namespace atl
