#include "cli/cluster_metrics.h"

#include <map>
#include <string>
#include <utility>

#include "cli/prometheus_text.h"

namespace atl {

namespace {

using Host = ClusterView::Host;
using Device = ClusterView::Device;

double Flag(bool b) { return b ? 1 : 0; }

MetricLabels HostLabels(const Host& h) { return {{"island", h.island}, {"host", h.name}}; }

MetricLabels DeviceLabels(const Device& d) {
  return {{"island", d.island}, {"host", d.host}, {"device", std::to_string(d.id)}};
}

// An island's figure from its scheduler's last scheduler.stats.
struct IslandFigure {
  const char* name;
  const char* help;
  uint64_t ClusterView::Island::*field;
};
constexpr IslandFigure kSchedulerFigures[] = {
    {"atoll_scheduler_queued_gangs", "Gangs waiting in the island's scheduler to be dispatched.",
     &ClusterView::Island::queued_gangs},
    {"atoll_scheduler_gangs_in_flight",
     "Gangs the island's scheduler dispatched that have not finished.",
     &ClusterView::Island::gangs_in_flight},
    {"atoll_scheduler_held_dispatches",
     "Messages the island's scheduler holds for executors whose queue is full.",
     &ClusterView::Island::dispatches_held}};

// A host's figure from its object store's last store.stats.
struct HostFigure {
  const char* name;
  const char* help;
  uint64_t Host::*field;
};
constexpr HostFigure kStoreFigures[] = {
    {"atoll_store_objects", "Objects the host's object store holds.", &Host::objects},
    {"atoll_store_used_bytes", "Bytes of the object store's arena in use, alignment included.",
     &Host::bytes_in_use},
    {"atoll_store_capacity_bytes", "Bytes of the object store's arena.", &Host::arena_bytes}};

// A host's data-plane counter from its executor's last dataplane.stats, in both directions.
struct DataplaneFigure {
  const char* name;
  const char* help;
  uint64_t Host::*out;
  uint64_t Host::*in;
};
constexpr DataplaneFigure kDataplaneFigures[] = {
    {"atoll_dataplane_tuples_total",
     "Tuples the host's executor sent (direction out) and received (in) on the data plane.",
     &Host::tuples_out, &Host::tuples_in},
    {"atoll_dataplane_bytes_total",
     "Bytes of the tuples the host's executor sent (direction out) and received (in).",
     &Host::bytes_out, &Host::bytes_in}};

// A service's counter of the messages it sent, per kind, from its last net.stats.
struct SentFigure {
  const char* name;
  const char* help;
  uint64_t ClusterView::SentCount::*field;
};
constexpr SentFigure kSentFigures[] = {
    {"atoll_sent_messages_total",
     "Control messages the service sent, by message kind, since it started.",
     &ClusterView::SentCount::messages},
    {"atoll_sent_bytes_total",
     "Bytes of the control messages the service sent (header and data frames), by kind.",
     &ClusterView::SentCount::bytes}};

void WriteIslands(const ClusterView& view, PrometheusText& out) {
  out.Family("atoll_scheduler_up", MetricType::kGauge,
             "1 while the island's scheduler is registered and heard from, else 0.");
  for (const auto& island : view.islands()) {
    out.Sample({{"island", island.name}}, Flag(island.scheduler_alive));
  }
  for (const IslandFigure& figure : kSchedulerFigures) {
    out.Family(figure.name, MetricType::kGauge, figure.help);
    for (const auto& island : view.islands()) {
      if (island.has_scheduler_stats) {
        out.Sample({{"island", island.name}}, static_cast<double>(island.*figure.field));
      }
    }
  }
}

// Every service's event loop's longest stall: the RM's, each scheduler's, executor's, store's.
void WriteStalls(const ClusterView& view, PrometheusText& out) {
  out.Family("atoll_loop_longest_stall_seconds", MetricType::kGauge,
             "The longest the service's event loop went without reading its sockets (one turn "
             "of handlers), since the service started.");
  auto seconds = [](uint64_t us) { return static_cast<double>(us) / 1e6; };
  out.Sample({{"service", "rm"}}, seconds(view.rm_stall_us()));
  for (const auto& island : view.islands()) {
    out.Sample({{"service", "scheduler"}, {"island", island.name}},
               seconds(island.scheduler_stall_us));
  }
  for (const auto& [name, h] : view.hosts()) {
    MetricLabels executor = HostLabels(h);
    executor.insert(executor.begin(), {"service", "executor"});
    out.Sample(executor, seconds(h.executor_stall_us));
    MetricLabels store = HostLabels(h);
    store.insert(store.begin(), {"service", "objectstore"});
    out.Sample(store, seconds(h.store_stall_us));
  }
}

void WriteHosts(const ClusterView& view, PrometheusText& out) {
  out.Family("atoll_host_up", MetricType::kGauge, "1 while the host's executor is alive, else 0.");
  for (const auto& [name, h] : view.hosts()) out.Sample(HostLabels(h), Flag(h.alive));
  out.Family("atoll_store_up", MetricType::kGauge,
             "1 while the host's object store is alive, else 0.");
  for (const auto& [name, h] : view.hosts()) out.Sample(HostLabels(h), Flag(h.store_alive));
  for (const HostFigure& figure : kStoreFigures) {
    out.Family(figure.name, MetricType::kGauge, figure.help);
    for (const auto& [name, h] : view.hosts()) {
      if (h.has_store_stats) out.Sample(HostLabels(h), static_cast<double>(h.*figure.field));
    }
  }
  out.Family("atoll_dataplane_held_batches", MetricType::kGauge,
             "Batches of tuples the host's executor holds for peers whose queue is full.");
  for (const auto& [name, h] : view.hosts()) {
    if (h.has_dataplane_stats) out.Sample(HostLabels(h), static_cast<double>(h.batches_held));
  }
  for (const DataplaneFigure& figure : kDataplaneFigures) {
    out.Family(figure.name, MetricType::kCounter, figure.help);
    for (const auto& [name, h] : view.hosts()) {
      if (!h.has_dataplane_stats) continue;
      for (const auto& [direction, field] : {std::pair{"out", figure.out}, {"in", figure.in}}) {
        MetricLabels labels = HostLabels(h);
        labels.emplace_back("direction", direction);
        out.Sample(labels, static_cast<double>(h.*field));
      }
    }
  }
}

void WriteDevices(const ClusterView& view, PrometheusText& out) {
  out.Family("atoll_device_busy_ratio", MetricType::kGauge,
             "Fraction of the last seconds (the dashboard's busy window) the device was busy.");
  for (const auto& [id, d] : view.devices()) {
    if (d.has_stats) out.Sample(DeviceLabels(d), d.busy_pct / 100);
  }
  out.Family("atoll_device_busy_seconds_total", MetricType::kCounter,
             "Time the device was busy since its executor started.");
  for (const auto& [id, d] : view.devices()) {
    if (d.has_stats) out.Sample(DeviceLabels(d), static_cast<double>(d.busy_us) / 1e6);
  }
  out.Family("atoll_device_queued_gangs", MetricType::kGauge,
             "Gangs queued on the device's stream in its executor.");
  for (const auto& [id, d] : view.devices()) {
    if (d.has_stats) out.Sample(DeviceLabels(d), static_cast<double>(d.queued));
  }
  out.Family("atoll_device_gangs_done_total", MetricType::kCounter,
             "Gang shards the device finished since the dashboard started.");
  for (const auto& [id, d] : view.devices()) {
    out.Sample(DeviceLabels(d), static_cast<double>(d.gangs_done));
  }
}

// An event source ("executor/i0h0", "scheduler/island0", "rm") as labels.
MetricLabels SourceLabels(const ClusterView& view, const std::string& source) {
  const auto slash = source.find('/');
  const std::string service = source.substr(0, slash);
  const std::string name = slash == std::string::npos ? "" : source.substr(slash + 1);
  std::string island, host;
  if (service == "scheduler") {
    island = name;
  } else if (!name.empty()) {
    host = name;
    if (auto it = view.hosts().find(name); it != view.hosts().end()) island = it->second.island;
  }
  return {{"service", service}, {"island", island}, {"host", host}};
}

void WriteSent(const ClusterView& view, PrometheusText& out) {
  for (const SentFigure& figure : kSentFigures) {
    out.Family(figure.name, MetricType::kCounter, figure.help);
    for (const auto& [source, kinds] : view.sent()) {
      MetricLabels labels = SourceLabels(view, source);
      labels.emplace_back("kind", "");
      for (const auto& [kind, count] : kinds) {
        labels.back().second = kind;
        out.Sample(labels, static_cast<double>(count.*figure.field));
      }
    }
  }
}

void WriteRuns(const ClusterView& view, PrometheusText& out) {
  out.Family("atoll_clients", MetricType::kGauge, "Clients connected to the RM.");
  out.Sample({}, view.rm_clients());
  std::map<std::string, uint64_t> unfinished = {{"scheduled", 0}, {"running", 0}};
  for (const auto& [run, p] : view.programs()) {
    if (!p.finished()) unfinished[p.state]++;
  }
  out.Family("atoll_runs", MetricType::kGauge,
             "Programs scheduled (no shard finished yet) and running, as the dashboard sees "
             "them.");
  for (const auto& [state, n] : unfinished) {
    out.Sample({{"state", state}}, static_cast<double>(n));
  }
  out.Family("atoll_runs_finished_total", MetricType::kCounter,
             "Programs that finished since the dashboard started, by how: done, failed, "
             "abandoned (their client vanished).");
  for (const char* state : {"done", "failed", "abandoned"}) {
    auto it = view.runs_finished().find(state);
    out.Sample({{"state", state}},
               static_cast<double>(it == view.runs_finished().end() ? 0 : it->second));
  }
  out.Family("atoll_run_duration_seconds", MetricType::kHistogram,
             "Durations of the programs that finished done since the dashboard started, from "
             "their scheduling to the end of their last shard.");
  out.Sample({}, view.run_seconds());
}

}  // namespace

Result<std::string> ClusterMetricsText(const ClusterView& view, bool rm_answering) {
  PrometheusText out;
  out.Family("atoll_rm_up", MetricType::kGauge,
             "1 while the RM answers the dashboard's status requests, else 0.");
  out.Sample({}, Flag(rm_answering));
  WriteIslands(view, out);
  WriteHosts(view, out);
  WriteStalls(view, out);
  WriteDevices(view, out);
  WriteSent(view, out);
  WriteRuns(view, out);
  return std::move(out).Finish();
}

}  // namespace atl
