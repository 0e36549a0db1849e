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
#include "launcher/cluster_info.h"

namespace atl {

struct GlobalOptions {
  // Where `atoll up` records the cluster (cluster.toml, logs). Defaults to
  // DefaultStateDir(): $ATOLL_HOME, else $HOME/.atoll, else /tmp/atoll-<uid>.
  std::string state_dir;
  // The RM's client endpoint; empty: the one recorded in the state dir (--rm EP).
  std::string rm_endpoint;
  // The event bus's subscriber endpoint; empty: the one recorded in the state dir
  // (--events EP).
  std::string events_endpoint;
  // The CURVE keys directory (--keys, $ATOLL_KEYS) or "plain"; empty: <state dir>/keys
  // when it holds the cluster's public key, else plain text. The client key is
  // $ATOLL_CLIENT_KEY, else "default".
  std::string keys_dir;
};

// The keys directory the command connects with, resolved as GlobalOptions::keys_dir says
// ("plain" for plain text).
std::string KeysDir(const GlobalOptions& global);
// Gives `context`'s sockets the command's client keys (net::SetCredentials).
Status SecureContext(zmq::context_t& context, const GlobalOptions& global);

// The cluster to talk to. With --rm, a ClusterInfo holding that endpoint (and --events, or
// the state dir's events_out when it records a cluster); otherwise the state dir's
// cluster.toml, or, on a machine that only joined hosts, the record of one of them. Fails with
// Unavailable "no cluster running: ..." when the state dir records no cluster or its RM process is
// gone, and with Unavailable "the RM is down and its supervisor ... is starting it again" while a
// supervisor is bringing it back.
Result<ClusterInfo> ResolveCluster(const GlobalOptions& global);

// Prints "atoll: <message>" on stderr and throws CLI::RuntimeError(exit_code).
[[noreturn]] void Fail(std::string_view message, int exit_code = 1);
[[noreturn]] void Fail(const Status& status, int exit_code = 1);

}  // namespace atl
