// What a collective op (ir::IsCollective) does over a gang, and what one host of the gang
// exchanges with the others to do it. Pure: the CollectiveHub runs the plans, and the tests
// check them without processes.
//
// Each host sends each other host at most one message per collective (two in a rooted gang:
// partials to the root, totals back), so messages grow with hosts, not shards. A message
// packs items, all of one shape, in the order both ends compute from the layout:
//  - reducing collectives (all-reduces, reduce_scatter): a host's PARTIAL of a slot (a block
//    of a group's result that some shard needs), its shards' blocks reduced in shard order;
//    a slot's value is its contributing hosts' partials reduced in host order, so every
//    replica gets the same bits.
//  - the others: a piece of one shard's block that a shard on another host needs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/ir/ir.h"

namespace atl::executor {

// Where the shards of a function's slice live: shard i runs on the executor whose data
// endpoint is shard_endpoints[i].
struct GangLayout {
  std::vector<std::string> shard_endpoints;
  std::vector<std::string> hosts;     // distinct endpoints, sorted: a host's index is its place
  std::vector<uint32_t> shard_hosts;  // each shard's host index
  GangLayout() = default;
  explicit GangLayout(std::vector<std::string> endpoints);
  size_t HostIndex(const std::string& endpoint) const;  // hosts.size() when absent
};

// A collective op as the hub runs it: op `op_index` of a function over `mesh`, with what it
// needs of the op's operand resolved.
struct CollectiveOp {
  ir::OpCode code = ir::OpCode::kAllReduceSum;
  Shape mesh;
  int32_t axis = ir::kWholeSlice;
  // all_gather: the dimension cut along the axis, joined; reduce_scatter: the one cut;
  // all_to_all: the one cut in the operand, joined in the result.
  int dim = -1;
  int to_dim = -1;                 // all_to_all: the dimension cut in the result
  int64_t root = 0;                // broadcast: the member every member gets
  std::vector<int64_t> target_of;  // collective_permute: per member, its target or -1

  // Op `op_index` of `fn` (which passed ir::Validate on `mesh`); InvalidArgument when it is
  // not a collective or does not fit the mesh.
  static Result<CollectiveOp> Of(const ir::FunctionDef& fn, uint32_t op_index, const Shape& mesh);
  std::string_view name() const { return ir::OpName(code); }
  // All-reduces and reduce_scatter: hosts exchange partial sums (or maxima, minima).
  bool Reduces() const;
};

// The groups of a collective: the shards that differ only in their coordinate along its
// axis (every shard, for kWholeSlice), each group's members in coordinate order.
class MeshGroups {
 public:
  MeshGroups(const Shape& mesh, int32_t axis);
  int64_t size() const { return members_; }  // members per group
  // The shard's coordinate along the axis.
  int64_t MemberOf(uint32_t shard) const;
  // Member 0 of the shard's group: it names the group.
  uint32_t Leader(uint32_t shard) const;
  // The shard of member `m` of the group that `leader` names.
  uint32_t Member(uint32_t leader, int64_t m) const;
  // Every group's leader, ascending.
  std::vector<uint32_t> Leaders() const;

 private:
  int64_t shards_ = 1;
  int64_t members_ = 1;
  int64_t stride_ = 1;  // shards between neighbours along the axis
};

// One item of a collective's messages: {group leader, slot} for a reducing collective (slot
// 0 of an all-reduce; block k of a reduce_scatter), {source shard, piece} for the others
// (piece k of an all_to_all; 0 for a whole block).
struct ItemKey {
  uint32_t a = 0;
  uint32_t b = 0;
  auto operator<=>(const ItemKey&) const = default;
};

// What host `self` of a gang does in one collective.
struct HostPlan {
  uint32_t self = 0;
  // A reducing collective over more hosts than the all-pairs limit: every host sends its
  // partials to the root (host 0), which reduces them and sends the totals back.
  bool rooted = false;
  std::vector<uint32_t> local_shards;  // ascending
  // The first messages: the items this host sends each other host, and receives from each,
  // by host index, in order. Partials go to the root alone in a rooted gang.
  std::map<uint32_t, std::vector<ItemKey>> sends, receives;
  // Rooted: the slots' values (totals) the root sends each other host, and those this host
  // gets from the root.
  std::map<uint32_t, std::vector<ItemKey>> total_sends;
  std::vector<ItemKey> totals;
  bool is_root() const { return rooted && self == 0; }
};

// The plan of host `self` (an index into layout.hosts) for `op`: rooted when the op reduces
// over more than `all_pairs_max_hosts` hosts.
HostPlan PlanFor(const CollectiveOp& op, const GangLayout& layout, uint32_t self,
                 size_t all_pairs_max_hosts);

// The hosts whose shards are members of the group that `leader` names, ascending.
std::vector<uint32_t> GroupHosts(const MeshGroups& groups, const GangLayout& layout,
                                 uint32_t leader);

}  // namespace atl::executor
