#include "services/objectstore/host_store_options.h"

#include <spdlog/spdlog.h>

namespace atl::store {

StoreOptions HostStoreOptions(const ClusterConfig& config, const HostPlacement& where,
                              std::string bind_endpoint) {
  StoreOptions store;
  store.host = where.host.name;
  store.bind_endpoint = std::move(bind_endpoint);
  store.arena_bytes = where.host.arena_bytes;
  store.device_bytes.assign(where.host.devices, where.host.device_memory_bytes);
  store.heartbeat = std::chrono::milliseconds(config.heartbeat_ms);
  store.liveness = config.liveness;
  store.events_in = config.events_in_endpoint;
  store.quota_objects = config.quotas.store_objects;
  store.quota_bytes = config.quotas.store_bytes;
  store.checkpoint_root = config.checkpoint_root;
  store.rm_endpoint = config.rm_endpoint;
  if (store.rm_endpoint.ends_with(":*")) {
    // The config lets the RM pick its port: only --rm says where it is.
    spdlog::warn("no RM endpoint to heartbeat (rm.endpoint {} picks a free port; pass --rm)",
                 store.rm_endpoint);
    store.rm_endpoint.clear();
  }
  return store;
}

}  // namespace atl::store
