#include "services/objectstore/owner_usage.h"

#include <algorithm>
#include <cassert>

#include "common/service/quota.h"

namespace atl::store {

Status OwnerUsage::Check(uint64_t owner, bool new_object, uint64_t bytes) const {
  if (owner == 0) return Status::Ok();
  const Use use = Of(owner);
  ATOLL_RETURN_IF_ERROR(CheckQuota({owner, "store_objects", quota_.where, "objects", quota_.objects,
                                    use.objects, new_object ? 1u : 0u}));
  return CheckQuota({owner, "store_bytes", quota_.where, "bytes", quota_.bytes, use.bytes, bytes});
}

void OwnerUsage::Add(uint64_t owner, bool new_object, uint64_t bytes) {
  Use& use = use_[owner];
  use.objects += new_object ? 1 : 0;
  use.bytes += bytes;
}

void OwnerUsage::Remove(uint64_t owner, uint64_t bytes) {
  auto it = use_.find(owner);
  assert(it != use_.end() && it->second.objects > 0 && it->second.bytes >= bytes &&
         "freeing more than the owner holds");
  if (it == use_.end()) return;
  it->second.objects -= std::min<uint64_t>(it->second.objects, 1);
  it->second.bytes -= std::min(it->second.bytes, bytes);
  if (it->second.objects == 0) use_.erase(it);
}

OwnerUsage::Use OwnerUsage::Of(uint64_t owner) const {
  auto it = use_.find(owner);
  return it == use_.end() ? Use{} : it->second;
}

}  // namespace atl::store
