#include "services/rm/slice_quota.h"

#include "common/service/quota.h"

namespace atl::rm {

Status CheckSliceQuota(const RmState& state, const QuotaConfig& quotas, uint64_t client,
                       uint32_t devices) {
  uint64_t slices_held = 0;
  uint64_t devices_held = 0;
  for (const auto& [id, slice] : state.slices) {
    if (slice.client != client) continue;
    ++slices_held;
    devices_held += slice.device_ids.size();
  }
  ATOLL_RETURN_IF_ERROR(
      CheckQuota({client, "slices", "", "slices", quotas.slices, slices_held, 1}));
  return CheckQuota({client, "devices", "", "devices", quotas.devices, devices_held, devices});
}

}  // namespace atl::rm
