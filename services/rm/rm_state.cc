#include "services/rm/rm_state.h"

#include <algorithm>
#include <set>

namespace atl::rm {

std::vector<DeviceLoad> Loads(const RmState& state) {
  std::vector<DeviceLoad> loads;
  for (const auto& d : state.devices) {
    const RmState::Host& h = state.hosts.at(d.host);
    loads.push_back({d.id, h.island, h.name, d.local_index, d.desc.kind,
                     h.alive && h.store_alive && !h.drained, d.slices});
  }
  return loads;
}

std::vector<std::string> IslandNames(const RmState& state,
                                     const std::vector<std::string>& configured) {
  std::set<std::string> joined;
  for (const auto& [island, endpoint] : state.scheduler_by_island) joined.insert(island);
  for (const auto& [name, host] : state.hosts) joined.insert(host.island);
  std::vector<std::string> names = configured;
  for (const std::string& island : joined) {
    if (std::find(names.begin(), names.end(), island) == names.end()) names.push_back(island);
  }
  return names;
}

}  // namespace atl::rm
