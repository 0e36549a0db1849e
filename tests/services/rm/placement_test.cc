// The spread-evenly placement policy: even load over devices and hosts, the island and kind
// constraints, slices for meshes, clear errors when nothing fits, and Replace for a lost
// device.
#include "services/rm/placement.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include "tests/status_matchers.h"

namespace atl::rm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Adds `per_host` devices of `kind` on each of `hosts` hosts named `<island>-h<i>` to
// `devices`, ids following on from the devices already there (the RM's numbering).
void AddHosts(std::vector<DeviceLoad>& devices, const std::string& island, int hosts, int per_host,
              const std::string& kind = "cpu") {
  for (int h = 0; h < hosts; ++h) {
    for (int i = 0; i < per_host; ++i) {
      DeviceLoad d;
      d.device_id = static_cast<uint32_t>(devices.size());
      d.island = island;
      d.host = island + "-h" + std::to_string(h);
      d.local_index = static_cast<uint32_t>(i);
      d.kind = kind;
      devices.push_back(d);
    }
  }
}

// Counts the slice onto the devices it was placed on, as the RM does.
void Load(std::vector<DeviceLoad>& devices, const std::vector<uint32_t>& slice) {
  for (uint32_t id : slice) devices[id].slices++;
}

class PlacementTest : public ::testing::Test {
 protected:
  std::unique_ptr<PlacementPolicy> policy_ = MakeSpreadEvenlyPolicy();
};

TEST_F(PlacementTest, SpreadsASliceOverHostsBeforeFillingOne) {
  std::vector<DeviceLoad> devices;
  AddHosts(devices, "a", 2, 4);  // a-h0: 0..3, a-h1: 4..7
  auto placed = policy_->Place({4, "", ""}, devices);
  ASSERT_THAT(placed, IsOk());
  // Devices 0 and 1 of each host, in physical id order.
  EXPECT_THAT(*placed, ElementsAre(0, 1, 4, 5));
}

TEST_F(PlacementTest, NextSlicesGoToTheLeastLoadedDevices) {
  std::vector<DeviceLoad> devices;
  AddHosts(devices, "a", 2, 4);
  auto first = policy_->Place({4, "", ""}, devices);
  ASSERT_THAT(first, IsOk());
  Load(devices, *first);
  auto second = policy_->Place({4, "", ""}, devices);
  ASSERT_THAT(second, IsOk());
  EXPECT_THAT(*second, ElementsAre(2, 3, 6, 7));
  Load(devices, *second);
  // Every device carries one slice now: a third spreads like the first.
  auto third = policy_->Place({2, "", ""}, devices);
  ASSERT_THAT(third, IsOk());
  EXPECT_THAT(*third, ElementsAre(0, 4));
}

TEST_F(PlacementTest, EvenLoadOverManySlices) {
  std::vector<DeviceLoad> devices;
  AddHosts(devices, "a", 3, 4);
  for (int i = 0; i < 6; ++i) {
    auto placed = policy_->Place({2, "", ""}, devices);
    ASSERT_THAT(placed, IsOk());
    ASSERT_EQ(placed->size(), 2u);
    EXPECT_NE(devices[(*placed)[0]].host, devices[(*placed)[1]].host)
        << "a slice of two goes on two hosts while it can";
    Load(devices, *placed);
  }
  for (const auto& d : devices) EXPECT_EQ(d.slices, 1u) << "device " << d.device_id;
}

TEST_F(PlacementTest, PicksTheLeastLoadedIslandThatFits) {
  std::vector<DeviceLoad> devices;
  AddHosts(devices, "a", 1, 4);  // 0..3
  AddHosts(devices, "b", 1, 4);  // 4..7
  Load(devices, {0, 1});
  auto placed = policy_->Place({2, "", ""}, devices);
  ASSERT_THAT(placed, IsOk());
  EXPECT_THAT(*placed, ElementsAre(4, 5));
  Load(devices, *placed);
  Load(devices, {6});
  // Island a is the lighter one now (2 of 4 against 3 of 4).
  placed = policy_->Place({2, "", ""}, devices);
  ASSERT_THAT(placed, IsOk());
  EXPECT_THAT(*placed, ElementsAre(2, 3));
}

TEST_F(PlacementTest, SkipsIslandsTooSmallForTheSlice) {
  std::vector<DeviceLoad> devices;
  AddHosts(devices, "a", 1, 2);  // idle but too small
  AddHosts(devices, "b", 2, 2);
  Load(devices, {2, 3, 4, 5});
  auto placed = policy_->Place({3, "", ""}, devices);
  ASSERT_THAT(placed, IsOk());
  for (uint32_t id : *placed) EXPECT_EQ(devices[id].island, "b");
}

TEST_F(PlacementTest, KeepsToTheIslandAsked) {
  std::vector<DeviceLoad> devices;
  AddHosts(devices, "a", 1, 4);
  AddHosts(devices, "b", 1, 4);
  Load(devices, {4, 5, 6, 7});  // b is the busier island, but it is the one asked for
  auto placed = policy_->Place({2, "b", ""}, devices);
  ASSERT_THAT(placed, IsOk());
  EXPECT_THAT(*placed, ElementsAre(4, 5));
}

TEST_F(PlacementTest, KeepsToTheKindAsked) {
  std::vector<DeviceLoad> devices;
  AddHosts(devices, "a", 1, 2, "cpu");
  AddHosts(devices, "b", 1, 2, "gpu");
  auto placed = policy_->Place({2, "", "gpu"}, devices);
  ASSERT_THAT(placed, IsOk());
  EXPECT_THAT(*placed, ElementsAre(2, 3));
  auto none = policy_->Place({2, "a", "gpu"}, devices);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kNotFound);
  EXPECT_THAT(none.status().message(), HasSubstr("island 'a' has no live gpu devices"));
}

