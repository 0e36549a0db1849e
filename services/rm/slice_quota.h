// The RM's per-client quotas ([quotas] slices and devices): what a client holds is counted
// from the RM's state itself, not kept apart, so that the count survives an RM restart
// with its state file and a dropped client's slices stop counting as they are erased.
#pragma once

#include <cstdint>

#include "atoll/status.h"
#include "common/service/config.h"
#include "services/rm/rm_state.h"

namespace atl::rm {

// OK when `client` may create one more slice of `devices` devices within its `slices` and
// `devices` quotas; ResourceExhausted naming the first quota it would exceed otherwise.
Status CheckSliceQuota(const RmState& state, const QuotaConfig& quotas, uint64_t client,
                       uint32_t devices);

}  // namespace atl::rm
