// kernels/collectives.h over 1 to 4 shards, against references built by index arithmetic.
#include "kernels/collectives.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/kernels/kernel_checks.h"
#include "tests/kernels/test_tensors.h"

namespace atl::kernels {
namespace {

using testutil::ExpectClose;
using testutil::ExpectInvalid;
using testutil::RandomF32;
using testutil::RandomI32;

std::vector<Tensor> RandomShards(std::mt19937& rng, int n, const Shape& shape) {
  std::vector<Tensor> shards;
  for (int i = 0; i < n; ++i) shards.push_back(RandomF32(rng, shape));
  return shards;
}

std::vector<double> Sum(const std::vector<Tensor>& shards) {
  std::vector<double> sum(shards[0].num_elements(), 0.0);
  for (const Tensor& s : shards) {
    const auto v = s.ToDoubles();
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += v[i];
  }
  return sum;
}

TEST(CollectivesKernelTest, AllReduceSumGivesEveryShardTheSameSum) {
  std::mt19937 rng(91);
  for (int n : {1, 2, 3, 4}) {
    for (const Shape& shape : std::vector<Shape>{{1}, {7, 13}, {}, {0}}) {
      const auto shards = RandomShards(rng, n, shape);
      ATOLL_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, AllReduceSum(shards));
      ASSERT_EQ(out.size(), static_cast<size_t>(n));
      for (const Tensor& t : out) {
        ExpectClose(t, shape, Sum(shards), 1e-5, 1e-6);
        EXPECT_EQ(t, out[0]);  // bit-identical on every shard
      }
    }
  }
  // i32 wraps around.
  const std::vector<Tensor> ints = {Tensor::I32({2}, {INT32_MAX, -5}), Tensor::I32({2}, {1, 3})};
  ATOLL_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, AllReduceSum(ints));
  EXPECT_EQ(out[1], Tensor::I32({2}, {INT32_MIN, -2}));
}

TEST(CollectivesKernelTest, AllGatherAndReduceScatterMatchReference) {
  std::mt19937 rng(92);
  for (int n : {1, 2, 3, 4}) {
    // All-gather of [2, 3] shards along axis 1: row r of the result is every shard's row r.
    const auto shards = RandomShards(rng, n, {2, 3});
    ATOLL_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> gathered, AllGather(shards, 1));
    std::vector<double> ref;
    for (int r = 0; r < 2; ++r) {
      for (const Tensor& s : shards) {
        const auto v = s.ToDoubles();
        ref.insert(ref.end(), v.begin() + r * 3, v.begin() + (r + 1) * 3);
      }
    }
    ASSERT_EQ(gathered.size(), static_cast<size_t>(n));
    for (const Tensor& t : gathered) ExpectClose(t, {2, 3 * n}, ref, 0, 0);

    // Reduce-scatter of [2, 3n] shards along axis 1: shard i gets columns [3i, 3i + 3).
    const auto wide = RandomShards(rng, n, {2, 3 * n});
    ATOLL_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> scattered, ReduceScatter(wide, -1));
    const auto sum = Sum(wide);
    ASSERT_EQ(scattered.size(), static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      std::vector<double> piece;
      for (int r = 0; r < 2; ++r) {
        piece.insert(piece.end(), sum.begin() + r * 3 * n + 3 * i,
                     sum.begin() + r * 3 * n + 3 * i + 3);
      }
      ExpectClose(scattered[i], {2, 3}, piece, 1e-5, 1e-6);
    }
  }
}

TEST(CollectivesKernelTest, AllToAllMatchesReference) {
  std::mt19937 rng(93);
  for (int n : {1, 2, 3, 4}) {
    // [2n, 5] shards, split along 0, concat along 1: out[j][r][i * 5 + c] = in[i][j * 2 + r][c].
    std::vector<Tensor> shards;
    for (int i = 0; i < n; ++i) shards.push_back(RandomI32(rng, {2 * n, 5}));
    ATOLL_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, AllToAll(shards, 0, 1));
    ASSERT_EQ(out.size(), static_cast<size_t>(n));
    for (int j = 0; j < n; ++j) {
      ASSERT_EQ(out[j].shape(), (Shape{2, 5 * n}));
      ASSERT_EQ(out[j].dtype(), DType::kI32);
      for (int r = 0; r < 2; ++r) {
        for (int i = 0; i < n; ++i) {
          for (int c = 0; c < 5; ++c) {
            ASSERT_EQ(out[j].as<int32_t>()[r * 5 * n + i * 5 + c],
                      shards[i].as<int32_t>()[(j * 2 + r) * 5 + c]);
          }
        }
      }
    }
    // Split and concat along the same axis keeps the shape: shard j gets piece j of each.
    ATOLL_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> same, AllToAll(shards, 0, 0));
    for (int j = 0; j < n; ++j) {
      ASSERT_EQ(same[j].shape(), (Shape{2 * n, 5}));
      for (int i = 0; i < n; ++i) {
        for (int k = 0; k < 10; ++k) {
          ASSERT_EQ(same[j].as<int32_t>()[i * 10 + k], shards[i].as<int32_t>()[j * 10 + k]);
        }
      }
    }
  }
}

TEST(CollectivesKernelTest, RejectsEmptyAndMismatchedShards) {
  ExpectInvalid(AllReduceSum(std::vector<Tensor>{}), {"at least one shard"});
  const std::vector<Tensor> mixed = {Tensor(DType::kF32, {3}), Tensor(DType::kF32, {4})};
  ExpectInvalid(AllReduceSum(mixed), {"shard 1 is f32[4]", "f32[3]"});
  const std::vector<Tensor> dtypes = {Tensor(DType::kF32, {3}), Tensor(DType::kI32, {3})};
  ExpectInvalid(AllGather(dtypes, 0), {"shard 1 is i32[3]"});
  const std::vector<Tensor> ragged = {Tensor(DType::kF32, {2, 3}), Tensor(DType::kF32, {3, 3})};
  ExpectInvalid(AllGather(ragged, 1), {"all-gather", "f32[3,3]"});
  const std::vector<Tensor> three = {Tensor(DType::kF32, {4}), Tensor(DType::kF32, {4}),
                                     Tensor(DType::kF32, {4})};
  ExpectInvalid(ReduceScatter(three, 0), {"reduce-scatter", "3 parts", "dividing 4"});
  ExpectInvalid(AllToAll(three, 0, 0), {"all-to-all", "3 parts"});
  ExpectInvalid(AllToAll(three, 0, 1), {"all-to-all concat", "axis 1"});
}

}  // namespace
}  // namespace atl::kernels
