// The dashboard's /metrics text (cli/cluster_metrics.h) from a ClusterView fed with
// hand-made events: the exposition format, the values and their labels; and the Grafana
// dashboard in docker/grafana/ against it (every metric a panel queries is written, and
// every metric written is charted).
#include "cli/cluster_metrics.h"

#include <fstream>
#include <regex>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/exposition_parser.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

using testing::Exposition;
using testing::ParseExposition;

constexpr int64_t kT0 = 1'700'000'000'000'000;  // some wall-clock microseconds

Event Ev(std::string topic, nlohmann::json fields, int64_t ts_us = kT0, std::string src = "test") {
  fields["ts_us"] = ts_us;
  fields["src"] = std::move(src);
  return Event{std::move(topic), std::move(fields)};
}

// Islands "island0" (host h0: devices 0, 1) and "island1" (host h1: device 2), 3 clients.
proto::ClusterStatus Topology() {
  proto::ClusterStatus s;
  proto::IslandStatus island0{"island0", "tcp://s0", {}, true};
  island0.hosts.push_back(
      {"h0", true, "tcp://c0", "tcp://o0", {{0, "cpu", 1 << 20, 0}, {1, "cpu", 1 << 20, 0}}, true});
  proto::IslandStatus island1{"island1", "tcp://s1", {}, false};
  island1.hosts.push_back({"h1", true, "tcp://c1", "tcp://o1", {{2, "cpu", 1 << 20, 0}}, true});
  s.islands = {island0, island1};
  s.clients = 3;
  return s;
}

