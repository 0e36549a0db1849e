// Every collective against its definition, through hubs wired together without processes:
// 1-D, 2-D and 3-D meshes, every axis (and the whole slice for the all-reduces), shards laid
// over 1 to 3 hosts in runs or interleaved, all-pairs and rooted. The definitions here work
// on each group's blocks by index arithmetic, apart from the hub's plans; the blocks hold
// small whole numbers, so that sums in any order are exact.
#include <algorithm>
#include <functional>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/services/executor/hub_network.h"
#include "tests/status_matchers.h"

namespace atl::executor {
namespace {

using testutil::Blocked;
using testutil::HostNames;
using testutil::HubNetwork;
using testutil::Interleaved;

constexpr int64_t kBlockRows =
    6;  // every block is f32 [kBlockRows, kBlockCols]; both divide by 1, 2, 3, 6
constexpr int64_t kBlockCols = 12;  // and kBlockCols by 4

// The shards of `shard`'s group (all of them for kWholeSlice), in coordinate order, from the
// row-major mesh: computed apart from MeshGroups.
std::vector<int> GroupOf(const Shape& mesh, int32_t axis, int shard) {
  const int64_t shards = NumElements(mesh);
  std::vector<int> group;
  if (axis == ir::kWholeSlice) {
    for (int s = 0; s < shards; ++s) group.push_back(s);
    return group;
  }
  auto coords = [&](int s) {
    Shape c(mesh.size());
    for (size_t a = mesh.size(); a-- > 0;) {
      c[a] = s % mesh[a];
      s /= static_cast<int>(mesh[a]);
    }
    return c;
  };
  const Shape mine = coords(shard);
  for (int s = 0; s < shards; ++s) {
    Shape c = coords(s);
    c[axis] = mine[axis];
    if (c == mine) group.push_back(s);  // differs from `shard` along the axis alone
  }
  return group;
}

// A block's element (r, c).
float At(const Tensor& t, int64_t r, int64_t c) { return t.as<float>()[r * t.shape()[1] + c]; }

Tensor Make(int64_t rows, int64_t cols, const std::function<float(int64_t, int64_t)>& value) {
  std::vector<float> v;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) v.push_back(value(r, c));
  }
  return Tensor::F32({rows, cols}, v);
}

// What shard `t` gets from `op` by definition, given every shard's block.
Tensor Definition(const CollectiveOp& op, const std::vector<Tensor>& blocks, int t) {
  const std::vector<int> group = GroupOf(op.mesh, op.axis, t);
  const auto n = static_cast<int64_t>(group.size());
  const int64_t me = std::find(group.begin(), group.end(), t) - group.begin();
  auto fold = [&](auto combine) {
    return Make(kBlockRows, kBlockCols, [&](int64_t r, int64_t c) {
      float v = At(blocks[group[0]], r, c);
      for (int64_t m = 1; m < n; ++m) v = combine(v, At(blocks[group[m]], r, c));
      return v;
    });
  };
  const auto sum = [](float a, float b) { return a + b; };
  switch (op.code) {
    case ir::OpCode::kAllReduceSum:
      return fold(sum);
    case ir::OpCode::kAllReduceMax:
      return fold([](float a, float b) { return std::max(a, b); });
    case ir::OpCode::kAllReduceMin:
      return fold([](float a, float b) { return std::min(a, b); });
    case ir::OpCode::kAllReduceMean: {
      const Tensor total = fold(sum);
      return Make(kBlockRows, kBlockCols,
                  [&](int64_t r, int64_t c) { return At(total, r, c) / static_cast<float>(n); });
    }
    case ir::OpCode::kReduceScatter: {  // the sum's columns, block `me` of n
      const Tensor total = fold(sum);
      return Make(kBlockRows, kBlockCols / n,
                  [&](int64_t r, int64_t c) { return At(total, r, me * (kBlockCols / n) + c); });
    }
    case ir::OpCode::kAllGather:  // every member's rows, in member order
      return Make(kBlockRows * n, kBlockCols, [&](int64_t r, int64_t c) {
        return At(blocks[group[r / kBlockRows]], r % kBlockRows, c);
      });
    case ir::OpCode::kAllToAll:  // member m's columns block `me`, as rows block m
      return Make(kBlockRows * n, kBlockCols / n, [&](int64_t r, int64_t c) {
        return At(blocks[group[r / kBlockRows]], r % kBlockRows, me * (kBlockCols / n) + c);
      });
    case ir::OpCode::kBroadcast:
      return blocks[group[op.root]];
    case ir::OpCode::kCollectivePermute:
      for (int64_t m = 0; m < n; ++m) {
        if (op.target_of[m] == me) return blocks[group[m]];
      }
      return Tensor(DType::kF32, {kBlockRows, kBlockCols});
    default:
      ADD_FAILURE() << "no definition of " << op.name();
      return {};
  }
}

