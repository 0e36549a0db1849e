#include "services/executor/collective_items.h"

#include <cstring>
#include <memory>
#include <span>

#include <fmt/format.h>

#include "kernels/arithmetic.h"
#include "kernels/shape_ops.h"

namespace atl::executor {

namespace {

// How partials combine: sums (and a mean's sums) add; the others keep the max or min.
kernels::BinaryFn Combine(const CollectiveOp& op) {
  switch (op.code) {
    case ir::OpCode::kAllReduceMax:
      return kernels::BinaryFn::kMax;
    case ir::OpCode::kAllReduceMin:
      return kernels::BinaryFn::kMin;
    default:
      return kernels::BinaryFn::kAdd;
  }
}

Result<const Tensor*> Find(const CollectiveOp& op, const ItemValues& items, uint32_t host,
                           const ItemKey& key) {
  auto it = items.find({host, key});
  if (it != items.end()) return &it->second;
  return Internal(
      fmt::format("{}: host {} never gave item ({}, {})", op.name(), host, key.a, key.b));
}

// The host of `shard`'s block, and its item `piece`.
Result<const Tensor*> PieceOf(const CollectiveOp& op, const GangLayout& layout,
                              const ItemValues& items, uint32_t shard, uint32_t piece) {
  return Find(op, items, layout.shard_hosts[shard], {shard, piece});
}

// Every member's item `piece` of `t`'s group, joined along op.dim in member order.
Result<Tensor> Joined(const CollectiveOp& op, const MeshGroups& groups, const GangLayout& layout,
                      const ItemValues& items, uint32_t t, uint32_t piece) {
  std::vector<const Tensor*> pieces;
  pieces.reserve(groups.size());
  for (int64_t m = 0; m < groups.size(); ++m) {
    ATOLL_ASSIGN_OR_RETURN(const Tensor* p,
                           PieceOf(op, layout, items, groups.Member(groups.Leader(t), m), piece));
    pieces.push_back(p);
  }
  return kernels::Concat(std::span<const Tensor* const>(pieces), op.dim);
}

}  // namespace

Shape ItemShape(const CollectiveOp& op, const Shape& block) {
  const int64_t members = MeshGroups(op.mesh, op.axis).size();
  Shape shape = block;
  const int cut = op.code == ir::OpCode::kReduceScatter ? op.dim
                  : op.code == ir::OpCode::kAllToAll    ? op.to_dim
                                                        : -1;
  if (cut >= 0 && static_cast<size_t>(cut) < shape.size()) shape[cut] /= members;
  return shape;
}

Status AddOwnItems(const CollectiveOp& op, const GangLayout& layout, const HostPlan& plan,
                   std::map<uint32_t, Tensor> local, ItemValues& items) {
  const MeshGroups groups(op.mesh, op.axis);
  const int64_t members = groups.size();
  if (op.Reduces()) {
    // Each group's partial: its local members' blocks reduced in shard order.
    std::map<uint32_t, Tensor> partials;
    for (auto& [shard, block] : local) {
      auto [it, first] = partials.try_emplace(groups.Leader(shard), std::move(block));
      if (first) continue;
      ATOLL_ASSIGN_OR_RETURN(it->second, kernels::Binary(Combine(op), it->second, block));
    }
    for (auto& [leader, partial] : partials) {
      if (op.code != ir::OpCode::kReduceScatter) {
        items[{plan.self, {leader, 0}}] = std::move(partial);
        continue;
      }
      ATOLL_ASSIGN_OR_RETURN(std::vector<Tensor> slots, kernels::Split(partial, op.dim, members));
      for (size_t k = 0; k < slots.size(); ++k) {
        items[{plan.self, {leader, static_cast<uint32_t>(k)}}] = std::move(slots[k]);
      }
    }
    return Status::Ok();
  }
  for (auto& [shard, block] : local) {
    const int64_t m = groups.MemberOf(shard);
    const bool sent = op.code == ir::OpCode::kAllGather ||
                      (op.code == ir::OpCode::kBroadcast && m == op.root) ||
                      (op.code == ir::OpCode::kCollectivePermute && op.target_of[m] >= 0);
    if (op.code == ir::OpCode::kAllToAll) {
      ATOLL_ASSIGN_OR_RETURN(std::vector<Tensor> pieces, kernels::Split(block, op.to_dim, members));
      for (size_t k = 0; k < pieces.size(); ++k) {
        items[{plan.self, {shard, static_cast<uint32_t>(k)}}] = std::move(pieces[k]);
      }
    } else if (sent) {
      items[{plan.self, {shard, 0}}] = std::move(block);
    }
  }
  return Status::Ok();
}

Result<Tensor> Pack(const ItemValues& items, uint32_t host, const std::vector<ItemKey>& keys) {
  std::vector<const Tensor*> parts;
  for (const ItemKey& key : keys) {
    auto it = items.find({host, key});
    if (it == items.end()) {
      return Internal(fmt::format("host {} has no item ({}, {}) to send", host, key.a, key.b));
    }
    parts.push_back(&it->second);
  }
  if (parts.empty()) return Internal("a message of no items");
  const Tensor& first = *parts.front();
  if (parts.size() == 1) return first;  // one item travels as itself
  Shape shape = first.shape();
  shape.insert(shape.begin(), static_cast<int64_t>(parts.size()));
  Tensor message(first.dtype(), shape);
  std::byte* out = message.data();
  for (const Tensor* part : parts) {
    if (part->dtype() != first.dtype() || part->shape() != first.shape()) {
      return Internal("the items of one message differ in dtype or shape");
    }
    std::memcpy(out, part->data(), part->nbytes());
    out += part->nbytes();
  }
  return message;
}

Status Unpack(const CollectiveOp& op, Tensor message, uint32_t from,
              const std::vector<ItemKey>& keys, DType dtype, const Shape& item_shape,
              ItemValues& items) {
  Shape want = item_shape;
  if (keys.size() != 1) want.insert(want.begin(), static_cast<int64_t>(keys.size()));
  if (message.dtype() != dtype || message.shape() != want) {
    return InvalidArgument(fmt::format("{}: host {} sent {}{}, expected {}{}", op.name(), from,
                                       DTypeName(message.dtype()), ShapeString(message.shape()),
                                       DTypeName(dtype), ShapeString(want)));
  }
  if (keys.size() == 1) {
    items[{from, keys[0]}] = std::move(message);
    return Status::Ok();
  }
  // The items are views of the message, which they keep: no copy.
  const auto whole = std::make_shared<Tensor>(std::move(message));
  const size_t bytes = keys.empty() ? 0 : whole->nbytes() / keys.size();
  for (size_t i = 0; i < keys.size(); ++i) {
    ATOLL_ASSIGN_OR_RETURN(
        items[std::pair(from, keys[i])],
        Tensor::Adopt(dtype, item_shape, std::span(whole->data() + i * bytes, bytes), whole));
  }
  return Status::Ok();
}

Result<Tensor> SlotValue(const CollectiveOp& op, const GangLayout& layout, const ItemValues& items,
                         const ItemKey& slot) {
  const MeshGroups groups(op.mesh, op.axis);
  const std::vector<uint32_t> hosts = GroupHosts(groups, layout, slot.a);
  ATOLL_ASSIGN_OR_RETURN(const Tensor* first, Find(op, items, hosts.front(), slot));
  Tensor value;
  for (size_t h = 1; h < hosts.size(); ++h) {
    ATOLL_ASSIGN_OR_RETURN(const Tensor* partial, Find(op, items, hosts[h], slot));
    ATOLL_ASSIGN_OR_RETURN(value, kernels::Binary(Combine(op), h == 1 ? *first : value, *partial));
  }
  if (hosts.size() == 1) value = *first;
  if (op.code == ir::OpCode::kAllReduceMean) {
    return kernels::Binary(kernels::BinaryFn::kDiv, value, static_cast<double>(groups.size()));
  }
  return value;
}

Result<std::map<uint32_t, Tensor>> LocalResults(const CollectiveOp& op, const GangLayout& layout,
                                                const HostPlan& plan, const ItemValues& items,
                                                const std::map<ItemKey, Tensor>& totals,
                                                DType dtype, const Shape& block) {
  const MeshGroups groups(op.mesh, op.axis);
  std::map<uint32_t, Tensor> results;
  std::map<ItemKey, Tensor> slot_values;  // each slot reduced once for all its local shards
  for (uint32_t t : plan.local_shards) {
    const uint32_t leader = groups.Leader(t);
    const auto member = static_cast<uint32_t>(groups.MemberOf(t));
    Result<Tensor> result = Internal("unreachable");
    if (op.Reduces()) {
      const ItemKey slot{leader, op.code == ir::OpCode::kReduceScatter ? member : 0};
      auto known = slot_values.find(slot);
      if (known == slot_values.end()) {
        const bool from_root =
            plan.rooted && !plan.is_root() && GroupHosts(groups, layout, leader).size() > 1;
        Result<Tensor> value = Internal("unreachable");
        if (!from_root) {
          value = SlotValue(op, layout, items, slot);
        } else if (auto total = totals.find(slot); total != totals.end()) {
          value = total->second;
        } else {
          value = Internal(fmt::format("{}: the root sent no total of slot ({}, {})", op.name(),
                                       slot.a, slot.b));
        }
        ATOLL_RETURN_IF_ERROR(value.status());
        known = slot_values.emplace(slot, std::move(value).value()).first;
      }
      result = known->second;
    } else if (op.code == ir::OpCode::kAllGather) {
      result = Joined(op, groups, layout, items, t, 0);
    } else if (op.code == ir::OpCode::kAllToAll) {
      result = Joined(op, groups, layout, items, t, member);
    } else if (op.code == ir::OpCode::kBroadcast) {
      ATOLL_ASSIGN_OR_RETURN(const Tensor* root,
                             PieceOf(op, layout, items, groups.Member(leader, op.root), 0));
      result = *root;
    } else {  // collective_permute: the source that targets this member, else zeros
      result = Tensor(dtype, block);
      for (int64_t m = 0; m < groups.size(); ++m) {
        if (op.target_of[m] != member) continue;
        ATOLL_ASSIGN_OR_RETURN(const Tensor* source,
                               PieceOf(op, layout, items, groups.Member(leader, m), 0));
        result = *source;
      }
    }
    ATOLL_RETURN_IF_ERROR(result.status());
    results.emplace(t, std::move(result).value());
  }
  return results;
}

}  // namespace atl::executor
