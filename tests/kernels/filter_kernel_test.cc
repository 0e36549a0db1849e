// kernels::Filter against a reference loop: the elements above the threshold, in order.
#include "kernels/filter.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/kernels/test_tensors.h"

namespace atl::kernels {
namespace {

using testutil::RandomF32;

TEST(FilterKernelTest, KeepsTheElementsAboveTheThresholdInOrder) {
  std::mt19937 rng(11);
  for (int64_t n : {0, 1, 7, 33}) {
    const Tensor t = RandomF32(rng, {n});
    std::vector<float> want;
    for (float v : t.as<float>()) {
      if (v > 0.25) want.push_back(v);
    }
    ATOLL_ASSERT_OK_AND_ASSIGN(Tensor out, Filter(t, 0.25));
    EXPECT_EQ(out, Tensor::F32({static_cast<int64_t>(want.size())}, want)) << n;
  }
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor ints, Filter(Tensor::I32({5}, {3, -1, 4, 1, -5}), 1));
  EXPECT_EQ(ints, Tensor::I32({2}, {3, 4}));
  ATOLL_ASSERT_OK_AND_ASSIGN(Tensor none, Filter(Tensor::I32({2}, {1, 1}), 1));
  EXPECT_EQ(none.shape(), (Shape{0}));
}

TEST(FilterKernelTest, OnlyOneDimensionalTensors) {
  const Status s = Filter(Tensor(DType::kF32, {2, 2}), 0).status();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("1-D"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace atl::kernels