// The collectives to check along `axis` of `mesh`: every kind, a permute that shifts by one
// (the last member sending nowhere, the first getting zeros) and one that swaps neighbours.
std::vector<CollectiveOp> OpsAlong(const Shape& mesh, int32_t axis) {
  const int64_t n = axis == ir::kWholeSlice ? NumElements(mesh) : mesh[axis];
  std::vector<CollectiveOp> ops;
  auto add = [&](ir::OpCode code) -> CollectiveOp& {
    CollectiveOp op;
    op.code = code;
    op.mesh = mesh;
    op.axis = axis;
    return ops.emplace_back(std::move(op));
  };
  for (auto code : {ir::OpCode::kAllReduceSum, ir::OpCode::kAllReduceMax, ir::OpCode::kAllReduceMin,
                    ir::OpCode::kAllReduceMean}) {
    add(code);
  }
  if (axis == ir::kWholeSlice) return ops;
  add(ir::OpCode::kAllGather).dim = 0;
  add(ir::OpCode::kReduceScatter).dim = 1;
  CollectiveOp& all_to_all = add(ir::OpCode::kAllToAll);
  all_to_all.dim = 0;
  all_to_all.to_dim = 1;
  add(ir::OpCode::kBroadcast).root = n - 1;
  CollectiveOp& shift = add(ir::OpCode::kCollectivePermute);
  shift.target_of.assign(n, -1);
  for (int64_t m = 0; m + 1 < n; ++m) shift.target_of[m] = m + 1;
  CollectiveOp& swap = add(ir::OpCode::kCollectivePermute);
  swap.target_of.assign(n, -1);
  for (int64_t m = 0; m + 1 < n; m += 2) {
    swap.target_of[m] = m + 1;
    swap.target_of[m + 1] = m;
  }
  return ops;
}

std::vector<Tensor> RandomBlocks(std::mt19937& rng, int64_t shards) {
  std::uniform_int_distribution<int> value(-50, 50);
  std::vector<Tensor> blocks;
  for (int64_t s = 0; s < shards; ++s) {
    blocks.push_back(Make(kBlockRows, kBlockCols, [&](int64_t, int64_t) { return value(rng); }));
  }
  return blocks;
}

struct Placement {
  std::string name;
  int hosts;
  bool interleaved;
  size_t all_pairs_max_hosts;
};

TEST(CollectiveNetworkTest, EveryCollectiveEqualsItsDefinitionOnEveryAxisOfEveryMesh) {
  std::mt19937 rng(2024);
  const std::vector<Shape> meshes = {{1}, {2}, {3}, {6}, {2, 3}, {3, 2}, {1, 4}, {2, 2, 2}};
  const std::vector<Placement> placements = {{"one host", 1, false, 4},
                                             {"2 hosts in runs", 2, false, 4},
                                             {"2 hosts interleaved", 2, true, 4},
                                             {"3 hosts interleaved", 3, true, 4},
                                             {"3 hosts rooted", 3, true, 1}};
  uint32_t run = 0;
  for (const Shape& mesh : meshes) {
    const int64_t shards = NumElements(mesh);
    std::vector<int32_t> axes = {ir::kWholeSlice};
    for (size_t a = 0; a < mesh.size(); ++a) axes.push_back(static_cast<int32_t>(a));
    for (const Placement& place : placements) {
      if (place.hosts > shards) continue;
      const auto names = HostNames(place.hosts);
      const GangLayout layout =
          place.interleaved ? Interleaved(names, shards) : Blocked(names, shards);
      HubNetwork network(names, place.all_pairs_max_hosts);
      for (int32_t axis : axes) {
        for (const CollectiveOp& op : OpsAlong(mesh, axis)) {
          SCOPED_TRACE(fmt::format("{} along axis {} of mesh {}, {}", op.name(), axis,
                                   ShapeString(mesh), place.name));
          const auto blocks = RandomBlocks(rng, shards);
          const int before = network.messages();
          const auto got = network.Run({++run, 0, 0}, layout, op, blocks);
          for (int t = 0; t < shards; ++t) {
            ASSERT_THAT(got[t], IsOk()) << "shard " << t << ": " << got[t].status().ToString();
            const Tensor want = Definition(op, blocks, t);
            EXPECT_EQ(*got[t], want)
                << "shard " << t << ": " << got[t]->ToString() << "\nwant " << want.ToString();
          }
          // Messages grow with hosts, not shards: at most one per ordered pair of hosts, or
          // through a root, at most two per host.
          const int sent = network.messages() - before;
          const int hosts = place.hosts;
          EXPECT_LE(sent, op.Reduces() && hosts > static_cast<int>(place.all_pairs_max_hosts)
                              ? 2 * (hosts - 1)
                              : hosts * (hosts - 1));
        }
      }
    }
  }
}

