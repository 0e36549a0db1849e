#include "services/rm/elastic_core.h"

namespace atl::rm {

namespace {

// The keys of `records` whose `silent(record)` holds, in key order.
template <typename Map, typename Pred>
std::vector<typename Map::key_type> KeysWhere(const Map& records, Pred silent) {
  std::vector<typename Map::key_type> keys;
  for (const auto& [key, record] : records) {
    if (silent(record)) keys.push_back(key);
  }
  return keys;
}

}  // namespace

std::vector<std::string> SilentHosts(const RmState& state, Clock::time_point now,
                                     Clock::duration lapse) {
  return KeysWhere(state.hosts,
                   [&](const auto& h) { return h.alive && now - h.last_heard > lapse; });
}

std::vector<std::string> SilentStores(const RmState& state, Clock::time_point now,
                                      Clock::duration lapse) {
  return KeysWhere(state.hosts, [&](const auto& h) {
    return h.store_alive && now - h.store_last_heard > lapse;
  });
}

std::vector<std::string> SilentSchedulers(const RmState& state, Clock::time_point now,
                                          Clock::duration lapse) {
  return KeysWhere(state.schedulers,
                   [&](const auto& s) { return s.alive && now - s.last_heard > lapse; });
}

Result<bool> RemapSliceOff(RmState& state, uint64_t slice_id, const std::string& lost_host,
                           const PlacementPolicy& policy) {
  RmState::Slice& slice = state.slices.at(slice_id);
  std::vector<uint32_t> after = slice.device_ids;
  bool touched = false;
  for (uint32_t& d : after) {
    if (state.devices[d].host != lost_host) continue;
    touched = true;
    // `after` already holds the replacements picked so far: no device is picked twice.
    ATOLL_ASSIGN_OR_RETURN(d, policy.Replace(d, after, Loads(state)));
  }
  if (!touched) return false;
  for (uint32_t d : slice.device_ids) state.devices[d].slices--;
  for (uint32_t d : after) state.devices[d].slices++;
  slice.device_ids = std::move(after);
  slice.mapping++;
  return true;
}

}  // namespace atl::rm
