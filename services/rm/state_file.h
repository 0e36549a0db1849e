// The RM's state file: everything a restarted RM needs to carry on as if it had not
// stopped (hosts and their devices, island schedulers, clients, slices with their
// virtual->physical map, registered functions, id counters), as one msgpack array written
// on every change: to a temporary file, then renamed over the old one, so that a crash
// mid-write leaves the previous state whole. Liveness is not kept: a restarted RM gives
// every host and client a fresh window to heartbeat again, the longer of `liveness`
// periods and kReconnectGrace (their connections come back by themselves: ZeroMQ
// reconnects to the same endpoint).
//
// A registered function is the one change that is not written whole: rewriting every
// function held at each registration made registering n functions cost O(n^2) (5.7 ms a
// registration at 3,000 held). It is appended to the function journal (`path`.functions),
// one msgpack record [id, function] each, which the next whole write folds in and removes.
// Reading replays the records the state file does not hold already: those of ids from its
// next_function_id on (an older record is one the state file holds, or dropped since). A
// record cut short (a crash mid-append) ends the journal.
#pragma once

#include <string>

#include "atoll/status.h"
#include "services/rm/rm_state.h"

namespace atl::rm {

// Writes what persists of `state` to `path` (through `path`.tmp), then removes the function
// journal. Unavailable, naming the file, when it cannot be written; the previous file is
// then untouched.
Status WriteStateFile(const std::string& path, const RmState& state);

// Appends function `id` to the function journal of the state file `path`. Unavailable,
// naming the journal, when it cannot be written.
Status AppendFunction(const std::string& path, uint64_t id, const RmState::Function& function);

// Reads a state WriteStateFile wrote, and the functions appended since. The records'
// unkept fields (liveness, connections) are left at their defaults. NotFound when the file
// does not exist, Unavailable when it cannot be read, InvalidArgument naming the file when
// its bytes are not such a state (truncated, another version, garbage, or records that name
// devices, hosts, islands, clients or slices the state does not hold) or the journal's are
// not function records.
Result<RmState> ReadStateFile(const std::string& path);

}  // namespace atl::rm
