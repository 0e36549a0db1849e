#include "common/service/owner_cache.h"

#include <gtest/gtest.h>

namespace atl {
namespace {

using std::chrono::milliseconds;

TEST(OwnerCacheTest, ALookupBlocksItsLoopForHalfTheLivenessLapseAtMost) {
  // The RM takes a service silent for 4 x 500 ms for lost: its lookups give up after 1 s.
  EXPECT_EQ(OwnerCache::LookupTimeout(milliseconds(500), 4), milliseconds(1000));
  EXPECT_EQ(OwnerCache::LookupTimeout(milliseconds(100), 3), milliseconds(150));
  EXPECT_EQ(OwnerCache::LookupTimeout(milliseconds(5000), 4), milliseconds(2000));
}

TEST(OwnerCacheTest, WithoutAnRmEveryClientCountsAsLive) {
  OwnerCache owners(nullptr, milliseconds(0));
  auto user = owners.ClientUser(42);
  ASSERT_TRUE(user.ok()) << user.status().ToString();
  EXPECT_EQ(*user, "");
}

}  // namespace
}  // namespace atl
