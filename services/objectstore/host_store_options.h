// The object store's options for one host of a cluster configuration: what
// atoll-objectstore and atoll-simhosts both serve a host's store with.
#pragma once

#include <string>

#include "common/service/config.h"
#include "common/service/host_options.h"
#include "services/objectstore/store_service.h"

namespace atl::store {

// Host `where` of `config`, served on `bind_endpoint` (a port of * picks a free one). The
// store heartbeats config.rm_endpoint, unless that picks its own port (":*"): then nothing,
// with a warning, since only --rm can say where such an RM is.
StoreOptions HostStoreOptions(const ClusterConfig& config, const HostPlacement& where,
                              std::string bind_endpoint);

}  // namespace atl::store
