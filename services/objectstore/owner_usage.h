// OwnerUsage: what each client holds in one object store, against its per-store quotas
// ([quotas] store_objects and store_bytes): the objects that hold memory here and the
// bytes of their shards (dtype size x elements, as requested: the 64-byte alignment is
// the store's cost, not the client's). A shard refused for good holds no memory and counts
// for nothing. Owner 0 ("no owner") is counted but never limited.
//
// Pure bookkeeping, not thread-safe: the store's Directory owns one and tells it of every
// reservation and every free.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "atoll/status.h"

namespace atl::store {

struct StoreQuota {
  uint64_t objects = 0;  // per owner; 0: unlimited
  uint64_t bytes = 0;    // per owner; 0: unlimited
  std::string where;     // names the store in refusals: "on host h0"
};

class OwnerUsage {
 public:
  struct Use {
    uint64_t objects = 0;
    uint64_t bytes = 0;
    bool operator==(const Use&) const = default;
  };

  explicit OwnerUsage(StoreQuota quota = {}) : quota_(std::move(quota)) {}

  // OK when `owner` may reserve `bytes` more, for an object that holds nothing here yet
  // when `new_object`; ResourceExhausted naming the quota, its limit, the use and the
  // request otherwise (objects checked first).
  Status Check(uint64_t owner, bool new_object, uint64_t bytes) const;
  // Records a reservation Check allowed (or one of owner 0).
  void Add(uint64_t owner, bool new_object, uint64_t bytes);
  // Gives back one object of `owner` holding `bytes` in all, freed.
  void Remove(uint64_t owner, uint64_t bytes);

  Use Of(uint64_t owner) const;

 private:
  StoreQuota quota_;
  std::map<uint64_t, Use> use_;  // owners holding something, only
};

}  // namespace atl::store
