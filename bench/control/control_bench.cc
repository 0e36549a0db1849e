// bench/control: messages and bytes sent per sharded computation as the shard count grows,
// for clusters of 1, 2, 4 and 8 hosts of `sim` devices. Each computation is
// step(x) = all_reduce_sum(x) + 1 over every shard of an S-shard slice (x a replicated
// scalar, so the all-reduce's partials cross hosts); a program chains `steps` of them,
// is submitted once and waited for. Every process counts what it sends (common/
// sent_counters.h); a run's figures are the difference of those counters around it, per
// flow (sender -> receiver, message kind). Per computation: a run of 2N computations less a
// run of N, over N, so what a run costs once (Submit, argument puts, per-shard result
// reservations, reads and releases) is reported apart, as per run (N less N computations).
// Heartbeats are periodic, not caused by a run: they are reported as a rate per second.
// What Pathways predicts: control messages per computation grow with hosts (one GangDone
// per executor, one all-reduce partial per ordered pair of hosts up to 4 hosts, two
// per host beyond (to the gang's root and back): at most H * H), not with
// shards. Partials for one host that leave in the same batch lower the count below that.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "atoll/client.h"
#include "bench/common/bench_args.h"
#include "bench/common/bench_cluster.h"
#include "bench/common/bench_result.h"
#include "bench/control/message_tally.h"
#include "launcher/local_cluster.h"

namespace atl::bench {
namespace {

using namespace std::chrono_literals;
constexpr int kHeartbeatMs = 50;

struct Sweep {
  std::vector<int> hosts;      // cluster sizes
  int devices_per_host = 512;  // the most shards is hosts * devices_per_host
  int min_shards = 8;
  int steps = 16;
  int runs = 3;
};

std::string ClusterToml(int hosts, int devices_per_host) {
  BenchTopology topology;
  topology.hosts = hosts;
  topology.devices_per_host = devices_per_host;
  topology.heartbeat_ms = kHeartbeatMs;
  topology.liveness = 200;
  topology.device_memory_mb = 1;
  topology.arena_mb = 16;
  return ClusterToml(topology);
}

Result<Program> ChainOf(const Function& fn, int length) {
  ProgramBuilder p;
  Traced x = p.Arg(DType::kF32, {1});
  for (int i = 0; i < length; ++i) x = p.Call(fn, {x})[0];
  p.Return({x});
  return p.Build();
}

// What one run of a program caused, and the wall time its counters cover.
struct Measured {
  Traffic traffic;
  double seconds = 0;
};

Result<Measured> MeasureRun(Client& client, const Program& program, MessageTally& tally) {
  const auto started = std::chrono::steady_clock::now();
  ATOLL_ASSIGN_OR_RETURN(Traffic before, tally.Snapshot());
  ATOLL_ASSIGN_OR_RETURN(Run run, client.Submit(program, {Tensor::F32({1}, {0})}));
  ATOLL_RETURN_IF_ERROR(run.Wait(120s).status());
  // Let what follows a run (GangDone, releases) arrive before the counters are read.
  std::this_thread::sleep_for(std::chrono::milliseconds(4 * kHeartbeatMs));
  ATOLL_ASSIGN_OR_RETURN(Traffic after, tally.Snapshot());
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
  return Measured{Minus(after, before), took.count()};
}

// Messages and bytes by flow, as signed numbers (a difference of runs).
using Figures = std::map<std::string, std::pair<double, double>>;

// a * x + b * y, flow by flow (a flow missing from one counts as 0 there).
Figures Combine(double a, const Flows& x, double b, const Flows& y) {
  Figures out;
  for (const auto& [name, f] : x) {
    out[name].first += a * static_cast<double>(f.messages);
    out[name].second += a * static_cast<double>(f.bytes);
  }
  for (const auto& [name, f] : y) {
    out[name].first += b * static_cast<double>(f.messages);
    out[name].second += b * static_cast<double>(f.bytes);
  }
  return out;
}

// Samples per flow and in total, in messages and bytes.
struct Samples {
  std::map<std::string, std::vector<double>> messages, bytes;

  void Add(const Figures& figures) {
    double total_messages = 0, total_bytes = 0;
    for (const auto& [name, f] : figures) {
      messages[name].push_back(f.first);
      bytes[name].push_back(f.second);
      total_messages += f.first;
      total_bytes += f.second;
    }
    messages["total"].push_back(total_messages);
    bytes["total"].push_back(total_bytes);
  }

