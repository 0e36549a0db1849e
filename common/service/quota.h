// The one refusal every per-client quota ends in (the limits are QuotaConfig's, config.h):
// each service counts what a client holds where it creates it, and asks CheckQuota before
// creating more, so that every refusal reads the same.
#pragma once

#include <cstdint>
#include <string>

#include "atoll/status.h"

namespace atl {

struct QuotaRequest {
  uint64_t client = 0;
  std::string quota;   // its [quotas] key: "store_bytes"
  std::string where;   // "on host h0", "on island island0"; empty: cluster-wide
  std::string unit;    // what is counted, plural: "bytes", "runs"
  uint64_t limit = 0;  // 0: unlimited
  uint64_t in_use = 0;
  uint64_t requested = 0;
};

// OK when the limit is 0, nothing is requested, or in_use + requested <= limit. Otherwise
// ResourceExhausted:
// "client 3 over its store_bytes quota on host h0: 1048576 bytes in use + 4096 requested >
// 1048576".
Status CheckQuota(const QuotaRequest& request);

}  // namespace atl
