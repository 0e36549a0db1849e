// The RM's state file: everything a restarted RM needs to carry on as if it had not
// stopped (hosts and their devices, island schedulers, clients, slices with their
// virtual->physical map, registered functions, id counters), as one msgpack array written
// on every change: to a temporary file, then renamed over the old one, so that a crash
// mid-write leaves the previous state whole. Liveness is not kept: a restarted RM gives
// every host and client a fresh `liveness` window to heartbeat again (their connections
// come back by themselves: ZeroMQ reconnects to the same endpoint).
#pragma once

#include <string>

#include "atoll/status.h"
#include "services/rm/rm_state.h"

namespace atl::rm {

// Writes what persists of `state` to `path` (through `path`.tmp). Unavailable, naming the
// file, when it cannot be written; the previous file is then untouched.
Status WriteStateFile(const std::string& path, const RmState& state);

// Reads a state WriteStateFile wrote. The records' unkept fields (liveness, connections)
// are left at their defaults. NotFound when the file does not exist, Unavailable when it
// cannot be read, InvalidArgument naming the file when its bytes are not such a state
// (truncated, another version, garbage, or records that name devices, hosts or islands
// the state does not hold).
Result<RmState> ReadStateFile(const std::string& path);

}  // namespace atl::rm
