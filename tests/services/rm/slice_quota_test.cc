// The RM's per-client quotas on slices and devices, counted from its state.
#include "services/rm/slice_quota.h"

#include <gtest/gtest.h>
#include "tests/status_matchers.h"

namespace atl::rm {
namespace {

// Gives `client` a slice of `devices` devices (their ids do not matter here).
void AddSlice(RmState& state, uint64_t client, uint32_t devices) {
  const uint64_t id = state.next_slice_id++;
  state.slices[id] = {id, client, "island0", std::vector<uint32_t>(devices, 0)};
}

TEST(SliceQuotaTest, UnlimitedByDefault) {
  RmState state;
  for (int i = 0; i < 100; ++i) AddSlice(state, 1, 8);
  EXPECT_THAT(CheckSliceQuota(state, QuotaConfig{}, 1, 1000), IsOk());
}

TEST(SliceQuotaTest, CountsOnlyTheClientsOwnSlices) {
  RmState state;
  QuotaConfig quotas;
  quotas.slices = 2;
  AddSlice(state, 1, 1);
  AddSlice(state, 2, 1);
  AddSlice(state, 2, 1);
  EXPECT_THAT(CheckSliceQuota(state, quotas, 1, 1), IsOk());
  AddSlice(state, 1, 1);
  const Status over = CheckSliceQuota(state, quotas, 1, 1);
  EXPECT_EQ(over.code(), Code::kResourceExhausted);
  EXPECT_EQ(over.message(), "client 1 over its slices quota: 2 slices in use + 1 requested > 2");
  EXPECT_THAT(CheckSliceQuota(state, quotas, 3, 1), IsOk()) << "a client holding nothing";
}

TEST(SliceQuotaTest, DevicesAreSummedOverTheClientsSlices) {
  RmState state;
  QuotaConfig quotas;
  quotas.devices = 4;
  AddSlice(state, 1, 2);
  AddSlice(state, 1, 1);
  EXPECT_THAT(CheckSliceQuota(state, quotas, 1, 1), IsOk());
  const Status over = CheckSliceQuota(state, quotas, 1, 2);
  EXPECT_EQ(over.code(), Code::kResourceExhausted);
  EXPECT_EQ(over.message(), "client 1 over its devices quota: 3 devices in use + 2 requested > 4");
}

TEST(SliceQuotaTest, ASliceGoneGivesItsQuotaBack) {
  RmState state;
  QuotaConfig quotas;
  quotas.slices = 1;
  quotas.devices = 2;
  AddSlice(state, 1, 2);
  EXPECT_FALSE(CheckSliceQuota(state, quotas, 1, 1).ok());
  state.slices.clear();  // what the RM's DropClient does to a collected client's slices
  EXPECT_THAT(CheckSliceQuota(state, quotas, 1, 2), IsOk());
}

}  // namespace
}  // namespace atl::rm
