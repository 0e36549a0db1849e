#include "services/executor/collective_plan.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace atl::executor {

GangLayout::GangLayout(std::vector<std::string> endpoints) : shard_endpoints(std::move(endpoints)) {
  hosts = shard_endpoints;
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  shard_hosts.reserve(shard_endpoints.size());
  for (const auto& endpoint : shard_endpoints) {
    shard_hosts.push_back(static_cast<uint32_t>(HostIndex(endpoint)));
  }
}

size_t GangLayout::HostIndex(const std::string& endpoint) const {
  auto it = std::lower_bound(hosts.begin(), hosts.end(), endpoint);
  return it != hosts.end() && *it == endpoint ? static_cast<size_t>(it - hosts.begin())
                                              : hosts.size();
}

Result<CollectiveOp> CollectiveOp::Of(const ir::FunctionDef& fn, uint32_t op_index,
                                      const Shape& mesh) {
  if (op_index >= fn.ops.size() || !ir::IsCollective(fn.ops[op_index].code)) {
    return InvalidArgument(
        fmt::format("op {} of function '{}' is not a collective", op_index, fn.name));
  }
  const ir::Op& op = fn.ops[op_index];
  const ir::TensorType* operand =
      op.operands.size() == 1 ? ir::OperandType(fn, op.operands[0]) : nullptr;
  const auto axis = static_cast<int64_t>(op.attr);  // whole: the function passed Validate
  const bool whole = axis == ir::kWholeSlice;
  auto refuse = [&](std::string_view why) {
    return InvalidArgument(fmt::format("{} (op {} of function '{}') over mesh {}: {}",
                                       ir::OpName(op.code), op_index, fn.name, ShapeString(mesh),
                                       why));
  };
  if (operand == nullptr) return refuse("it does not take one tensor");
  if (!whole && (axis < 0 || axis >= static_cast<int64_t>(mesh.size()))) {
    return refuse(fmt::format("mesh axis {} does not exist", axis));
  }
  CollectiveOp c;
  c.code = op.code;
  c.mesh = mesh;
  c.axis = static_cast<int32_t>(axis);
  if (whole && (!c.Reduces() || op.code == ir::OpCode::kReduceScatter)) {
    return refuse("only all-reduces run over the whole slice");
  }
  const int64_t members = whole ? NumElements(mesh) : mesh[axis];
  auto cut_dim = [&] {
    const auto it = std::find(operand->split.begin(), operand->split.end(), c.axis);
    return it == operand->split.end() ? -1 : static_cast<int>(it - operand->split.begin());
  };
  auto param_dim = [&]() -> int {
    if (op.params.size() != 1 || op.params[0] < 0 ||
        op.params[0] >= static_cast<int64_t>(operand->shape.size())) {
      return -1;
    }
    return static_cast<int>(op.params[0]);
  };
  switch (op.code) {
    case ir::OpCode::kAllGather:
      c.dim = cut_dim();
      if (c.dim < 0) return refuse("its operand is not cut along the axis");
      break;
    case ir::OpCode::kReduceScatter:
      c.dim = param_dim();
      if (c.dim < 0) return refuse("params name no dimension of its operand");
      break;
    case ir::OpCode::kAllToAll:
      c.dim = cut_dim();
      c.to_dim = param_dim();
      if (c.dim < 0 || c.to_dim < 0) return refuse("its dimensions do not fit its operand");
      break;
    case ir::OpCode::kBroadcast:
      if (op.params.size() != 1 || op.params[0] < 0 || op.params[0] >= members) {
        return refuse("params name no root");
      }
      c.root = op.params[0];
      break;
    case ir::OpCode::kCollectivePermute:
      c.target_of.assign(members, -1);
      for (size_t i = 0; i + 1 < op.params.size(); i += 2) {
        const int64_t source = op.params[i], target = op.params[i + 1];
        if (source < 0 || source >= members || target < 0 || target >= members) {
          return refuse(fmt::format("pair ({}, {}) names no member", source, target));
        }
        c.target_of[source] = target;
      }
      break;
    default:  // the all-reduces: the axis is all they need
      break;
  }
  return c;
}

bool CollectiveOp::Reduces() const {
  switch (code) {
    case ir::OpCode::kAllReduceSum:
    case ir::OpCode::kAllReduceMax:
    case ir::OpCode::kAllReduceMin:
    case ir::OpCode::kAllReduceMean:
    case ir::OpCode::kReduceScatter:
      return true;
    default:
      return false;
  }
}

MeshGroups::MeshGroups(const Shape& mesh, int32_t axis) {
  shards_ = std::max<int64_t>(NumElements(mesh), 1);
  if (axis == ir::kWholeSlice || axis < 0 || static_cast<size_t>(axis) >= mesh.size()) {
    members_ = shards_;
    return;
  }
  members_ = mesh[axis];
  for (size_t a = axis + 1; a < mesh.size(); ++a) stride_ *= mesh[a];
}

int64_t MeshGroups::MemberOf(uint32_t shard) const { return (shard / stride_) % members_; }

uint32_t MeshGroups::Leader(uint32_t shard) const {
  return static_cast<uint32_t>(shard - MemberOf(shard) * stride_);
}

