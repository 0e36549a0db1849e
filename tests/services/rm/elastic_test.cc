// The core of the RM's elasticity: services that stop heartbeating, slices remapped
// off a lost host onto live devices of their island (with the load they carry), slices that
// cannot be, and a host coming back.
#include "services/rm/elastic_core.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include "tests/status_matchers.h"

namespace atl::rm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Registers host `name` on `island` with `devices` devices of `kind`, as the RM does: the
// devices get the next cluster-wide ids.
void AddHost(RmState& state, const std::string& name, const std::string& island, int devices,
             const std::string& kind = "cpu") {
  RmState::Host& host = state.hosts[name];
  host.name = name;
  host.island = island;
  for (int i = 0; i < devices; ++i) {
    const auto id = static_cast<uint32_t>(state.devices.size());
    state.devices.push_back({id, name, static_cast<uint32_t>(i), {kind, 1 << 20}, 0});
    host.device_ids.push_back(id);
  }
}

// Maps a new slice onto `devices`, counting it on them; returns its id.
uint64_t AddSlice(RmState& state, const std::string& island, std::vector<uint32_t> devices) {
  const uint64_t id = state.next_slice_id++;
  for (uint32_t d : devices) state.devices[d].slices++;
  state.slices[id] = {id, 1, island, std::move(devices)};
  return id;
}

std::vector<uint32_t> SliceLoads(const RmState& state) {
  std::vector<uint32_t> loads;
  for (const auto& d : state.devices) loads.push_back(d.slices);
  return loads;
}

class ElasticCoreTest : public ::testing::Test {
 protected:
  // Island a: a0 (devices 0,1), a1 (2,3), a2 (4,5); island b: b0 (6,7).
  void SetUp() override {
    AddHost(state_, "a0", "a", 2);
    AddHost(state_, "a1", "a", 2);
    AddHost(state_, "a2", "a", 2);
    AddHost(state_, "b0", "b", 2);
  }
  // What the RM does first when a host's executor falls silent.
  void Lose(const std::string& host) { state_.hosts.at(host).alive = false; }

  RmState state_;
  std::unique_ptr<PlacementPolicy> policy_ = MakeSpreadEvenlyPolicy();
};

TEST_F(ElasticCoreTest, HostsSilentLongerThanTheLapseAreLost) {
  const Clock::time_point t0{};
  const auto lapse = 3 * 100ms;  // liveness 3, heartbeats every 100 ms
  state_.hosts.at("a0").last_heard = t0;
  state_.hosts.at("a1").last_heard = t0 + 200ms;
  state_.hosts.at("a2").last_heard = t0 + 500ms;
  state_.hosts.at("b0").last_heard = t0;
  Lose("b0");  // already lost: not lost again
  EXPECT_THAT(SilentHosts(state_, t0 + 300ms, lapse), ElementsAre());  // exactly the lapse
  EXPECT_THAT(SilentHosts(state_, t0 + 301ms, lapse), ElementsAre("a0"));
  EXPECT_THAT(SilentHosts(state_, t0 + 600ms, lapse), ElementsAre("a0", "a1"));
}

TEST_F(ElasticCoreTest, StoresAndSchedulersSilentLongerThanTheLapseAreLost) {
  const Clock::time_point t0{};
  const auto lapse = 3 * 100ms;
  for (auto& [name, host] : state_.hosts) host.store_last_heard = t0 + 1s;
  state_.hosts.at("a1").store_last_heard = t0;
  state_.hosts.at("b0").store_last_heard = t0;
  state_.hosts.at("b0").store_alive = false;  // already lost: not lost again
  state_.schedulers["a"] = {t0, true};
  state_.schedulers["b"] = {t0 + 500ms, true};
  EXPECT_THAT(SilentStores(state_, t0 + 300ms, lapse), ElementsAre());
  EXPECT_THAT(SilentStores(state_, t0 + 301ms, lapse), ElementsAre("a1"));
  EXPECT_THAT(SilentSchedulers(state_, t0 + 301ms, lapse), ElementsAre("a"));
  EXPECT_THAT(SilentSchedulers(state_, t0 + 801ms, lapse), ElementsAre("a", "b"));
  state_.schedulers["a"].alive = false;
  EXPECT_THAT(SilentSchedulers(state_, t0 + 801ms, lapse), ElementsAre("b"));
}

