// Resharding plans between every pair of shardings of an [8,8] tensor over 1-D and 2-D
// meshes of up to 8 devices: cutting a random tensor into the source shards, moving the
// planned pieces and assembling the destination shards gives back exactly that tensor,
// with every element of every destination shard written once.
#include "client/reshard.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "client/sharding.h"
#include "common/base/tensor_block.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

// Every way to cut each dimension of a rank-`rank` tensor along a distinct mesh axis.
std::vector<std::vector<int32_t>> AllSplits(size_t rank, size_t mesh_rank) {
  std::vector<std::vector<int32_t>> out{{}};
  for (size_t d = 0; d < rank; ++d) {
    std::vector<std::vector<int32_t>> next;
    for (const auto& prefix : out) {
      for (int32_t axis = -1; axis < static_cast<int32_t>(mesh_rank); ++axis) {
        if (axis >= 0 && std::find(prefix.begin(), prefix.end(), axis) != prefix.end()) continue;
        auto longer = prefix;
        longer.push_back(axis);
        next.push_back(std::move(longer));
      }
    }
    out = std::move(next);
  }
  return out;
}

// Every layout of `shape` over the meshes below, hosts two devices each.
std::vector<Layout> AllLayouts(const Shape& shape) {
  const std::vector<Shape> meshes = {{1}, {2}, {4}, {8}, {2, 2}, {2, 4}, {4, 2}};
  std::vector<Layout> out;
  for (const Shape& mesh : meshes) {
    for (auto& split : AllSplits(shape.size(), mesh.size())) {
      Layout l{{DType::kF32, shape, split}, mesh, {}};
      if (!ir::IsStatic(l.type)) continue;
      for (int64_t s = 0; s < NumElements(mesh); ++s) l.hosts.push_back(fmt::format("h{}", s / 2));
      out.push_back(std::move(l));
    }
  }
  return out;
}

TEST(ReshardTest, EveryPairOfLayoutsGivesBackTheSameTensor) {
  const Shape shape = {8, 8};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> value(-1, 1);
  std::vector<float> v(NumElements(shape));
  for (auto& x : v) x = value(rng);
  const Tensor global = Tensor::F32(shape, v);
  const auto layouts = AllLayouts(shape);
  ASSERT_EQ(layouts.size(), 4 * 3 + 3 * 7u);  // 1-D meshes: 3 splits each; 2-D: 7
  int pairs = 0;
  for (const Layout& from : layouts) {
    std::vector<Tensor> sources;
    for (size_t s = 0; s < from.hosts.size(); ++s) {
      auto shard = ShardOf(global, from.type, from.mesh, static_cast<int>(s));
      ASSERT_THAT(shard, IsOk());
      sources.push_back(std::move(*shard));
    }
    for (const Layout& to : layouts) {
      SCOPED_TRACE(fmt::format("mesh {} split [{}] -> mesh {} split [{}]", ShapeString(from.mesh),
                               fmt::join(from.type.split, ","), ShapeString(to.mesh),
                               fmt::join(to.type.split, ",")));
      auto routes = PlanReshard(from, to);
      ASSERT_THAT(routes, IsOk());
      const Shape local = ir::ShardShape(to.type, to.mesh);
      std::vector<Tensor> dests(to.hosts.size(), Tensor(DType::kF32, local));
      std::vector<int64_t> written(to.hosts.size());
      std::vector<uint32_t> pieces(to.hosts.size());
      for (const auto& r : *routes) {
        ASSERT_LT(r.from, sources.size());
        ASSERT_LT(r.to, dests.size());
        EXPECT_EQ(r.piece.dst_shape, local);
        auto block = ExtractBlock(sources[r.from], r.piece.begin, r.piece.size);
        ASSERT_THAT(block, IsOk());
        ASSERT_THAT(InsertBlock(dests[r.to], *block, r.piece.dst_begin), IsOk());
        written[r.to] += block->num_elements();
        pieces[r.to]++;
        EXPECT_EQ(r.piece.of,
                  0u + std::count_if(routes->begin(), routes->end(),
                                     [&](const PieceRoute& o) { return o.to == r.to; }));
      }
      for (size_t c = 0; c < dests.size(); ++c) {
        EXPECT_EQ(written[c], NumElements(local)) << "shard " << c;  // each element once
      }
      auto back = Assemble(dests, to.type, to.mesh);
      ASSERT_THAT(back, IsOk());
      EXPECT_EQ(*back, global);
      ++pairs;
    }
  }
  EXPECT_EQ(pairs, static_cast<int>(layouts.size() * layouts.size()));
}

TEST(ReshardTest, AReplicaOnTheConsumersHostIsPreferred) {
  // Replicated over 2 hosts of 2 devices -> split over the same 4 devices: every piece
  // comes from the consumer's own host.
  Layout from{ir::SplitType(DType::kF32, {4}, -1), {4}, {"a", "a", "b", "b"}};
  Layout to{ir::SplitType(DType::kF32, {4}, 0), {4}, {"a", "a", "b", "b"}};
  auto routes = PlanReshard(from, to);
  ASSERT_THAT(routes, IsOk());
  ASSERT_EQ(routes->size(), 4u);
  for (const auto& r : *routes) EXPECT_EQ(from.hosts[r.from], to.hosts[r.to]);
}

TEST(ReshardTest, DifferentTensorsOrDynamicShapesAreRefused) {
  Layout a{ir::SplitType(DType::kF32, {4}, 0), {2}, {"a", "b"}};
  Layout b{ir::SplitType(DType::kF32, {8}, 0), {2}, {"a", "b"}};
  EXPECT_EQ(PlanReshard(a, b).status().code(), Code::kInvalidArgument);
  Layout dynamic{ir::SplitType(DType::kF32, {kDynamicDim}, 0), {2}, {"a", "b"}};
  EXPECT_EQ(PlanReshard(dynamic, dynamic).status().code(), Code::kInvalidArgument);
}

TEST(ShardingTest, ReplicasThatDisagreeAreAnError) {
  const ir::TensorType type = ir::SplitType(DType::kF32, {2}, 0);  // replicated on axis 1
  std::vector<Tensor> shards = {Tensor::F32({1}, {1}), Tensor::F32({1}, {1}), Tensor::F32({1}, {2}),
                                Tensor::F32({1}, {3})};
  EXPECT_EQ(Assemble(shards, type, {2, 2}).status().code(), Code::kInternal);
  shards[3] = Tensor::F32({1}, {2});
  auto ok = Assemble(shards, type, {2, 2});
  ASSERT_THAT(ok, IsOk());
  EXPECT_EQ(*ok, Tensor::F32({2}, {1, 2}));
}

}  // namespace
}  // namespace atl