uint32_t MeshGroups::Member(uint32_t leader, int64_t m) const {
  return static_cast<uint32_t>(leader + m * stride_);
}

std::vector<uint32_t> MeshGroups::Leaders() const {
  std::vector<uint32_t> leaders;
  for (int64_t s = 0; s < shards_; ++s) {
    if (MemberOf(static_cast<uint32_t>(s)) == 0) leaders.push_back(static_cast<uint32_t>(s));
  }
  return leaders;
}

std::vector<uint32_t> GroupHosts(const MeshGroups& groups, const GangLayout& layout,
                                 uint32_t leader) {
  std::vector<uint32_t> hosts;
  for (int64_t m = 0; m < groups.size(); ++m) {
    hosts.push_back(layout.shard_hosts[groups.Member(leader, m)]);
  }
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  return hosts;
}

namespace {

// Builds one host's lists from the gang's flows: every (item, from host, to host) is offered
// in one order that does not depend on the host, so sender and receiver list alike.
class PlanBuilder {
 public:
  explicit PlanBuilder(HostPlan& plan) : plan_(plan) {}
  void Flow(const ItemKey& key, uint32_t from, uint32_t to) {
    if (from == to) return;
    if (from == plan_.self) plan_.sends[to].push_back(key);
    if (to == plan_.self) plan_.receives[from].push_back(key);
  }
  void TotalFlow(const ItemKey& key, uint32_t to) {
    if (to == 0) return;
    if (plan_.self == 0) plan_.total_sends[to].push_back(key);
    if (to == plan_.self) plan_.totals.push_back(key);
  }

 private:
  HostPlan& plan_;
};

// A reducing collective's flows for the group `leader` names, over its hosts `hosts` (more
// than one): each slot's partials go from every contributing host to each host that needs the
// slot, or through the root.
void PlanReduction(const CollectiveOp& op, const MeshGroups& groups, const GangLayout& layout,
                   uint32_t leader, const std::vector<uint32_t>& hosts, PlanBuilder& plan,
                   bool rooted) {
  const bool scatter = op.code == ir::OpCode::kReduceScatter;
  const int64_t slots = scatter ? groups.size() : 1;
  for (int64_t k = 0; k < slots; ++k) {
    const ItemKey slot{leader, static_cast<uint32_t>(k)};
    // Who needs the slot: the host of member k (reduce_scatter), else every host.
    const std::vector<uint32_t> needers =
        scatter ? std::vector<uint32_t>{layout.shard_hosts[groups.Member(leader, k)]} : hosts;
    if (rooted) {
      for (uint32_t from : hosts) plan.Flow(slot, from, 0);
      for (uint32_t to : needers) plan.TotalFlow(slot, to);
      continue;
    }
    for (uint32_t from : hosts) {
      for (uint32_t to : needers) plan.Flow(slot, from, to);
    }
  }
}

// The other collectives' flows for the group `leader` names: each piece goes from its source
// shard's host to the hosts of the shards that need it.
void PlanMoves(const CollectiveOp& op, const MeshGroups& groups, const GangLayout& layout,
               uint32_t leader, const std::vector<uint32_t>& hosts, PlanBuilder& plan) {
  for (int64_t m = 0; m < groups.size(); ++m) {
    const uint32_t source = groups.Member(leader, m);
    const uint32_t from = layout.shard_hosts[source];
    switch (op.code) {
      case ir::OpCode::kAllGather:
        for (uint32_t to : hosts) plan.Flow({source, 0}, from, to);
        break;
      case ir::OpCode::kAllToAll:
        for (int64_t k = 0; k < groups.size(); ++k) {
          plan.Flow({source, static_cast<uint32_t>(k)}, from,
                    layout.shard_hosts[groups.Member(leader, k)]);
        }
        break;
      case ir::OpCode::kBroadcast:
        if (m != op.root) break;
        for (uint32_t to : hosts) plan.Flow({source, 0}, from, to);
        break;
      case ir::OpCode::kCollectivePermute:
        if (op.target_of[m] < 0) break;
        plan.Flow({source, 0}, from, layout.shard_hosts[groups.Member(leader, op.target_of[m])]);
        break;
      default:
        break;
    }
  }
}

}  // namespace

HostPlan PlanFor(const CollectiveOp& op, const GangLayout& layout, uint32_t self,
                 size_t all_pairs_max_hosts) {
  HostPlan plan;
  plan.self = self;
  plan.rooted = op.Reduces() && layout.hosts.size() > all_pairs_max_hosts;
  for (uint32_t s = 0; s < layout.shard_hosts.size(); ++s) {
    if (layout.shard_hosts[s] == self) plan.local_shards.push_back(s);
  }
  const MeshGroups groups(op.mesh, op.axis);
  PlanBuilder builder(plan);
  for (uint32_t leader : groups.Leaders()) {
    const std::vector<uint32_t> hosts = GroupHosts(groups, layout, leader);
    if (hosts.size() < 2) continue;  // the group is on one host: nothing moves
    if (op.Reduces()) {
      PlanReduction(op, groups, layout, leader, hosts, builder, plan.rooted);
    } else {
      PlanMoves(op, groups, layout, leader, hosts, builder);
    }
  }
  return plan;
}

}  // namespace atl::executor
