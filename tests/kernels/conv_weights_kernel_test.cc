// kernels/conv_onednn.cc's kept weights: a weights tensor known by a ContentId (a store shard
// read in place) is reordered into oneDNN's layout once and found again by later calls; other
// bytes under another id never get the kept ones; a tensor without an id is never kept; the
// budget bounds what is kept. Every result against a direct loop in double.
#include <sys/mman.h>

#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/lax.h"
#include "tests/kernels/kernel_checks.h"
#include "tests/kernels/reference_ops.h"
#include "tests/kernels/test_tensors.h"

namespace atl::kernels {
namespace {

// Sixteen channels in and out: oneDNN wants such weights in a blocked layout, not atoll's.
const Shape kX{1, 16, 9, 7}, kK{16, 16, 3, 3}, kOut{1, 16, 9, 7};
const ConvDims kDims = testutil::Conv3x3Dims();

// `values` as a store shard read in place would be: a view of read-only pages, known as `id`.
Tensor ReadOnlyView(const Tensor& values, ContentId id) {
  const size_t bytes = values.nbytes();
  void* pages = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(pages, MAP_FAILED);
  std::memcpy(pages, values.data(), bytes);
  EXPECT_EQ(mprotect(pages, bytes, PROT_READ), 0);
  std::shared_ptr<void> owner(pages, [bytes](void* p) { munmap(p, bytes); });
  auto view = Tensor::View(values.dtype(), values.shape(),
                           {static_cast<const std::byte*>(pages), bytes}, owner, id);
  EXPECT_TRUE(view.ok()) << view.status().ToString();
  return std::move(view).value();
}

Tensor Conv(const Tensor& x, const Tensor& k) {
  Result<std::optional<Tensor>> out = ConvWithOneDnn(x, k, kDims, kOut);
  EXPECT_TRUE(out.ok() && out->has_value()) << "oneDNN took no f32 2-d convolution";
  return out.ok() && out->has_value() ? **out : Tensor();
}

class ConvWeightsKernelTest : public ::testing::Test {
 protected:
  void SetUp() override { SetConvWeightCacheBudget(kBudget); }
  void TearDown() override { SetConvWeightCacheBudget(kBudget); }
  static constexpr uint64_t kBudget = uint64_t{256} << 20;
  std::mt19937 rng_{11};
};

TEST_F(ConvWeightsKernelTest, KnownWeightsAreReorderedOnceAndFoundByLaterCalls) {
  const Tensor x = testutil::RandomF32(rng_, kX), k = testutil::RandomF32(rng_, kK);
  const Tensor weights = ReadOnlyView(k, {0x51, 1});
  const std::vector<double> want = testutil::RefConv3x3(x, k);
  const ConvWeightCacheStats before = ConvWeightCacheStatsNow();
  testutil::ExpectClose(Conv(x, weights), kOut, want, 1e-3, 1e-4);
  const ConvWeightCacheStats first = ConvWeightCacheStatsNow();
  EXPECT_EQ(first.misses, before.misses + 1);
  EXPECT_EQ(first.entries, before.entries + 1);
  EXPECT_GE(first.bytes, before.bytes + k.nbytes());
  // Another input, the same weights: found, not reordered again.
  const Tensor x2 = testutil::RandomF32(rng_, kX);
  testutil::ExpectClose(Conv(x2, weights), kOut, testutil::RefConv3x3(x2, k), 1e-3, 1e-4);
  const ConvWeightCacheStats second = ConvWeightCacheStatsNow();
  EXPECT_EQ(second.hits, first.hits + 1);
  EXPECT_EQ(second.misses, first.misses);
  EXPECT_EQ(second.entries, first.entries);
}

TEST_F(ConvWeightsKernelTest, OtherBytesUnderAnotherIdNeverGetTheKeptWeights) {
  const Tensor x = testutil::RandomF32(rng_, kX);
  const Tensor k1 = testutil::RandomF32(rng_, kK), k2 = testutil::RandomF32(rng_, kK);
  const Tensor old_weights = ReadOnlyView(k1, {0x52, 1});
  testutil::ExpectClose(Conv(x, old_weights), kOut, testutil::RefConv3x3(x, k1), 1e-3, 1e-4);
  // A buffer that changed is a new version; a restarted store is a new source.
  for (const ContentId id : {ContentId{0x52, 2}, ContentId{0x53, 1}}) {
    const ConvWeightCacheStats before = ConvWeightCacheStatsNow();
    testutil::ExpectClose(Conv(x, ReadOnlyView(k2, id)), kOut, testutil::RefConv3x3(x, k2), 1e-3,
                          1e-4);
    EXPECT_EQ(ConvWeightCacheStatsNow().misses, before.misses + 1);
  }
  // The first bytes are still found under their own id.
  testutil::ExpectClose(Conv(x, old_weights), kOut, testutil::RefConv3x3(x, k1), 1e-3, 1e-4);
}

TEST_F(ConvWeightsKernelTest, WeightsWithoutAnIdAreNeverKept) {
  const Tensor x = testutil::RandomF32(rng_, kX), k = testutil::RandomF32(rng_, kK);
  const ConvWeightCacheStats before = ConvWeightCacheStatsNow();
  for (int i = 0; i < 2; ++i) {
    testutil::ExpectClose(Conv(x, k), kOut, testutil::RefConv3x3(x, k), 1e-3, 1e-4);
  }
  // A copy of a view may be written: it has no id either.
  const Tensor copy = ReadOnlyView(k, {0x54, 1});
  testutil::ExpectClose(Conv(x, Tensor(copy)), kOut, testutil::RefConv3x3(x, k), 1e-3, 1e-4);
  const ConvWeightCacheStats after = ConvWeightCacheStatsNow();
  EXPECT_EQ(after.hits, before.hits);
  EXPECT_EQ(after.misses, before.misses);
  EXPECT_EQ(after.entries, before.entries);
}

TEST_F(ConvWeightsKernelTest, TheBudgetBoundsWhatIsKeptLeastRecentlyUsedFirstOut) {
  const Tensor x = testutil::RandomF32(rng_, kX);
  const Tensor k1 = testutil::RandomF32(rng_, kK), k2 = testutil::RandomF32(rng_, kK);
  const Tensor a = ReadOnlyView(k1, {0x55, 1}), b = ReadOnlyView(k2, {0x55, 2});
  SetConvWeightCacheBudget(0);
  EXPECT_EQ(ConvWeightCacheStatsNow().entries, 0u);
  EXPECT_EQ(ConvWeightCacheStatsNow().bytes, 0u);
  testutil::ExpectClose(Conv(x, a), kOut, testutil::RefConv3x3(x, k1), 1e-3, 1e-4);
  EXPECT_EQ(ConvWeightCacheStatsNow().entries, 0u) << "nothing fits a budget of 0";

  // Room for one: the second replaces the first, which is then reordered again.
  SetConvWeightCacheBudget(k1.nbytes() + k1.nbytes() / 2);
  Conv(x, a);
  Conv(x, b);
  ConvWeightCacheStats now = ConvWeightCacheStatsNow();
  EXPECT_EQ(now.entries, 1u);
  testutil::ExpectClose(Conv(x, a), kOut, testutil::RefConv3x3(x, k1), 1e-3, 1e-4);
  EXPECT_EQ(ConvWeightCacheStatsNow().misses, now.misses + 1);
  testutil::ExpectClose(Conv(x, b), kOut, testutil::RefConv3x3(x, k2), 1e-3, 1e-4);
  EXPECT_EQ(ConvWeightCacheStatsNow().misses, now.misses + 2);
}

}  // namespace
}  // namespace atl::kernels
