// CheckQuota: the one refusal of every per-client quota, and its arithmetic at the edges.
#include "common/service/quota.h"

#include <cstdint>
#include <limits>

#include <gtest/gtest.h>
#include "tests/status_matchers.h"

namespace atl {
namespace {

QuotaRequest Bytes(uint64_t limit, uint64_t in_use, uint64_t requested) {
  return {3, "store_bytes", "on host h0", "bytes", limit, in_use, requested};
}

TEST(CheckQuotaTest, AllowsUpToTheLimitInclusive) {
  EXPECT_THAT(CheckQuota(Bytes(1048576, 1044480, 4096)), IsOk());
  EXPECT_THAT(CheckQuota(Bytes(1048576, 0, 1048576)), IsOk());
  EXPECT_THAT(CheckQuota(Bytes(1048576, 1048576, 0)), IsOk());
}

TEST(CheckQuotaTest, RefusesOverTheLimitNamingQuotaLimitUseAndRequest) {
  const Status s = CheckQuota(Bytes(1048576, 1048576, 4096));
  EXPECT_EQ(s.code(), Code::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "client 3 over its store_bytes quota on host h0: 1048576 bytes in use + 4096 "
            "requested > 1048576");
  EXPECT_EQ(s.ToString().rfind("ResourceExhausted: ", 0), 0u) << s.ToString();
}

TEST(CheckQuotaTest, AClusterWideQuotaNamesNoPlace) {
  const Status s = CheckQuota({5, "slices", "", "slices", 2, 2, 1});
  EXPECT_EQ(s.message(), "client 5 over its slices quota: 2 slices in use + 1 requested > 2");
}

TEST(CheckQuotaTest, ZeroIsUnlimited) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  EXPECT_THAT(CheckQuota(Bytes(0, kMax, kMax)), IsOk());
}

TEST(CheckQuotaTest, NoSumWrapsAround) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(CheckQuota(Bytes(100, 50, kMax)).code(), Code::kResourceExhausted);
  EXPECT_EQ(CheckQuota(Bytes(100, kMax, 1)).code(), Code::kResourceExhausted);
  // Over the limit already (a lower quota after a restart): nothing more, but a request of
  // nothing takes nothing.
  EXPECT_EQ(CheckQuota(Bytes(100, 150, 1)).code(), Code::kResourceExhausted);
  EXPECT_THAT(CheckQuota(Bytes(100, 150, 0)), IsOk());
}

}  // namespace
}  // namespace atl
