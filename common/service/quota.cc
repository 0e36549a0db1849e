#include "common/service/quota.h"

#include <fmt/format.h>

namespace atl {

Status CheckQuota(const QuotaRequest& r) {
  // A request of nothing takes nothing (a shard of an object already counted), even from a
  // client over its limit (a quota lowered by a restart with another config). Written so
  // that no sum can wrap: requested may be any 64-bit size.
  if (r.limit == 0 || r.requested == 0 ||
      (r.in_use <= r.limit && r.requested <= r.limit - r.in_use)) {
    return Status::Ok();
  }
  return ResourceExhausted(fmt::format(
      "client {} over its {} quota{}: {} {} in use + {} requested > {}", r.client, r.quota,
      r.where.empty() ? "" : " " + r.where, r.in_use, r.unit, r.requested, r.limit));
}

}  // namespace atl