TEST_F(ElasticCoreTest, ADeviceWhoseStoreIsLostTakesNoSlices) {
  state_.hosts.at("a0").store_alive = false;
  for (const auto& load : Loads(state_)) {
    EXPECT_EQ(load.alive, load.host != "a0") << "device " << load.device_id;
  }
  auto placed = policy_->Place({2, "a", ""}, Loads(state_));
  ASSERT_THAT(placed, IsOk());
  EXPECT_THAT(*placed, ElementsAre(2, 4));  // device 0 of a1 and a2
}

TEST_F(ElasticCoreTest, ASliceLeavesTheLostHostForLiveDevicesOfItsIsland) {
  const uint64_t slice = AddSlice(state_, "a", {0, 2});  // a0 and a1
  Lose("a0");
  auto moved = RemapSliceOff(state_, slice, "a0", *policy_);
  ASSERT_THAT(moved, IsOk());
  EXPECT_TRUE(*moved);
  // Device 0 of the idle a2 (not b0's: another island; not a0's 1: dead).
  EXPECT_THAT(state_.slices.at(slice).device_ids, ElementsAre(4, 2));
  EXPECT_EQ(state_.slices.at(slice).mapping, 1u) << "runs lowered before differ from now";
  EXPECT_THAT(SliceLoads(state_), ElementsAre(0, 0, 1, 0, 1, 0, 0, 0));
}

// A drained host (about to leave, still alive) is left as a lost one is, and its other
// devices, idle as they are, take nothing over.
TEST_F(ElasticCoreTest, ASliceLeavesADrainedHostWhoseOtherDevicesTakeNothing) {
  const uint64_t slice = AddSlice(state_, "a", {0, 2});  // a0 and a1
  AddSlice(state_, "a", {4, 5});                         // a2 busier than a0's idle device 1
  state_.hosts.at("a0").drained = true;
  EXPECT_FALSE(Loads(state_)[1].alive);
  auto moved = RemapSliceOff(state_, slice, "a0", *policy_);
  ASSERT_THAT(moved, IsOk());
  EXPECT_TRUE(*moved);
  EXPECT_THAT(state_.slices.at(slice).device_ids, ElementsAre(3, 2));  // a1's other device
  EXPECT_THAT(SliceLoads(state_), ElementsAre(0, 0, 1, 1, 1, 1, 0, 0));
}

TEST_F(ElasticCoreTest, SlicesNotOnTheLostHostStayAsTheyAre) {
  const uint64_t slice = AddSlice(state_, "a", {2, 4});
  Lose("a0");
  auto moved = RemapSliceOff(state_, slice, "a0", *policy_);
  ASSERT_THAT(moved, IsOk());
  EXPECT_FALSE(*moved);
  EXPECT_THAT(state_.slices.at(slice).device_ids, ElementsAre(2, 4));
  EXPECT_EQ(state_.slices.at(slice).mapping, 0u);
  EXPECT_THAT(SliceLoads(state_), ElementsAre(0, 0, 1, 0, 1, 0, 0, 0));
}

TEST_F(ElasticCoreTest, EveryLostDeviceGetsItsOwnReplacement) {
  const uint64_t slice = AddSlice(state_, "a", {0, 1, 2});
  Lose("a0");
  auto moved = RemapSliceOff(state_, slice, "a0", *policy_);
  ASSERT_THAT(moved, IsOk());
  // 0 -> 4 (device 0 of the idle a2), then 1 -> 3 (tied with 5 on load and local index,
  // the lower id); 2 stays, and none is picked twice.
  EXPECT_THAT(state_.slices.at(slice).device_ids, ElementsAre(4, 3, 2));
  EXPECT_THAT(SliceLoads(state_), ElementsAre(0, 0, 1, 1, 1, 0, 0, 0));
}

