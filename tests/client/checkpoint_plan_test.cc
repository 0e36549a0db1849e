// Planning checkpoints without a cluster: a save writes each distinct block once, from the
// store that holds its first replica, and values at every store taking part; the stores'
// replies fill the index; a load cuts, for every target shard of any layout, the parts of
// the saved blocks that cover it exactly once.
#include "client/checkpoint_plan.h"

#include <gtest/gtest.h>

#include "common/base/tensor_block.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

// A future of f32[8, 6] laid out as `split` over `mesh`, shard s held by store "s<host>",
// two shards per host.
ResultPlan Future(std::vector<int32_t> split, Shape mesh) {
  ResultPlan plan;
  plan.type = {DType::kF32, {8, 6}, std::move(split)};
  plan.mesh = std::move(mesh);
  for (int64_t s = 0; s < NumElements(plan.mesh); ++s) {
    plan.shards.push_back({"store" + std::to_string(s / 2), 1000, static_cast<uint32_t>(s)});
  }
  return plan;
}

std::string HostOf(const std::string& store) { return "host-of-" + store; }

TEST(CheckpointPlanTest, ASaveWritesEachDistinctBlockOnceAndValuesAtEveryStore) {
  // Rows cut along mesh axis 0 of a 2 x 2 mesh: axis 1 holds replicas.
  const ResultPlan rows = Future({0, -1}, {2, 2});
  const Tensor step = Tensor::I32({}, {3});
  auto plan = PlanSave({{"w", &rows, nullptr}, {"step", nullptr, &step}}, 42, "d", "t", HostOf);
  ASSERT_THAT(plan, IsOk());
  const checkpoint::TensorEntry& w = plan->index.tensors[0];
  ASSERT_EQ(w.blocks.size(), 2u);  // shards 0 and 2; 1 and 3 are their replicas
  EXPECT_EQ(w.blocks[0].offset, (Shape{0, 0}));
  EXPECT_EQ(w.blocks[1].offset, (Shape{4, 0}));
  EXPECT_EQ(w.blocks[1].shape, (Shape{4, 6}));
  EXPECT_EQ(w.blocks[1].host, "host-of-store1");
  EXPECT_EQ(w.mesh, (Shape{2, 2}));
  EXPECT_EQ(w.split, (std::vector<int32_t>{0, -1}));
  ASSERT_EQ(plan->per_store.size(), 2u);
  for (const auto& [store, request] : plan->per_store) {
    EXPECT_EQ(request.owner_client, 42u);
    EXPECT_EQ(request.dir, "d");
    ASSERT_EQ(request.shards.size(), 1u) << store;
    ASSERT_EQ(request.values.size(), 1u) << store;
    EXPECT_EQ(request.values[0].file, "step.0.t.npy");
  }
  EXPECT_EQ(plan->per_store.at("store1").shards[0].shard, 2u);
  EXPECT_EQ(plan->files, (std::vector<std::string>{"w.0.t.npy", "w.1.t.npy", "step.0.t.npy"}));

  // Replies in request order (shards, then values) give each block its size and CRC.
  std::map<std::string, proto::SaveShardsReply> replies;
  replies["store0"].files = {{"w.0.t.npy", 10, 1}, {"step.0.t.npy", 5, 9}};
  replies["store1"].files = {{"w.1.t.npy", 20, 2}, {"step.0.t.npy", 5, 9}};
  ASSERT_THAT(ApplySaveReplies(*plan, replies), IsOk());
  EXPECT_EQ(plan->index.tensors[0].blocks[1].bytes, 20u);
  EXPECT_EQ(plan->index.tensors[0].blocks[1].crc32, 2u);
  EXPECT_EQ(plan->index.tensors[1].blocks[0].crc32, 9u);
  replies["store1"].files.pop_back();
  replies["store0"].files[0].file = "other.npy";
  EXPECT_EQ(ApplySaveReplies(*plan, replies).code(), Code::kInternal);
}

