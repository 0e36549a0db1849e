// How a program on this machine finds the cluster it talks to: every `atoll` command that
// talks to one (cli/) and the Python client's atoll.connect() (python/) look it up the same
// way, from what the user gave and the state dir's records.
#pragma once

#include <string>

#include "atoll/status.h"
#include "launcher/cluster_info.h"

namespace atl {

// Where to look; each field empty for its default.
struct ClusterLookup {
  // Where `atoll up` and `atoll start` record what they start (cluster.toml, host-*.toml);
  // empty: DefaultStateDir() ($ATOLL_HOME, else $HOME/.atoll, else /tmp/atoll-<uid>).
  std::string state_dir;
  // The RM's client endpoint; empty: the one recorded in the state dir.
  std::string rm_endpoint;
  // The event bus's subscriber endpoint; empty: the one recorded in the state dir.
  std::string events_endpoint;
  // The CURVE keys directory, or "plain"; empty: <state dir>/keys when it holds the
  // cluster's public key, else plain text. (The client key is $ATOLL_CLIENT_KEY, else
  // "default".)
  std::string keys_dir;
};

// The keys directory to connect with, resolved as ClusterLookup::keys_dir says ("plain" for
// plain text).
std::string KeysDir(const ClusterLookup& lookup);

// The cluster to talk to. With an RM endpoint, a ClusterInfo holding it (and the events
// endpoint, or the state dir's events_out when it records a cluster); otherwise the state
// dir's cluster.toml, or, on a machine that only joined hosts, the record of one of them.
// Fails with Unavailable "no cluster running: ..." when the state dir records no cluster or
// its RM process is gone, and with Unavailable "the RM is down and its supervisor ... is
// starting it again" while a supervisor is bringing it back.
Result<ClusterInfo> ResolveCluster(const ClusterLookup& lookup);

}  // namespace atl
