// ClusterView (what `atoll top` and `atoll dashboard` show) fed with hand-made events, and
// the text screen of `atoll top` rendered from it.
#include "cli/cluster_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/top_view.h"

namespace atl {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kT0 = 1'700'000'000'000'000;  // some wall-clock microseconds

Event Ev(std::string topic, nlohmann::json fields, int64_t ts_us = kT0) {
  fields["ts_us"] = ts_us;
  fields["src"] = "test";
  return Event{std::move(topic), std::move(fields)};
}

// One island "island0" with host "h0" (devices 0, 1) and "h1" (devices 2, 3), as the RM
// would describe it.
proto::ClusterStatus TwoHosts() {
  proto::ClusterStatus s;
  proto::IslandStatus island{"island0", "tcp://10.0.0.1:4000", {}, true};
  island.hosts.push_back({"h0",
                          true,
                          "tcp://c0",
                          "tcp://s0",
                          {{0, "cpu", 64 << 20, 0}, {1, "cpu", 64 << 20, 0}},
                          true});
  island.hosts.push_back({"h1",
                          true,
                          "tcp://c1",
                          "tcp://s1",
                          {{2, "cpu", 64 << 20, 0}, {3, "cpu", 64 << 20, 0}},
                          true});
  s.islands.push_back(island);
  return s;
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

TEST(ClusterViewTest, StatusGivesTheTopology) {
  ClusterView view;
  view.ApplyStatus(TwoHosts());
  ASSERT_EQ(view.islands().size(), 1u);
  EXPECT_EQ(view.islands()[0].scheduler_endpoint, "tcp://10.0.0.1:4000");
  EXPECT_EQ(view.islands()[0].hosts, (std::vector<std::string>{"h0", "h1"}));
  ASSERT_EQ(view.devices().size(), 4u);
  EXPECT_EQ(view.devices().at(2).host, "h1");
  EXPECT_EQ(view.hosts().at("h1").devices, (std::vector<uint32_t>{2, 3}));
  // Applying it again changes nothing.
  view.ApplyStatus(TwoHosts());
  EXPECT_EQ(view.hosts().at("h0").devices.size(), 2u);
}

TEST(ClusterViewTest, RegisteredDevicesJoinTheirHostAndIsland) {
  ClusterView view;
  view.Apply(Ev(
      "device.registered",
      {{"device", 7}, {"host", "hx"}, {"island", "isl"}, {"kind", "cpu"}, {"memory_bytes", 1024}}));
  ASSERT_EQ(view.islands().size(), 1u);
  EXPECT_EQ(view.islands()[0].name, "isl");
  EXPECT_EQ(view.hosts().at("hx").devices, (std::vector<uint32_t>{7}));
  EXPECT_EQ(view.devices().at(7).memory_bytes, 1024u);
}

TEST(ClusterViewTest, BusyPercentIsTheGrowthOfBusyTimeOverTheWindow) {
  ClusterView view(ViewOptions{.busy_window_us = 2'000'000});
  view.ApplyStatus(TwoHosts());
  auto stats = [&](int64_t ts, int64_t busy, uint64_t queued) {
    view.Apply(Ev("device.stats",
                  {{"device", 1},
                   {"host", "h0"},
                   {"island", "island0"},
                   {"queued", queued},
                   {"busy_us", busy}},
                  ts));
  };
  stats(kT0, 10'000'000, 0);
  EXPECT_TRUE(view.devices().at(1).has_stats);
  EXPECT_EQ(view.devices().at(1).busy_pct, 0);  // one report says nothing yet
  stats(kT0 + 1'000'000, 10'500'000, 3);        // 0.5 s busy in 1 s
  EXPECT_DOUBLE_EQ(view.devices().at(1).busy_pct, 50.0);
  EXPECT_EQ(view.devices().at(1).queued, 3u);
  stats(kT0 + 2'000'000, 11'500'000, 0);  // then fully busy: 1.5 s in 2 s
  EXPECT_DOUBLE_EQ(view.devices().at(1).busy_pct, 75.0);
  stats(kT0 + 3'000'000, 12'500'000, 0);  // the window slides: the first report drops out
  EXPECT_DOUBLE_EQ(view.devices().at(1).busy_pct, 100.0);
  stats(kT0 + 5'000'000, 12'500'000, 0);  // idle for 2 s
  EXPECT_DOUBLE_EQ(view.devices().at(1).busy_pct, 0.0);
  // An executor that restarts counts from zero again: no negative or absurd figure.
  stats(kT0 + 6'000'000, 100, 0);
  EXPECT_GE(view.devices().at(1).busy_pct, 0.0);
  stats(kT0 + 7'000'000, 250'100, 0);
  EXPECT_DOUBLE_EQ(view.devices().at(1).busy_pct, 25.0);
}

TEST(ClusterViewTest, LostHostsAreIdle) {
  ClusterView view;
  view.ApplyStatus(TwoHosts());
  view.Apply(Ev("device.stats", {{"device", 0}, {"busy_us", 0}}, kT0));
  view.Apply(Ev("device.stats", {{"device", 0}, {"busy_us", 900'000}}, kT0 + 1'000'000));
  EXPECT_GT(view.devices().at(0).busy_pct, 0);
  view.Apply(Ev("host.lost", {{"host", "h0"}, {"island", "island0"}}));
  EXPECT_FALSE(view.hosts().at("h0").alive);
  EXPECT_EQ(view.devices().at(0).busy_pct, 0);
  view.Apply(Ev("host.back", {{"host", "h0"}}));
  EXPECT_TRUE(view.hosts().at("h0").alive);
}

TEST(ClusterViewTest, LostSchedulersAndStoresAreShownUntilBack) {
  ClusterView view;
  view.ApplyStatus(TwoHosts());
  view.Apply(Ev("island.lost", {{"island", "island0"}, {"reason", "missed 3 heartbeats"}}));
  view.Apply(Ev("host.store_lost", {{"host", "h1"}, {"island", "island0"}}));
  EXPECT_FALSE(view.islands().front().scheduler_alive);
  EXPECT_FALSE(view.hosts().at("h1").store_alive);
  EXPECT_TRUE(view.hosts().at("h1").alive) << "its executor lives on";
  const auto json = view.ToJson(0);
  EXPECT_FALSE(json["islands"][0]["scheduler_alive"].get<bool>());
  view.Apply(Ev("island.back", {{"island", "island0"}}));
  view.Apply(Ev("host.store_back", {{"host", "h1"}}));
  EXPECT_TRUE(view.islands().front().scheduler_alive);
  EXPECT_TRUE(view.hosts().at("h1").store_alive);
}

TEST(ClusterViewTest, StoreStatsGiveMemoryInUse) {
  ClusterView view;
  view.ApplyStatus(TwoHosts());
  view.Apply(
      Ev("store.stats",
         {{"host", "h1"}, {"objects", 3}, {"bytes_in_use", 4096}, {"arena_bytes", 1 << 20}}));
  const auto& h = view.hosts().at("h1");
  EXPECT_TRUE(h.has_store_stats);
  EXPECT_EQ(h.objects, 3u);
  EXPECT_EQ(h.bytes_in_use, 4096u);
  EXPECT_EQ(h.arena_bytes, 1u << 20);
}

// A client with a 2-device slice runs a program of 2 gangs (2 shards each).
class ProgramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    view_.ApplyStatus(TwoHosts());
    view_.Apply(Ev("client.connected", {{"client", 5}, {"name", "submit:spin"}}));
    view_.Apply(Ev("slice.created",
                   {{"slice", 1}, {"client", 5}, {"island", "island0"}, {"devices", "1,2"}}));
  }
  void Scheduled(uint64_t run) {
    view_.Apply(Ev("program.scheduled", {{"run", run},
                                         {"client", 5},
                                         {"island", "island0"},
                                         {"first_gang", 10},
                                         {"gangs", 2},
                                         {"executors", 2}}));
  }
  void GangDone(uint64_t run, uint64_t gang, uint32_t device, int64_t start) {
    view_.Apply(Ev("gang.done", {{"run", run},
                                 {"node", gang - 10},
                                 {"gang", gang},
                                 {"shard", 0},
                                 {"device", device},
                                 {"host", device < 2 ? "h0" : "h1"},
                                 {"client", 5},
                                 {"start_us", start},
                                 {"end_us", start + 100}}));
  }
  const ClusterView::Program& P(uint64_t run) { return view_.programs().at(run); }
  ClusterView view_;
};

TEST_F(ProgramTest, StatesFollowTheGangs) {
  EXPECT_EQ(view_.devices().at(1).slices, 1u);
  Scheduled(77);
  EXPECT_EQ(P(77).state, "scheduled");
  EXPECT_EQ(P(77).gangs, 2u);
  GangDone(77, 10, 1, kT0);
  EXPECT_EQ(P(77).state, "running");
  GangDone(77, 10, 2, kT0 + 10);
  GangDone(77, 11, 1, kT0 + 200);
  EXPECT_EQ(P(77).state, "running");
  EXPECT_EQ(P(77).shards_expected(), 4u);
  GangDone(77, 11, 2, kT0 + 210);
  EXPECT_EQ(P(77).state, "done");
  EXPECT_EQ(view_.clients().at(5).done, 1u);
  EXPECT_EQ(P(77).shards_done, 4u);
  EXPECT_EQ(P(77).first_start_us, kT0);
  EXPECT_EQ(P(77).last_end_us, kT0 + 310);
  EXPECT_EQ(view_.devices().at(2).gangs_done, 2u);
  EXPECT_EQ(view_.devices().at(2).last_client, 5u);
  EXPECT_EQ(view_.ClientLabel(5), "submit:spin (5)");
  EXPECT_EQ(view_.ClientLabel(9), "client 9");
}

TEST_F(ProgramTest, GangsThatArriveBeforeTheScheduleCount) {
  GangDone(78, 10, 1, kT0);  // events of two publishers may arrive out of order
  GangDone(78, 10, 2, kT0);
  GangDone(78, 11, 1, kT0);
  GangDone(78, 11, 2, kT0);
  EXPECT_EQ(P(78).state, "running");  // not done before the scheduler said what there is
  Scheduled(78);
  EXPECT_EQ(P(78).state, "done");
}

TEST_F(ProgramTest, ErrorsFailAndVanishedClientsAbandon) {
  Scheduled(80);
  view_.Apply(Ev("error.gang", {{"run", 80}, {"node", 0}, {"error", "kernel exploded"}}));
  EXPECT_EQ(P(80).state, "failed");
  EXPECT_EQ(P(80).error, "kernel exploded");
  Scheduled(81);
  GangDone(81, 10, 1, kT0);
  view_.Apply(Ev("client.gone", {{"client", 5}, {"reason", "lapsed"}}));
  EXPECT_EQ(P(81).state, "abandoned");
  EXPECT_EQ(P(80).state, "failed");
  EXPECT_FALSE(view_.clients().at(5).connected);
}

TEST_F(ProgramTest, AGoodbyeFinishesThePrograms) {
  Scheduled(82);
  GangDone(82, 10, 1, kT0);
  view_.Apply(Ev("client.gone", {{"client", 5}, {"reason", "goodbye"}}));
  EXPECT_EQ(P(82).state, "done");
  view_.Apply(Ev("slice.released", {{"slice", 1}, {"client", 5}}));
  EXPECT_EQ(view_.devices().at(1).slices, 0u);
}

TEST_F(ProgramTest, JsonHasTheSpansAfterACursor) {
  Scheduled(90);
  GangDone(90, 10, 1, kT0);
  GangDone(90, 10, 2, kT0 + 5);
  auto all = view_.ToJson(0);
  ASSERT_EQ(all["spans"].size(), 2u);
  EXPECT_EQ(all["span_seq"], 2u);
  EXPECT_EQ(all["spans"][1]["device"], 2u);
  EXPECT_EQ(all["spans"][1]["client"], 5u);
  EXPECT_EQ(all["islands"][0]["hosts"][0]["devices"].size(), 2u);
  EXPECT_EQ(all["programs"][0]["run"], 90u);
  EXPECT_EQ(all["programs"][0]["client_label"], "submit:spin (5)");
  EXPECT_EQ(all["clients"][0]["running"], 1u);
  auto later = view_.ToJson(1);
  ASSERT_EQ(later["spans"].size(), 1u);
  EXPECT_EQ(later["spans"][0]["seq"], 2u);
  EXPECT_TRUE(view_.ToJson(2)["spans"].empty());
}

TEST(ClusterViewTest, KeepsBoundedHistory) {
  ClusterView view(ViewOptions{.max_spans = 10, .max_finished_programs = 3});
  for (uint64_t run = 1; run <= 20; ++run) {
    view.Apply(Ev("gang.done", {{"run", run},
                                {"gang", run},
                                {"device", 0},
                                {"client", 1},
                                {"start_us", kT0},
                                {"end_us", kT0 + 1}}));
    view.Apply(Ev("error.gang", {{"run", run}, {"error", "x"}}));
  }
  EXPECT_EQ(view.spans().size(), 10u);
  EXPECT_EQ(view.spans().front().seq, 11u);
  EXPECT_EQ(view.programs().size(), 3u);
  EXPECT_EQ(view.clients().at(1).failed, 20u);  // counts outlive the programs
  EXPECT_EQ(view.ToJson(0)["clients"][0]["failed"], 20u);
}

TEST(ClusterViewTest, IgnoresMalformedEvents) {
  ClusterView view;
  view.ApplyStatus(TwoHosts());
  view.Apply(Ev("device.stats", {{"device", "zero"}, {"busy_us", "lots"}}));
  view.Apply(Ev("program.scheduled", {{"run", -4}, {"gangs", "many"}}));
  view.Apply(Ev("program.scheduled", {{"run", 3}, {"first_gang", 0}, {"gangs", 1ull << 60}}));
  view.Apply(Ev("slice.created", {{"slice", 9}, {"devices", "1,x,2"}}));
  view.Apply(Ev("no.such.topic", {{"x", 1}}));
  view.Apply(Event{"gang.done", nlohmann::json::array({1, 2})});
  EXPECT_EQ(view.devices().size(), 4u);  // device "zero" reads as the known device 0
  EXPECT_EQ(view.programs().at(3).state, "scheduled");
}

TEST(TopViewTest, ShowsDevicesMemoryClientsAndPrograms) {
  ClusterView view;
  view.ApplyStatus(TwoHosts());
  view.Apply(Ev("client.connected", {{"client", 5}, {"name", "submit:spin"}}));
  view.Apply(Ev("slice.created", {{"slice", 1}, {"client", 5}, {"devices", "0,1"}}));
  view.Apply(Ev("device.stats", {{"device", 0}, {"busy_us", 0}, {"queued", 0}}, kT0));
  view.Apply(
      Ev("device.stats", {{"device", 0}, {"busy_us", 400'000}, {"queued", 2}}, kT0 + 1'000'000));
  view.Apply(
      Ev("store.stats",
         {{"host", "h0"}, {"objects", 3}, {"bytes_in_use", 3 << 20}, {"arena_bytes", 32 << 20}}));
  view.Apply(Ev("program.scheduled", {{"run", 21474836481},
                                      {"client", 5},
                                      {"island", "island0"},
                                      {"first_gang", 0},
                                      {"gangs", 1}}));
  view.Apply(Ev("gang.done", {{"run", 21474836481},
                              {"gang", 0},
                              {"device", 0},
                              {"client", 5},
                              {"start_us", kT0},
                              {"end_us", kT0 + 10}}));
  TopRenderOptions options;
  options.rm_endpoint = "tcp://rm:5550";
  options.clock = "12:00:00";
  options.width = 0;
  const std::string screen = Joined(RenderTop(view, options));
  EXPECT_THAT(screen, HasSubstr("rm tcp://rm:5550  1 islands  2 hosts (2 alive)  4 devices"));
  EXPECT_THAT(screen, HasSubstr("scheduler tcp://10.0.0.1:4000"));
  EXPECT_THAT(screen, ::testing::ContainsRegex("device 0 +cpu +\\[########............\\]  40%"));
  EXPECT_THAT(screen, ::testing::ContainsRegex("device 1 +cpu +\\(no stats\\)"));
  EXPECT_THAT(screen, HasSubstr("3 MiB / 32 MiB, 3 objects"));
  EXPECT_THAT(screen, ::testing::ContainsRegex("submit:spin \\(5\\) +0 +1 +0 +0"));
  EXPECT_THAT(screen, ::testing::ContainsRegex(
                          "21474836481 +submit:spin \\(5\\) +running +island0 +1/2 shards"));

  options.width = 30;
  options.height = 12;
  auto narrow = RenderTop(view, options);
  EXPECT_LE(narrow.size(), 12u);
  for (const auto& line : narrow) EXPECT_LE(line.size(), 30u);
}

TEST(TopViewTest, FormatsBytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(128ull << 20), "128 MiB");
  EXPECT_EQ(FormatBytes((3ull << 20) + (1 << 19)), "3.5 MiB");
  EXPECT_EQ(FormatBytes(3ull << 30), "3072 MiB");
}

}  // namespace
}  // namespace atl
