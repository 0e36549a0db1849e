#include "services/rm/rm_state.h"

namespace atl::rm {

std::vector<DeviceLoad> Loads(const RmState& state) {
  std::vector<DeviceLoad> loads;
  for (const auto& d : state.devices) {
    const RmState::Host& h = state.hosts.at(d.host);
    loads.push_back(
        {d.id, h.island, h.name, d.local_index, d.desc.kind, h.alive && h.store_alive, d.slices});
  }
  return loads;
}

}  // namespace atl::rm
