#include "common/service/owner_cache.h"

#include <gtest/gtest.h>
#include "tests/status_matchers.h"

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
  ASSERT_THAT(user, IsOk());
  EXPECT_EQ(*user, "");
}

// What the RM told (OwnersKnown) is answered without asking it: here no RM answers, and a
// lookup of anything not told fails after its timeout.
TEST(OwnerCacheTest, WhatTheRmToldIsAnsweredWithoutAskingIt) {
  zmq::context_t context;
  net::Requester silent_rm(context, "tcp://127.0.0.1:1");
  ASSERT_THAT(silent_rm.Connect(), IsOk());
  OwnerCache owners(&silent_rm, milliseconds(50));
  ASSERT_THAT(owners.Learn({{7, 8}, {"client:alice", "client:bob"}, {30}, {7}, {}, {}, false, {}}),
              IsOk());
  auto alice = owners.ClientUser(7);
  ASSERT_THAT(alice, IsOk());
  EXPECT_EQ(*alice, "client:alice");
  EXPECT_THAT(owners.CheckClient(proto::Peer{"client:bob"}, 8, "submit"), IsOk());
  EXPECT_EQ(owners.CheckClient(proto::Peer{"client:bob"}, 7, "submit").code(),
            Code::kPermissionDenied);
  auto functions = owners.FunctionClients({30});
  ASSERT_THAT(functions, IsOk());
  EXPECT_EQ(functions->at(30), 7u);
  // Not told: asked, and the silent RM fails the lookup.
  EXPECT_FALSE(owners.ClientUser(9).ok());
  // Told gone: refused as gone, with the RM's reason, without asking.
  ASSERT_THAT(owners.Learn({{}, {}, {}, {}, {8}, {"goodbye"}, false, {}}), IsOk());
  const Status bob = owners.ClientUser(8).status();
  EXPECT_EQ(bob.code(), Code::kCancelled) << bob.ToString();
  EXPECT_NE(bob.message().find("has left the cluster (goodbye)"), std::string::npos);
  // Forgotten (collected): asked again.
  owners.ForgetClient(7);
  EXPECT_FALSE(owners.ClientUser(7).ok());
}

TEST(OwnerCacheTest, ANoticeWithListsOfUnequalLengthsIsRefused) {
  OwnerCache owners(nullptr, milliseconds(0));
  EXPECT_EQ(owners.Learn({{7, 8}, {"client:alice"}, {}, {}, {}, {}, false, {}}).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(owners.Learn({{}, {}, {30}, {}, {}, {}, false, {}}).code(), Code::kInvalidArgument);
  EXPECT_EQ(owners.Learn({{}, {}, {}, {}, {9}, {}, false, {}}).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace atl
