// `atoll dashboard`'s /metrics against a real cluster (config/test.toml: 2 islands x 2
// hosts): while programs run, a scrape must parse as Prometheus's text format line by line
// and show the run: Dispatch messages sent, a run duration observed, every object store's
// memory, every configured host alive.
#include <signal.h>

#include <regex>

#include <httplib.h>

#include "tests/cli/exposition_parser.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/figure2_program.h"
#include "tests/launcher/subprocess.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// What a scrape must show once the dashboard has seen a whole run; empty when it does.
std::string Missing(const Exposition& m, const ClusterConfig& config) {
  std::string missing;
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) missing += what + "; ";
  };
  need(m.Sum("atoll_rm_up") == 1, "the RM up");
  need(m.Sum("atoll_sent_messages_total", {{"service", "scheduler"}, {"kind", "Dispatch"}}) > 0,
       "Dispatch messages from the schedulers");
  need(m.Sum("atoll_sent_bytes_total", {{"kind", "Dispatch"}}) > 0, "Dispatch bytes");
  need(m.Sum("atoll_run_duration_seconds_count") >= 1, "a run duration");
  need(m.Sum("atoll_run_duration_seconds_sum") > 0, "a positive run duration");
  need(m.Sum("atoll_runs_finished_total", {{"state", "done"}}) >= 1, "a run done");
  need(m.Sum("atoll_device_busy_seconds_total") > 0, "device busy time");
  need(m.Sum("atoll_clients") >= 1, "a client");
  for (const IslandConfig& island : config.islands) {
    need(m.Sum("atoll_scheduler_up", {{"island", island.name}}) == 1, island.name + "'s scheduler");
    need(!m.Find("atoll_scheduler_queued_gangs", {{"island", island.name}}).empty(),
         island.name + "'s scheduler queue");
    for (const HostConfig& host : island.hosts) {
      const std::map<std::string, std::string> labels = {{"island", island.name},
                                                         {"host", host.name}};
      need(m.Sum("atoll_host_up", labels) == 1, host.name + " up");
      need(m.Sum("atoll_store_up", labels) == 1, host.name + "'s store up");
      need(m.Sum("atoll_store_capacity_bytes", labels) == static_cast<double>(host.arena_bytes),
           host.name + "'s store capacity");
      need(m.Find("atoll_store_used_bytes", labels).size() == 1, host.name + "'s store memory");
      need(m.Find("atoll_device_busy_ratio", labels).size() == host.devices,
           host.name + "'s devices' busy fractions");
    }
  }
  return missing;
}

using MetricsE2eTest = ClusterTest;

TEST_F(MetricsE2eTest, DashboardServesTheClustersMetricsInPrometheusFormat) {
  Subprocess dashboard(AtollCommand({"dashboard", "--listen", "127.0.0.1:0"}));
  // "atoll dashboard: serving http://127.0.0.1:PORT/ for the cluster at ..."
  const std::regex serving(R"(serving http://127\.0\.0\.1:(\d+)/)");
  int port = 0;
  const auto started_by = Clock::now() + 20s;
  while (port == 0 && Clock::now() < started_by) {
    ASSERT_FALSE(dashboard.Poll(100ms)) << "the dashboard ended: " << dashboard.Wait(1s).Describe();
    std::smatch match;
    if (std::regex_search(dashboard.out(), match, serving)) port = std::stoi(match[1]);
  }
  ASSERT_NE(port, 0) << "the dashboard did not say where it serves: " << dashboard.out();
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(5, 0);

  auto client = Connect("metrics-e2e");
  ASSERT_NE(client, nullptr);
  auto program = TraceFigure2(*client, {2});
  ASSERT_THAT(program, IsOk());

  // The dashboard subscribes a moment after it starts: run the program until a scrape
  // shows a whole run (bounded), checking every scrape's format on the way.
  std::string missing = "no scrape yet";
  std::string text;
  int scrapes = 0;
  const auto deadline = Clock::now() + 60s;
  while (!missing.empty() && Clock::now() < deadline) {
    auto run = client->Submit(*program, {Tensor::F32({2}, {1, 2})});
    ASSERT_THAT(run, IsOk());
    auto outputs = run->Wait(20s);
    ASSERT_THAT(outputs, IsOk());

    auto res = http.Get("/metrics");
    ASSERT_TRUE(res) << "GET /metrics: " << httplib::to_string(res.error());
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
    text = res->body;
    ++scrapes;
    auto parsed = ParseExposition(text);
    ASSERT_THAT(parsed, IsOk()) << parsed.status().ToString() << "\n" << text;
    missing = Missing(*parsed, cluster_->config());
  }
  EXPECT_EQ(missing, "") << "after " << scrapes << " scrapes, /metrics lacks: " << missing << "\n"
                         << text;
  // Every metric name is atoll's, with its HELP and TYPE.
  auto parsed = ParseExposition(text);
  ASSERT_THAT(parsed, IsOk());
  EXPECT_EQ(parsed->types.size(), parsed->helps.size());
  for (const auto& sample : parsed->samples) {
    EXPECT_EQ(sample.name.rfind("atoll_", 0), 0u) << sample.name;
  }

  kill(dashboard.pid(), SIGTERM);
  CommandResult stopped = dashboard.Wait(10s);
  EXPECT_EQ(stopped.exit_code, 0) << stopped.Describe();
}

}  // namespace
}  // namespace atl::testing