// A view of every kind of event the metrics read: device, store, data-plane, scheduler and
// message statistics, a host lost, and a client whose 1-gang program on devices 0 and 1
// runs for 250 ms from its scheduling to its last shard's end.
ClusterView BusyView() {
  ClusterView view(ViewOptions{.busy_window_us = 2'000'000});
  view.ApplyStatus(Topology());
  for (int64_t i = 0; i <= 2; ++i) {
    // Device 1 busy half the time: 500 ms more busy time every second.
    view.Apply(Ev("device.stats",
                  {{"device", 1},
                   {"host", "h0"},
                   {"island", "island0"},
                   {"queued", 4},
                   {"busy_us", 1'000'000 + i * 500'000}},
                  kT0 + i * 1'000'000));
  }
  view.Apply(
      Ev("store.stats",
         {{"host", "h0"}, {"objects", 7}, {"bytes_in_use", 4096}, {"arena_bytes", 1 << 27}}));
  view.Apply(Ev("dataplane.stats", {{"host", "h0"},
                                    {"tuples_out", 10},
                                    {"batches_out", 2},
                                    {"bytes_out", 640},
                                    {"tuples_in", 9},
                                    {"batches_in", 2},
                                    {"bytes_in", 576},
                                    {"last_in_us", kT0},
                                    {"batches_held", 1}}));
  view.Apply(Ev("scheduler.stats",
                {{"island", "island0"}, {"queued", 5}, {"in_flight", 2}, {"dispatches_held", 3}}));
  view.Apply(Ev("net.stats", {{"Dispatch.msgs", 12}, {"Dispatch.bytes", 3000}},  //
                kT0, "scheduler/island0"));
  view.Apply(Ev("net.stats",
                {{"GangDone.msgs", 24},
                 {"GangDone.bytes", 2400},
                 {"Heartbeat.msgs", 3},
                 {"Heartbeat.bytes", 90}},
                kT0, "executor/h0"));
  view.Apply(Ev("net.stats", {{"ClusterStatus.msgs", 1}, {"ClusterStatus.bytes", 500}}, kT0, "rm"));
  view.Apply(Ev("host.lost", {{"host", "h1"}, {"island", "island1"}, {"reason", "test"}}));
  view.Apply(Ev("client.connected", {{"client", 5}, {"name", "metrics-test"}}));
  view.Apply(Ev("slice.created",
                {{"slice", 1}, {"client", 5}, {"island", "island0"}, {"devices", "0,1"}}));
  view.Apply(Ev("program.scheduled",
                {{"run", 9}, {"client", 5}, {"island", "island0"}, {"gangs", 1}}, kT0));
  for (int device : {0, 1}) {
    view.Apply(Ev("gang.done", {{"run", 9},
                                {"gang", 1},
                                {"shard", device},
                                {"device", device},
                                {"host", "h0"},
                                {"client", 5},
                                {"start_us", kT0 + 50'000},
                                {"end_us", kT0 + 250'000}}));
  }
  return view;
}

Exposition Parsed(const ClusterView& view, bool rm_answering = true) {
  auto text = ClusterMetricsText(view, rm_answering);
  EXPECT_THAT(text, IsOk());
  if (!text.ok()) return {};
  auto parsed = ParseExposition(*text);
  EXPECT_THAT(parsed, IsOk()) << parsed.status().ToString() << "\n" << *text;
  return parsed.ok() ? *parsed : Exposition{};
}

// The one sample of `name` with exactly these labels (a failure and NaN when not one).
double Value(const Exposition& e, const std::string& name,
             const std::map<std::string, std::string>& labels = {}) {
  auto found = e.Find(name, labels);
  for (auto it = found.begin(); it != found.end();) {
    it = (*it)->labels.size() == labels.size() ? it + 1 : found.erase(it);
  }
  EXPECT_EQ(found.size(), 1u) << name;
  return found.size() == 1 ? found[0]->value : NAN;
}

TEST(ClusterMetricsTest, HostsSchedulersAndTheRm) {
  const Exposition m = Parsed(BusyView(), /*rm_answering=*/false);
  EXPECT_EQ(Value(m, "atoll_rm_up"), 0);
  EXPECT_EQ(Value(m, "atoll_host_up", {{"island", "island0"}, {"host", "h0"}}), 1);
  EXPECT_EQ(Value(m, "atoll_host_up", {{"island", "island1"}, {"host", "h1"}}), 0);
  EXPECT_EQ(Value(m, "atoll_store_up", {{"island", "island1"}, {"host", "h1"}}), 1);
  EXPECT_EQ(Value(m, "atoll_scheduler_up", {{"island", "island0"}}), 1);
  EXPECT_EQ(Value(m, "atoll_scheduler_up", {{"island", "island1"}}), 0);
  EXPECT_EQ(Value(m, "atoll_scheduler_queued_gangs", {{"island", "island0"}}), 5);
  EXPECT_EQ(Value(m, "atoll_scheduler_gangs_in_flight", {{"island", "island0"}}), 2);
  EXPECT_EQ(Value(m, "atoll_scheduler_held_dispatches", {{"island", "island0"}}), 3);
  // No scheduler.stats from island1 yet: no sample rather than a made-up 0.
  EXPECT_TRUE(m.Find("atoll_scheduler_queued_gangs", {{"island", "island1"}}).empty());
  EXPECT_EQ(Value(m, "atoll_clients"), 3);
  EXPECT_EQ(m.types.at("atoll_host_up"), "gauge");
  EXPECT_EQ(Value(Parsed(BusyView()), "atoll_rm_up"), 1);
}

// Each service's event loop's longest stall, as the RM's status reports it (the RM's own, the
// others' from their heartbeats).
TEST(ClusterMetricsTest, EveryServicesLongestLoopStall) {
  proto::ClusterStatus status = Topology();
  status.rm_stall_us = 250'000;
  status.islands[0].scheduler_stall_us = 1'500'000;
  status.islands[0].hosts[0].executor_stall_us = 2'000;
  status.islands[0].hosts[0].store_stall_us = 40'000;
  ClusterView view;
  view.ApplyStatus(status);
  const Exposition m = Parsed(view);
  const char* stall = "atoll_loop_longest_stall_seconds";
  EXPECT_EQ(m.types.at(stall), "gauge");
  EXPECT_DOUBLE_EQ(Value(m, stall, {{"service", "rm"}}), 0.25);
  EXPECT_DOUBLE_EQ(Value(m, stall, {{"service", "scheduler"}, {"island", "island0"}}), 1.5);
  EXPECT_DOUBLE_EQ(Value(m, stall, {{"service", "scheduler"}, {"island", "island1"}}), 0);
  EXPECT_DOUBLE_EQ(
      Value(m, stall, {{"service", "executor"}, {"island", "island0"}, {"host", "h0"}}), 0.002);
  EXPECT_DOUBLE_EQ(
      Value(m, stall, {{"service", "objectstore"}, {"island", "island0"}, {"host", "h0"}}), 0.04);
}

TEST(ClusterMetricsTest, DevicesBusyAndQueued) {
  const Exposition m = Parsed(BusyView());
  const std::map<std::string, std::string> d1 = {
      {"island", "island0"}, {"host", "h0"}, {"device", "1"}};
  EXPECT_DOUBLE_EQ(Value(m, "atoll_device_busy_ratio", d1), 0.5);
  EXPECT_DOUBLE_EQ(Value(m, "atoll_device_busy_seconds_total", d1), 2.0);
  EXPECT_EQ(Value(m, "atoll_device_queued_gangs", d1), 4);
  EXPECT_EQ(Value(m, "atoll_device_gangs_done_total", d1), 1);
  EXPECT_EQ(m.types.at("atoll_device_busy_seconds_total"), "counter");
  // Device 0 sent no device.stats: no busy figure, but its finished gang counts.
  EXPECT_TRUE(m.Find("atoll_device_busy_ratio", {{"device", "0"}}).empty());
  EXPECT_EQ(Value(m, "atoll_device_gangs_done_total",
                  {{"island", "island0"}, {"host", "h0"}, {"device", "0"}}),
            1);
}

TEST(ClusterMetricsTest, ObjectStoresAndTheDataPlane) {
  const Exposition m = Parsed(BusyView());
  const std::map<std::string, std::string> h0 = {{"island", "island0"}, {"host", "h0"}};
  EXPECT_EQ(Value(m, "atoll_store_objects", h0), 7);
  EXPECT_EQ(Value(m, "atoll_store_used_bytes", h0), 4096);
  EXPECT_EQ(Value(m, "atoll_store_capacity_bytes", h0), 1 << 27);
  EXPECT_TRUE(m.Find("atoll_store_used_bytes", {{"host", "h1"}}).empty());
  EXPECT_EQ(Value(m, "atoll_dataplane_tuples_total",
                  {{"island", "island0"}, {"host", "h0"}, {"direction", "out"}}),
            10);
  EXPECT_EQ(Value(m, "atoll_dataplane_bytes_total",
                  {{"island", "island0"}, {"host", "h0"}, {"direction", "in"}}),
            576);
  EXPECT_EQ(Value(m, "atoll_dataplane_held_batches", h0), 1);
}

TEST(ClusterMetricsTest, MessagesPerServiceAndKind) {
  const Exposition m = Parsed(BusyView());
  EXPECT_EQ(
      Value(m, "atoll_sent_messages_total",
            {{"service", "scheduler"}, {"island", "island0"}, {"host", ""}, {"kind", "Dispatch"}}),
      12);
  EXPECT_EQ(
      Value(m, "atoll_sent_bytes_total",
            {{"service", "executor"}, {"island", "island0"}, {"host", "h0"}, {"kind", "GangDone"}}),
      2400);
  EXPECT_EQ(Value(m, "atoll_sent_messages_total",
                  {{"service", "rm"}, {"island", ""}, {"host", ""}, {"kind", "ClusterStatus"}}),
            1);
  EXPECT_EQ(m.Sum("atoll_sent_messages_total"), 12 + 24 + 3 + 1);
  EXPECT_EQ(m.Sum("atoll_sent_bytes_total", {{"service", "executor"}}), 2400 + 90);
}

TEST(ClusterMetricsTest, RunDurationsAndStates) {
  const ClusterView view = BusyView();
  const Exposition m = Parsed(view);
  EXPECT_EQ(Value(m, "atoll_runs_finished_total", {{"state", "done"}}), 1);
  EXPECT_EQ(Value(m, "atoll_runs_finished_total", {{"state", "failed"}}), 0);
  EXPECT_EQ(Value(m, "atoll_runs", {{"state", "running"}}), 0);
  EXPECT_EQ(m.types.at("atoll_run_duration_seconds"), "histogram");
  EXPECT_EQ(Value(m, "atoll_run_duration_seconds_count"), 1);
  EXPECT_DOUBLE_EQ(Value(m, "atoll_run_duration_seconds_sum"), 0.25);
  EXPECT_EQ(Value(m, "atoll_run_duration_seconds_bucket", {{"le", "0.1"}}), 0);
  EXPECT_EQ(Value(m, "atoll_run_duration_seconds_bucket", {{"le", "0.25"}}), 1);
  EXPECT_EQ(Value(m, "atoll_run_duration_seconds_bucket", {{"le", "+Inf"}}), 1);
}

TEST(ClusterMetricsTest, ARunIsCountedOnceThoughItsStateChangesLater) {
  ClusterView view = BusyView();
  // Another island announces gangs of the same run: it is running again, then done again.
  view.Apply(
      Ev("program.scheduled", {{"run", 9}, {"client", 5}, {"island", "island1"}, {"gangs", 1}}));
  EXPECT_EQ(view.programs().at(9).state, "running");
  view.Apply(
      Ev("slice.created", {{"slice", 2}, {"client", 5}, {"island", "island1"}, {"devices", "2"}}));
  view.Apply(Ev("gang.done", {{"run", 9},
                              {"gang", 1},
                              {"device", 2},
                              {"host", "h1"},
                              {"client", 5},
                              {"start_us", kT0},
                              {"end_us", kT0 + 900'000}}));
  EXPECT_EQ(view.programs().at(9).state, "done");
  const Exposition m = Parsed(view);
  EXPECT_EQ(Value(m, "atoll_runs_finished_total", {{"state", "done"}}), 1);
  EXPECT_EQ(Value(m, "atoll_run_duration_seconds_count"), 1);
}

TEST(ClusterMetricsTest, AnEmptyViewIsValidToo) {
  const Exposition m = Parsed(ClusterView());
  EXPECT_EQ(Value(m, "atoll_rm_up"), 1);
  EXPECT_EQ(Value(m, "atoll_run_duration_seconds_count"), 0);
  EXPECT_TRUE(m.Find("atoll_host_up").empty());
  EXPECT_EQ(m.types.size(), 24u);  // every family is declared, samples or not
}

// The family a sample belongs to: a histogram's _bucket, _sum, _count belong to it.
std::string FamilyOf(const Exposition& e, const std::string& name) {
  for (const std::string suffix : {"_bucket", "_sum", "_count"}) {
    if (name.size() <= suffix.size() || name.substr(name.size() - suffix.size()) != suffix) {
      continue;
    }
    const std::string base = name.substr(0, name.size() - suffix.size());
    if (auto it = e.types.find(base); it != e.types.end() && it->second == "histogram") {
      return base;
    }
  }
  return name;
}

// Every string under a key "expr" (a panel's query) or "query" (a template variable's).
void CollectQueries(const nlohmann::json& j, std::vector<std::string>* out) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      if ((key == "expr" || key == "query") && value.is_string()) out->push_back(value);
      CollectQueries(value, out);
    }
  } else if (j.is_array()) {
    for (const auto& value : j) CollectQueries(value, out);
  }
}

TEST(GrafanaDashboardTest, ChartsExactlyTheMetricsTheDashboardServes) {
  std::ifstream in(ATOLL_SOURCE_DIR "/docker/grafana/atoll.json");
  ASSERT_TRUE(in) << "cannot read docker/grafana/atoll.json";
  const auto dashboard = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(dashboard.is_discarded()) << "docker/grafana/atoll.json is not JSON";
  ASSERT_TRUE(dashboard["panels"].is_array());
  EXPECT_EQ(dashboard["uid"], "atoll");

  const Exposition m = Parsed(BusyView());
  std::set<std::string> written;
  for (const auto& s : m.samples) written.insert(s.name);

  std::vector<std::string> queries;
  CollectQueries(dashboard, &queries);
  ASSERT_GE(queries.size(), 10u);
  const std::regex metric("atoll_[a-z0-9_]+");
  std::set<std::string> charted;
  for (const std::string& query : queries) {
    for (auto it = std::sregex_iterator(query.begin(), query.end(), metric);
         it != std::sregex_iterator(); ++it) {
      const std::string name = it->str();
      EXPECT_TRUE(written.count(name))
          << "the dashboard queries " << name << ", which /metrics does not serve: " << query;
      charted.insert(FamilyOf(m, name));
    }
  }
  for (const auto& [family, type] : m.types) {
    EXPECT_TRUE(charted.count(family)) << family << " is on no panel of the Grafana dashboard";
  }
  // Every panel that queries says where from: the dashboard's data source variable.
  for (const auto& panel : dashboard["panels"]) {
    if (!panel.contains("targets")) continue;
    EXPECT_EQ(panel["datasource"]["uid"], "${datasource}") << panel["title"];
  }
}

}  // namespace
}  // namespace atl