TEST(CheckpointPlanTest, NamesAndValuesAloneAreRefused) {
  const ResultPlan rows = Future({0, -1}, {4});
  const Tensor v = Tensor::F32({2}, {1, 2});
  EXPECT_EQ(PlanSave({{"a/b", &rows, nullptr}}, 1, "d", "t", HostOf).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(
      PlanSave({{"w", &rows, nullptr}, {"w", nullptr, &v}}, 1, "d", "t", HostOf).status().code(),
      Code::kInvalidArgument);
  auto alone = PlanSave({{"v", nullptr, &v}}, 1, "d", "t", HostOf);
  EXPECT_EQ(alone.status().code(), Code::kInvalidArgument);
  ResultPlan dynamic = rows;
  dynamic.type.shape[0] = kDynamicDim;
  EXPECT_EQ(PlanSave({{"w", &dynamic, nullptr}}, 1, "d", "t", HostOf).status().code(),
            Code::kInvalidArgument);
}

// Loads a tensor saved as `saved` over `saved_mesh` onto `target` over `mesh` and checks,
// by applying the pieces to the real values, that every shard is its block of the tensor.
void ExpectLoadsExactly(std::vector<int32_t> saved_split, Shape saved_mesh,
                        std::vector<int32_t> target_split, Shape mesh) {
  std::vector<float> values(48);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  const Tensor global = Tensor::F32({8, 6}, values);
  const ResultPlan saved = Future(std::move(saved_split), saved_mesh);
  auto plan = PlanSave({{"w", &saved, nullptr}}, 1, "d", "t", HostOf);
  ASSERT_THAT(plan, IsOk());
  const checkpoint::TensorEntry& entry = plan->index.tensors[0];
  std::map<std::string, Tensor> files;  // what each saved block's file holds
  for (const auto& b : entry.blocks)
    files[b.file] = ExtractBlock(global, b.offset, b.shape).value();

  const ir::TensorType target{DType::kF32, {8, 6}, std::move(target_split)};
  std::vector<std::string> stores;
  for (int64_t s = 0; s < NumElements(mesh); ++s) stores.push_back("t" + std::to_string(s));
  std::map<std::string, proto::LoadShards> per_store;
  auto result = PlanLoad(entry, target, mesh, stores, 1, "d", 77, per_store);
  ASSERT_THAT(result, IsOk());
  ASSERT_EQ(result->shards.size(), stores.size());
  for (size_t s = 0; s < stores.size(); ++s) {
    const proto::ShardFromFiles& shard = per_store.at(stores[s]).shards.at(0);
    EXPECT_EQ(shard.object_id, 77u);
    Tensor got(DType::kF32, shard.shape);
    int64_t covered = 0;
    for (const auto& piece : shard.pieces) {
      const Tensor part = ExtractBlock(files.at(piece.file), piece.begin, piece.size).value();
      ASSERT_THAT(InsertBlock(got, part, piece.at), IsOk());
      covered += part.num_elements();
    }
    EXPECT_EQ(covered, got.num_elements()) << "shard " << s << ": each element once";
    const Tensor want = ExtractBlock(global, ir::ShardOrigin(target, mesh, static_cast<int>(s)),
                                     ir::ShardShape(target, mesh))
                            .value();
    EXPECT_EQ(got, want) << "shard " << s;
  }
}

TEST(CheckpointPlanTest, ALoadCutsTheSavedBlocksForAnyLayout) {
  ExpectLoadsExactly({0, -1}, {4}, {0, -1}, {4});    // as saved
  ExpectLoadsExactly({0, -1}, {4}, {-1, -1}, {1});   // whole, on one device
  ExpectLoadsExactly({0, -1}, {4}, {0, 1}, {2, 3});  // 2 x 3 blocks
  ExpectLoadsExactly({1, 0}, {2, 2}, {-1, 0}, {3});  // columns cut 3 ways from 2 x 2 blocks
  ExpectLoadsExactly({-1, -1}, {2}, {0, -1}, {8});   // replicated, then row by row
}

TEST(CheckpointPlanTest, ALayoutThatDoesNotFitTheSliceIsRefused) {
  const ResultPlan rows = Future({0, -1}, {4});
  auto plan = PlanSave({{"w", &rows, nullptr}}, 1, "d", "t", HostOf);
  ASSERT_THAT(plan, IsOk());
  std::map<std::string, proto::LoadShards> per_store;
  const ir::TensorType over_five{DType::kF32, {8, 6}, {0, -1}};
  auto refused = PlanLoad(plan->index.tensors[0], over_five, {5}, {"a", "b", "c", "d", "e"}, 1, "d",
                          7, per_store);
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("does not divide"), std::string::npos);
  const ir::TensorType other_dtype{DType::kI32, {8, 6}, {0, -1}};
  EXPECT_EQ(
      PlanLoad(plan->index.tensors[0], other_dtype, {4}, {"a", "b", "c", "d"}, 1, "d", 7, per_store)
          .status()
          .code(),
      Code::kInvalidArgument);
  EXPECT_TRUE(per_store.empty());
}

}  // namespace
}  // namespace atl
