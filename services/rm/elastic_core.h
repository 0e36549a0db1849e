// The core of the RM's elasticity, without its sockets: which services went silent, and
// how a slice with virtual devices on a lost host moves onto live devices. Pure functions over
// RmState; the Controller (controller_elastic.cc) calls them, then tells executors,
// object stores and clients what changed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "services/rm/placement.h"
#include "services/rm/rm_state.h"

namespace atl::rm {

// The live hosts not heard from for longer than `lapse` at `now`, in name order.
std::vector<std::string> SilentHosts(const RmState& state, Clock::time_point now,
                                     Clock::duration lapse);
// The hosts whose object store is believed alive but was not heard from for longer than
// `lapse` at `now`, in name order.
std::vector<std::string> SilentStores(const RmState& state, Clock::time_point now,
                                      Clock::duration lapse);
// The islands whose scheduler is believed alive but was not heard from for longer than
// `lapse` at `now`, in name order.
std::vector<std::string> SilentSchedulers(const RmState& state, Clock::time_point now,
                                          Clock::duration lapse);

// Moves the virtual devices of slice `slice_id` that sit on host `lost_host` onto devices
// `policy` picks (PlacementPolicy::Replace: live, on the same island, of the same kind, not
// already in the slice), and the load they carry with them. Returns true when the slice
// moved, false when it has no device on that host (nothing changes), or the policy's error
// when some device has no replacement: then nothing changes either, the slice keeping its
// lost devices until their host is back. The slice must exist.
Result<bool> RemapSliceOff(RmState& state, uint64_t slice_id, const std::string& lost_host,
                           const PlacementPolicy& policy);

}  // namespace atl::rm
