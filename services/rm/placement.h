// Placement: which physical devices back a new virtual slice. One swappable policy
// behind an interface; the first one spreads load evenly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "atoll/status.h"

namespace atl::rm {

// What a policy sees of one device.
struct DeviceLoad {
  uint32_t device_id = 0;
  std::string island;
  std::string host;
  uint32_t local_index = 0;  // index among the host's devices
  std::string kind;
  bool alive = true;
  uint32_t slices = 0;  // virtual devices already mapped onto it
};

struct SliceRequest {
  uint32_t num_devices = 0;
  std::string island;  // empty: any
  std::string kind;    // empty: any
};

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  // Returns the device ids for virtual devices 0..n-1, all on one island, or an error
  // saying why no island can hold the request.
  virtual Result<std::vector<uint32_t>> Place(const SliceRequest& request,
                                              const std::vector<DeviceLoad>& devices) const = 0;
  // Picks the live device that takes over from `lost` in a slice already holding
  // `slice`: on the lost device's island, of its kind, not in the slice; or an error
  // saying why there is none.
  virtual Result<uint32_t> Replace(uint32_t lost, const std::vector<uint32_t>& slice,
                                   const std::vector<DeviceLoad>& devices) const = 0;
};

// Picks the island with the lowest load that fits, then its least-loaded devices,
// interleaving hosts so that a slice spreads over as many hosts as it can.
std::unique_ptr<PlacementPolicy> MakeSpreadEvenlyPolicy();

}  // namespace atl::rm