TEST_F(PlacementTest, NeverPlacesOnDeadDevices) {
  std::vector<DeviceLoad> devices;
  AddHosts(devices, "a", 2, 2);  // a-h0: 0,1; a-h1: 2,3
  devices[0].alive = devices[1].alive = false;
  auto placed = policy_->Place({2, "", ""}, devices);
  ASSERT_THAT(placed, IsOk());
  EXPECT_THAT(*placed, ElementsAre(2, 3));
  auto too_many = policy_->Place({3, "", ""}, devices);
  ASSERT_FALSE(too_many.ok());
  EXPECT_THAT(too_many.status().message(), HasSubstr("largest has 2"));
}

// A mesh slice asks for the product of its axes; virtual devices follow physical ids, so
// the mesh's rows (neighbouring shards) sit on one host.
TEST_F(PlacementTest, MeshRowsSitOnOneHost) {
  std::vector<DeviceLoad> devices;
  AddHosts(devices, "a", 2, 4);
  auto two_by_four = policy_->Place({2 * 4, "", ""}, devices);
  ASSERT_THAT(two_by_four, IsOk());
  ASSERT_EQ(two_by_four->size(), 8u);
  for (int row = 0; row < 2; ++row) {
    for (int col = 0; col < 4; ++col) {
      EXPECT_EQ(devices[(*two_by_four)[row * 4 + col]].host, "a-h" + std::to_string(row))
          << "mesh [" << row << "," << col << "]";
    }
  }
  std::vector<DeviceLoad> pairs;
  AddHosts(pairs, "a", 4, 2);
  auto four_by_two = policy_->Place({4 * 2, "", ""}, pairs);
  ASSERT_THAT(four_by_two, IsOk());
  for (int row = 0; row < 4; ++row) {
    EXPECT_EQ(pairs[(*four_by_two)[row * 2]].host, pairs[(*four_by_two)[row * 2 + 1]].host);
  }
}

TEST_F(PlacementTest, NotEnoughDevicesSaysHowManyThereAre) {
  std::vector<DeviceLoad> devices;
  AddHosts(devices, "a", 1, 3);
  AddHosts(devices, "b", 1, 2);
  auto any = policy_->Place({4, "", ""}, devices);
  ASSERT_FALSE(any.ok());
  EXPECT_EQ(any.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(any.status().message(), "no island has 4 live devices (largest has 3)");
  auto on_b = policy_->Place({3, "b", "cpu"}, devices);
  ASSERT_FALSE(on_b.ok());
  EXPECT_EQ(on_b.status().message(),
            "no island has 3 live cpu devices on island 'b' (largest has 2)");
}

TEST_F(PlacementTest, UnknownIslandAndEmptySlicesAreRefused) {
  std::vector<DeviceLoad> devices;
  AddHosts(devices, "a", 1, 2);
  auto unknown = policy_->Place({1, "z", ""}, devices);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), Code::kNotFound);
  EXPECT_EQ(unknown.status().message(), "island 'z' has no live devices");
  auto empty = policy_->Place({0, "", ""}, devices);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), Code::kInvalidArgument);
  auto nothing = policy_->Place({1, "", ""}, {});
  ASSERT_FALSE(nothing.ok());
  EXPECT_THAT(nothing.status().message(), HasSubstr("largest has 0"));
}

TEST_F(PlacementTest, ReplacePicksTheLeastLoadedLiveDeviceOutsideTheSlice) {
  std::vector<DeviceLoad> devices;
  AddHosts(devices, "a", 3, 2);  // a-h0: 0,1; a-h1: 2,3; a-h2: 4,5
  const std::vector<uint32_t> slice = {0, 2};
  Load(devices, slice);
  Load(devices, {4});
  devices[0].alive = devices[1].alive = false;  // a-h0 is lost
  // Free: 3 and 5 (idle; 3 wins on id), 4 (loaded); 1 is dead, 2 in the slice.
  auto next = policy_->Replace(0, slice, devices);
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(*next, 3u);
  Load(devices, {3});
  next = policy_->Replace(0, slice, devices);
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(*next, 5u);
}

TEST_F(PlacementTest, ReplacePrefersDeviceZeroOfAHostAmongEquals) {
  std::vector<DeviceLoad> devices;
  AddHosts(devices, "a", 3, 2);  // a-h0: 0,1; a-h1: 2,3; a-h2: 4,5
  devices[0].alive = devices[1].alive = false;
  auto next = policy_->Replace(0, {0, 3}, devices);
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(*next, 2u);
  next = policy_->Replace(0, {0, 2}, devices);
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(*next, 4u) << "device 0 of a-h2 before device 1 of a-h1";
}

TEST_F(PlacementTest, ReplaceStaysOnTheIslandAndKind) {
  std::vector<DeviceLoad> devices;
  AddHosts(devices, "a", 2, 1, "cpu");  // 0, 1
  AddHosts(devices, "b", 1, 2, "cpu");  // 2, 3: idle, but another island
  DeviceLoad gpu;
  gpu.device_id = 4;
  gpu.island = "a";
  gpu.host = "a-h9";
  gpu.kind = "gpu";
  devices.push_back(gpu);
  devices[0].alive = false;
  auto next = policy_->Replace(0, {0, 1}, devices);
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(next.status().message(),
            "island 'a' has no live cpu device outside the slice to take over from device 0");
  auto unknown = policy_->Replace(9, {9}, devices);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace atl::rm
