// Where a machine's local cluster keeps its state (cluster.toml, logs, keys): shared by the
// launcher, which writes it, and every program that finds the cluster from it (the CLI,
// the client library looking for its keys).
#pragma once

#include <string>

namespace atl {

// $ATOLL_HOME if set and not empty, else $HOME/.atoll, else /tmp/atoll-<uid>.
std::string DefaultStateDir();

}  // namespace atl
