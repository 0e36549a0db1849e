#include "services/rm/placement.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace atl::rm {

namespace {

class SpreadEvenly final : public PlacementPolicy {
 public:
  Result<std::vector<uint32_t>> Place(const SliceRequest& request,
                                      const std::vector<DeviceLoad>& devices) const override {
    if (request.num_devices == 0) return InvalidArgument("a slice needs at least one device");
    std::map<std::string, std::vector<const DeviceLoad*>> by_island;
    for (const auto& d : devices) {
      if (!d.alive) continue;
      if (!request.kind.empty() && d.kind != request.kind) continue;
      if (!request.island.empty() && d.island != request.island) continue;
      by_island[d.island].push_back(&d);
    }
    if (!request.island.empty() && by_island.empty()) {
      return NotFound(fmt::format("island '{}' has no live {}devices", request.island,
                                  request.kind.empty() ? "" : request.kind + " "));
    }
    const std::vector<const DeviceLoad*>* best = nullptr;
    double best_load = 0;
    for (const auto& [island, ds] : by_island) {
      if (ds.size() < request.num_devices) continue;
      double load = 0;
      for (const auto* d : ds) load += d->slices;
      load /= static_cast<double>(ds.size());
      if (best == nullptr || load < best_load) {
        best = &ds;
        best_load = load;
      }
    }
    if (best == nullptr) {
      size_t largest = 0;
      for (const auto& [island, ds] : by_island) largest = std::max(largest, ds.size());
      return FailedPrecondition(fmt::format(
          "no island has {} live {}devices{} (largest has {})", request.num_devices,
          request.kind.empty() ? "" : request.kind + " ",
          request.island.empty() ? "" : " on island '" + request.island + "'", largest));
    }
    // Least loaded first; among equals, device 0 of every host before device 1 of any,
    // which interleaves hosts.
    std::vector<const DeviceLoad*> order = *best;
    std::sort(order.begin(), order.end(), [](const DeviceLoad* a, const DeviceLoad* b) {
      return std::tie(a->slices, a->local_index, a->device_id) <
             std::tie(b->slices, b->local_index, b->device_id);
    });
    std::vector<uint32_t> chosen;
    for (uint32_t i = 0; i < request.num_devices; ++i) chosen.push_back(order[i]->device_id);
    // Virtual device order follows physical id so neighbouring shards sit on one host.
    std::sort(chosen.begin(), chosen.end());
    return chosen;
  }

  Result<uint32_t> Replace(uint32_t lost, const std::vector<uint32_t>& slice,
                           const std::vector<DeviceLoad>& devices) const override {
    if (lost >= devices.size()) return NotFound(fmt::format("device {} is unknown", lost));
    const DeviceLoad& was = devices[lost];
    const DeviceLoad* best = nullptr;
    for (const auto& d : devices) {
      if (!d.alive || d.island != was.island || d.kind != was.kind) continue;
      if (std::find(slice.begin(), slice.end(), d.device_id) != slice.end()) continue;
      if (best == nullptr || std::tie(d.slices, d.local_index, d.device_id) <
                                 std::tie(best->slices, best->local_index, best->device_id)) {
        best = &d;
      }
    }
    if (best == nullptr) {
      return FailedPrecondition(
          fmt::format("island '{}' has no live {} device outside the slice "
                      "to take over from device {}",
                      was.island, was.kind, lost));
    }
    return best->device_id;
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeSpreadEvenlyPolicy() {
  return std::make_unique<SpreadEvenly>();
}

}  // namespace atl::rm
