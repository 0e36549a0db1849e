// The pure parts of a collective's plan: the op resolved from its function, the groups of a
// mesh, and which host sends which items to whom.
#include "services/executor/collective_plan.h"

#include <gtest/gtest.h>

#include "tests/services/executor/hub_network.h"
#include "tests/status_matchers.h"

namespace atl::executor {
namespace {

ir::FunctionDef OneCollective(ir::OpCode code, ir::TensorType in, double axis,
                              std::vector<int64_t> params = {}) {
  ir::FunctionDef fn;
  fn.name = "f";
  fn.inputs = {in};
  fn.ops = {ir::Op{code, {{ir::Operand::kInput, 0, 0.0}}, axis, in, std::move(params)}};
  fn.outputs = {{ir::Operand::kOp, 0, 0.0}};
  return fn;
}

TEST(CollectiveOpTest, ResolvesWhatEachKindNeedsFromItsFunction) {
  const ir::TensorType cut{DType::kF32, {4, 6}, {-1, 1}};
  auto gather = CollectiveOp::Of(OneCollective(ir::OpCode::kAllGather, cut, 1), 0, {2, 3});
  ASSERT_THAT(gather, IsOk());
  EXPECT_EQ(gather->dim, 1);  // the dimension cut along axis 1
  EXPECT_EQ(gather->axis, 1);
  auto all_to_all = CollectiveOp::Of(OneCollective(ir::OpCode::kAllToAll, cut, 1, {0}), 0, {2, 3});
  ASSERT_THAT(all_to_all, IsOk());
  EXPECT_EQ(all_to_all->dim, 1);
  EXPECT_EQ(all_to_all->to_dim, 0);
  const ir::TensorType whole{DType::kF32, {4, 6}, {-1, -1}};
  auto permute = CollectiveOp::Of(
      OneCollective(ir::OpCode::kCollectivePermute, whole, 1, {0, 2, 2, 1}), 0, {2, 3});
  ASSERT_THAT(permute, IsOk());
  EXPECT_EQ(permute->target_of, (std::vector<int64_t>{2, -1, 1}));

  EXPECT_FALSE(CollectiveOp::Of(OneCollective(ir::OpCode::kAllGather, whole, -1), 0, {6}).ok());
  EXPECT_FALSE(CollectiveOp::Of(OneCollective(ir::OpCode::kAllReduceSum, whole, 2), 0, {6}).ok());
  EXPECT_FALSE(CollectiveOp::Of(OneCollective(ir::OpCode::kBroadcast, whole, 0, {6}), 0, {6}).ok());
  ir::FunctionDef not_collective = OneCollective(ir::OpCode::kAllGather, cut, 1);
  not_collective.ops[0].code = ir::OpCode::kGelu;
  EXPECT_FALSE(CollectiveOp::Of(not_collective, 0, {2, 3}).ok());
  EXPECT_FALSE(CollectiveOp::Of(not_collective, 1, {2, 3}).ok());
}

TEST(MeshGroupsTest, AGroupIsTheShardsThatDifferAlongItsAxisAlone) {
  // A 2x3 mesh, row-major: shard = 3 * row + column.
  const MeshGroups rows(Shape{2, 3}, 0);  // groups along axis 0: the columns
  EXPECT_EQ(rows.size(), 2);
  EXPECT_EQ(rows.Leaders(), (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(rows.MemberOf(4), 1);
  EXPECT_EQ(rows.Leader(4), 1u);
  EXPECT_EQ(rows.Member(1, 1), 4u);
  const MeshGroups columns(Shape{2, 3}, 1);  // along axis 1: the rows
  EXPECT_EQ(columns.size(), 3);
  EXPECT_EQ(columns.Leaders(), (std::vector<uint32_t>{0, 3}));
  EXPECT_EQ(columns.Leader(5), 3u);
  EXPECT_EQ(columns.Member(3, 2), 5u);
  const MeshGroups all(Shape{2, 3}, ir::kWholeSlice);
  EXPECT_EQ(all.size(), 6);
  EXPECT_EQ(all.Leaders(), (std::vector<uint32_t>{0}));
}

// Over 6 hosts, one shard each: a sum goes all-pairs (each host to each other) up to the
// limit and through host 0 beyond; a gather stays all-pairs.
TEST(HostPlanTest, ReductionsGoThroughTheRootBeyondTheAllPairsLimit) {
  const auto names = testutil::HostNames(6);
  const GangLayout layout = testutil::Interleaved(names, 6);
  CollectiveOp sum = testutil::WholeSliceSum(6);
  const HostPlan pairs = PlanFor(sum, layout, 2, /*all_pairs_max_hosts=*/8);
  EXPECT_FALSE(pairs.rooted);
  EXPECT_EQ(pairs.sends.size(), 5u);
  EXPECT_EQ(pairs.receives.size(), 5u);
  const HostPlan leaf = PlanFor(sum, layout, 2, /*all_pairs_max_hosts=*/4);
  EXPECT_TRUE(leaf.rooted);
  ASSERT_EQ(leaf.sends.size(), 1u);
  EXPECT_EQ(leaf.sends.begin()->first, 0u);
  EXPECT_TRUE(leaf.receives.empty());
  EXPECT_EQ(leaf.totals.size(), 1u);
  const HostPlan root = PlanFor(sum, layout, 0, 4);
  EXPECT_TRUE(root.is_root());
  EXPECT_EQ(root.receives.size(), 5u);
  EXPECT_EQ(root.total_sends.size(), 5u);

  CollectiveOp gather = sum;
  gather.code = ir::OpCode::kAllGather;
  gather.axis = 0;
  gather.dim = 0;
  const HostPlan gathering = PlanFor(gather, layout, 2, 4);
  EXPECT_FALSE(gathering.rooted);
  EXPECT_EQ(gathering.sends.size(), 5u);
}

}  // namespace
}  // namespace atl::executor