  // Rows "<prefix>messages_per_<what>" and "<prefix>bytes_per_<what>"; a flow absent from a
  // run had nothing. Flows with nothing in every run are left out (the total never is).
  void Report(BenchResult& result, const Params& params, const std::string& prefix,
              const std::string& what, size_t runs) {
    auto zero = [](const std::vector<double>& v) {
      return std::all_of(v.begin(), v.end(), [](double x) { return x == 0; });
    };
    for (auto& [name, samples] : messages) {
      samples.resize(runs, 0.0);
      bytes[name].resize(runs, 0.0);
      if (name != "total" && zero(samples) && zero(bytes[name])) continue;
      result.Add(name, params, prefix + "messages_per_" + what, "1", samples);
      result.Add(name, params, prefix + "bytes_per_" + what, "B", bytes[name]);
    }
  }
};

// Per computation: the difference between a run of 2N and a run of N computations, over N,
// so that what a run costs once (Submit, argument puts, result reads and releases, all per
// shard) does not count. Per run: that once-per-run part, a run of N less N computations.
// Heartbeats: what both runs sent, over the time they took. Returns the median total
// messages per computation.
Result<double> MeasureShards(Client& client, int hosts, int shards, const Sweep& sweep,
                             MessageTally& tally, BenchResult& result) {
  ATOLL_ASSIGN_OR_RETURN(Slice slice, client.CreateSlice(shards));
  FunctionBuilder b("step");
  Value x = b.Input(DType::kF32, {1}, Sharding::Replicated());
  b.Output(b.Add(b.AllReduceSum(x), 1.0));
  ATOLL_ASSIGN_OR_RETURN(Function step, client.Register(b, slice));
  ATOLL_ASSIGN_OR_RETURN(Program shorter, ChainOf(step, sweep.steps));
  ATOLL_ASSIGN_OR_RETURN(Program longer, ChainOf(step, 2 * sweep.steps));
  ATOLL_RETURN_IF_ERROR(MeasureRun(client, longer, tally).status());  // warm-up
  Samples per_computation, per_run, periodic;
  for (int r = 0; r < sweep.runs; ++r) {
    ATOLL_ASSIGN_OR_RETURN(Measured n, MeasureRun(client, shorter, tally));
    ATOLL_ASSIGN_OR_RETURN(Measured n2, MeasureRun(client, longer, tally));
    const Flows &caused_n = n.traffic.caused, &caused_n2 = n2.traffic.caused;
    // (2N - N) / N per computation; N - N * that = 2 * N - 2N once per run.
    per_computation.Add(Combine(1.0 / sweep.steps, caused_n2, -1.0 / sweep.steps, caused_n));
    per_run.Add(Combine(2.0, caused_n, -1.0, caused_n2));
    const double seconds = n.seconds + n2.seconds;
    periodic.Add(Combine(1.0 / seconds, n.traffic.periodic, 1.0 / seconds, n2.traffic.periodic));
  }
  const Params params = {{"hosts", hosts}, {"shards", shards}};
  per_computation.Report(result, params, "", "computation", sweep.runs);
  per_run.Report(result, params, "", "run", sweep.runs);
  periodic.Report(result, params, "heartbeat_", "s", sweep.runs);
  ATOLL_ASSIGN_OR_RETURN(Summary total, Summarize(per_computation.messages["total"]));
  fmt::print(
      "hosts={} shards={:>4}: {:>6.2f} messages (at most {}), {:>8.0f} B per computation; "
      "{:>6.0f} messages per run; {:>5.1f} heartbeats/s\n",
      hosts, shards, total.median, hosts * hosts, per_computation.bytes["total"][0],
      per_run.messages["total"][0], periodic.messages["total"][0]);
  for (const auto& [name, samples] : per_computation.messages) {
    if (name != "total" && samples[0] != 0) fmt::print("    {:<36} {:>7.2f}\n", name, samples[0]);
  }
  std::fflush(stdout);
  return total.median;
}

Status MeasureHosts(int hosts, const Sweep& sweep, const std::string& dir, BenchResult& result) {
  ATOLL_ASSIGN_OR_RETURN(
      std::unique_ptr<LocalCluster> cluster,
      StartBenchCluster(dir, ClusterToml(hosts, sweep.devices_per_host), ATOLL_BIN_DIR));
  ATOLL_ASSIGN_OR_RETURN(
      std::unique_ptr<Client> client,
      Client::Connect({.rm_endpoint = cluster->info().rm_endpoint, .name = "bench-control"}));
  zmq::context_t context;
  // Executors and stores on every host, one scheduler, the RM.
  MessageTally tally(context, cluster->info().events_out, 2 * hosts + 2);
  ATOLL_RETURN_IF_ERROR(tally.Start());
  const int min_shards = std::max(sweep.min_shards, hosts);
  const int max_shards = hosts * sweep.devices_per_host;
  std::map<int, double> messages;  // median per computation, by shards
  for (int shards = min_shards; shards <= max_shards; shards *= 2) {
    const auto started = std::chrono::steady_clock::now();
    Result<double> measured = MeasureShards(*client, hosts, shards, sweep, tally, result);
    ATOLL_RETURN_IF_ERROR(measured.status().WithContext(fmt::format("{} shards", shards)));
    messages[shards] = *measured;
    fmt::print("    ({:.1f} s)\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  // The claim in numbers per cluster size: shards grew max/min times, messages this much;
  // and the most messages per computation at any shard count against H * H (one GangDone
  // per executor, one all-reduce partial per ordered pair of hosts; fewer above 4 hosts).
  double most = 0;
  for (const auto& [shards, m] : messages) most = std::max(most, m);
  result.Derive(fmt::format("messages_per_computation_max_over_hosts_squared_hosts_{}", hosts),
                most / (hosts * hosts));
  if (messages.begin()->second > 0) {
    result.Derive(fmt::format("messages_per_computation_{}_over_{}_shards_hosts_{}",
                              messages.rbegin()->first, messages.begin()->first, hosts),
                  messages.rbegin()->second / messages.begin()->second);
  }
  return cluster->Stop();
}

Status RunSweep(const BenchOptions& options, BenchResult& result) {
  Sweep sweep;
  if (options.quick)
    sweep = {{1, 2}, 16, 8, 8, 2};
  else
    sweep = {{1, 2, 4, 8}, 512, 8, 16, 3};
  const std::string dir =
      std::filesystem::temp_directory_path() / fmt::format("atoll-bench-control-{}", getpid());
  for (int hosts : sweep.hosts) {
    Status measured = MeasureHosts(hosts, sweep, fmt::format("{}/h{}", dir, hosts), result);
    ATOLL_RETURN_IF_ERROR(measured.WithContext(fmt::format("cluster of {} hosts", hosts)));
  }
  std::filesystem::remove_all(dir);
  return Status::Ok();
}

}  // namespace
}  // namespace atl::bench

int main(int argc, char** argv) {
  return atl::bench::RunBenchmark(argc, argv, "control",
                                  "messages and bytes sent per sharded computation as shards grow",
                                  atl::bench::RunSweep);
}