// Along an axis, the members of each group get the same bits from a sum in any layout: the
// partials of hosts are added in host order whichever host adds them.
TEST(CollectiveNetworkTest, AnAxisSumGivesEveryMemberOfAGroupTheSameBits) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mantissa(-1, 1);
  std::uniform_int_distribution<int> exponent(-8, 8);
  const Shape mesh = {2, 6};
  std::vector<Tensor> blocks;
  for (int s = 0; s < 12; ++s) {
    blocks.push_back(Make(kBlockRows, kBlockCols, [&](int64_t, int64_t) {
      return std::ldexp(mantissa(rng), 3 * exponent(rng));
    }));
  }
  for (size_t max_hosts : {size_t{4}, size_t{1}}) {
    const auto names = HostNames(3);
    HubNetwork network(names, max_hosts);
    CollectiveOp op;
    op.code = ir::OpCode::kAllReduceSum;
    op.mesh = mesh;
    op.axis = 1;
    const auto got = network.Run({1, 0, 0}, Interleaved(names, 12), op, blocks);
    for (int s = 0; s < 12; ++s) {
      ASSERT_THAT(got[s], IsOk());
      const int leader = s - s % 6;
      EXPECT_EQ(*got[s], *got[leader]) << "shard " << s << " and its group's first member";
    }
  }
}

// A shard that fails before its collective fails it on its own host and on every host that
// needs its host's items, with its error and at once (no shard waits out the hub's timeout);
// the shards that need nothing of its host still get their results.
TEST(CollectiveNetworkTest, AnAbandonedShardFailsEveryKindOfCollectiveWhereverItIsNeeded) {
  std::mt19937 rng(11);
  const Shape mesh = {4};
  const auto names = HostNames(2);
  const GangLayout layout = Interleaved(names, 4);  // shards 0 and 2 on h000, 1 and 3 on h001
  const Status why = NotFound("argument 0: object 5 is unknown");
  uint32_t run = 0;
  for (size_t max_hosts : {size_t{4}, size_t{1}}) {
    HubNetwork network(names, max_hosts, std::chrono::seconds(30));
    for (const CollectiveOp& op : OpsAlong(mesh, 0)) {
      for (uint32_t abandoned : {0u, 3u}) {
        SCOPED_TRACE(fmt::format("{}, shard {} abandons, {}", op.name(), abandoned,
                                 max_hosts == 1 ? "rooted" : "all-pairs"));
        const auto blocks = RandomBlocks(rng, 4);
        const auto got = network.Run({++run, 0, 0}, layout, op, blocks, {abandoned}, why);
        for (int t = 0; t < 4; ++t) {
          const std::vector<int> reads = [&]() -> std::vector<int> {
            if (op.code == ir::OpCode::kBroadcast) return {static_cast<int>(op.root)};
            if (op.code != ir::OpCode::kCollectivePermute) return {0, 1, 2, 3};
            for (int m = 0; m < 4; ++m) {
              if (op.target_of[m] == t) return {m};
            }
            return {};
          }();
          const bool needs = std::count(reads.begin(), reads.end(), abandoned) > 0 ||
                             layout.shard_hosts[t] == layout.shard_hosts[abandoned];
          if (got[t].ok()) {
            EXPECT_FALSE(needs) << "shard " << t << " got a result without shard " << abandoned;
            EXPECT_EQ(*got[t], Definition(op, blocks, t)) << "shard " << t;
          } else {
            EXPECT_EQ(got[t].status().code(), Code::kNotFound)
                << "shard " << t << ": " << got[t].status().ToString();
          }
          if (needs) {
            EXPECT_FALSE(got[t].ok()) << "shard " << t;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace atl::executor