TEST_F(ElasticCoreTest, RemapsSpreadOverTheLeastLoadedDevices) {
  const uint64_t first = AddSlice(state_, "a", {0, 2});
  const uint64_t second = AddSlice(state_, "a", {1, 3});
  Lose("a0");
  ASSERT_THAT(RemapSliceOff(state_, first, "a0", *policy_), IsOk());
  ASSERT_THAT(RemapSliceOff(state_, second, "a0", *policy_), IsOk());
  // The first took device 4; the second sees that load and takes 5.
  EXPECT_THAT(state_.slices.at(first).device_ids, ElementsAre(4, 2));
  EXPECT_THAT(state_.slices.at(second).device_ids, ElementsAre(5, 3));
  EXPECT_THAT(SliceLoads(state_), ElementsAre(0, 0, 1, 1, 1, 1, 0, 0));
}

TEST_F(ElasticCoreTest, ASliceWithNoReplacementKeepsItsDevicesAndLoads) {
  // Every live device of island a but one is in the slice already: one of the two lost
  // devices could move, the other cannot, so neither does.
  const uint64_t slice = AddSlice(state_, "a", {0, 1, 2, 3, 4});
  Lose("a0");
  const auto loads = SliceLoads(state_);
  auto moved = RemapSliceOff(state_, slice, "a0", *policy_);
  ASSERT_FALSE(moved.ok());
  EXPECT_EQ(moved.status().code(), Code::kFailedPrecondition);
  EXPECT_THAT(moved.status().message(), HasSubstr("take over from device 1"));
  EXPECT_THAT(state_.slices.at(slice).device_ids, ElementsAre(0, 1, 2, 3, 4));
  EXPECT_EQ(SliceLoads(state_), loads);
}

TEST_F(ElasticCoreTest, ALostIslandHasNowhereToGo) {
  const uint64_t slice = AddSlice(state_, "b", {6, 7});
  Lose("b0");
  auto moved = RemapSliceOff(state_, slice, "b0", *policy_);
  ASSERT_FALSE(moved.ok());
  EXPECT_THAT(moved.status().message(), HasSubstr("island 'b'"));
  EXPECT_THAT(state_.slices.at(slice).device_ids, ElementsAre(6, 7));
}

TEST_F(ElasticCoreTest, AHostComingBackTakesSlicesAgainWhereNoneMovedBack) {
  const uint64_t moved_away = AddSlice(state_, "a", {0, 2});
  const uint64_t stuck = AddSlice(state_, "b", {6, 7});
  Lose("a0");
  Lose("b0");
  ASSERT_THAT(RemapSliceOff(state_, moved_away, "a0", *policy_), IsOk());
  ASSERT_FALSE(RemapSliceOff(state_, stuck, "b0", *policy_).ok());
  for (const auto& load : Loads(state_)) {
    EXPECT_EQ(load.alive, load.host != "a0" && load.host != "b0") << "device " << load.device_id;
  }

  state_.hosts.at("a0").alive = true;  // its executor heartbeats again
  state_.hosts.at("b0").alive = true;
  for (const auto& load : Loads(state_)) EXPECT_TRUE(load.alive) << "device " << load.device_id;
  // The remapped slice stays where it went; the stuck one runs on its own devices again.
  EXPECT_THAT(state_.slices.at(moved_away).device_ids, ElementsAre(4, 2));
  EXPECT_THAT(state_.slices.at(stuck).device_ids, ElementsAre(6, 7));
  // a0's devices take slices again: device 0 of a host first, then the lowest id.
  auto placed = policy_->Place({2, "a", ""}, Loads(state_));
  ASSERT_THAT(placed, IsOk());
  EXPECT_THAT(*placed, ElementsAre(0, 1));
}

TEST_F(ElasticCoreTest, LoadsDescribeEveryDeviceInIdOrder) {
  AddSlice(state_, "a", {3});
  Lose("a1");
  const auto loads = Loads(state_);
  ASSERT_EQ(loads.size(), 8u);
  EXPECT_EQ(loads[3].device_id, 3u);
  EXPECT_EQ(loads[3].host, "a1");
  EXPECT_EQ(loads[3].island, "a");
  EXPECT_EQ(loads[3].local_index, 1u);
  EXPECT_EQ(loads[3].kind, "cpu");
  EXPECT_EQ(loads[3].slices, 1u);
  EXPECT_FALSE(loads[3].alive);
  EXPECT_EQ(loads[6].island, "b");
  EXPECT_TRUE(loads[6].alive);
}

}  // namespace
}  // namespace atl::rm
