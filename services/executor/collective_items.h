// The arithmetic of a collective on one host, along its plan (collective_plan.h): the items
// its shards' blocks make, the messages that carry them, and each local shard's block of the
// result. Pure; the CollectiveHub calls these under its lock.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "services/executor/collective_plan.h"

namespace atl::executor {

// The items one host holds for one collective, by (host that made it, key): its own and
// those it received.
using ItemValues = std::map<std::pair<uint32_t, ItemKey>, Tensor>;

// The shape of every item of `op`'s messages, given the shape of one shard's block.
Shape ItemShape(const CollectiveOp& op, const Shape& block);

// Adds this host's own items, made from its shards' blocks (`local`, by shard, every shard of
// plan.local_shards, all of one dtype and shape): for a reducing op its partial of every slot
// of its shards' groups, else the pieces of its shards' blocks.
Status AddOwnItems(const CollectiveOp& op, const GangLayout& layout, const HostPlan& plan,
                   std::map<uint32_t, Tensor> local, ItemValues& items);

// The items (host, keys[i]) as one message: the item itself when there is one, else a
// tensor [keys, item shape...].
Result<Tensor> Pack(const ItemValues& items, uint32_t host, const std::vector<ItemKey>& keys);
// A message `from` sent, holding `keys` in order, each of `item_shape` and `dtype`, added to
// `items` as (from, key). InvalidArgument naming the host when it does not hold them.
Status Unpack(const CollectiveOp& op, Tensor message, uint32_t from,
              const std::vector<ItemKey>& keys, DType dtype, const Shape& item_shape,
              ItemValues& items);

// A reducing collective's value of `slot`: the partials of the hosts of its group reduced in
// host order (divided by the group's size for a mean). Every partial must be in `items`.
Result<Tensor> SlotValue(const CollectiveOp& op, const GangLayout& layout, const ItemValues& items,
                         const ItemKey& slot);

// Each local shard's block of the result, by shard: from `items` and, at a rooted gang's other
// hosts, the `totals` the root sent (by slot). `block` is one shard's block (dtype and shape).
Result<std::map<uint32_t, Tensor>> LocalResults(const CollectiveOp& op, const GangLayout& layout,
                                                const HostPlan& plan, const ItemValues& items,
                                                const std::map<ItemKey, Tensor>& totals,
                                                DType dtype, const Shape& block);

}  // namespace atl::executor
