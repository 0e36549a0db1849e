// Peers: tells each shard of a lowered run which other executors send it tuples, so that an
// executor told that one of them was lost fails the shard instead of letting it wait for
// ever (see proto::Entry::peers and HostChanged).
#pragma once

#include <map>
#include <string>

#include "common/proto/protocol.h"

namespace atl {

// Fills entry.peers of every entry of `per_scheduler` (one run, every island) from the
// tuple destinations of the others.
void AddPeers(std::map<std::string, proto::SubmitProgram>& per_scheduler);

}  // namespace atl
