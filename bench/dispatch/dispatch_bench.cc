// bench/dispatch: the paper's dispatch micro-benchmark (Figure 5). Each computation is a
// scalar all-reduce plus a scalar add over every device of every host, after `compute_us`
// of modelled device time; its output feeds the next. Measured in computations per
// second, sweeping hosts and compute time, for:
//   op_by_op          one client call per computation (-O), streamed, futures chained
//   chained           128 computations traced into one program (-C)
//   fused             one computation whose function runs all 128 steps itself (-F)
//   sequential        the chained program under sequential dispatch (a controller round
//                     trip between computations)
//   multi_controller  each executor drives its own devices for 128 steps, synchronised
//                     only by the all-reduces (the stand-in for multi-controller JAX)
//   op_by_op_curve,   op_by_op and chained on a second cluster of the same size whose
//   chained_curve     sockets all speak CURVE (authenticated, encrypted), measured in the
//                     same sweep, alternating with the plain-text cluster
//   chained_sim,      chained, op_by_op and multi_controller over 16 to 512 simulated hosts
//   op_by_op_sim,     of 4 devices each, run 64 to a process (atoll-simhosts), with the
//   multi_controller_sim  control messages each chained computation costs (net.stats)
// Devices are `sim` devices: compute time is slept, so the figures measure the runtime.
// `--sim-only` runs only the simulated-hosts series, `--no-sim` all but them.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "atoll/client.h"
#include "bench/common/bench_args.h"
#include "bench/common/bench_cluster.h"
#include "bench/common/bench_result.h"
#include "bench/control/message_tally.h"
#include "common/net/transport.h"
#include "launcher/local_cluster.h"

namespace atl::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kDevicesPerHost = 2;

struct Sweep {
  std::vector<int> hosts;
  std::vector<int> compute_us;
  int steps = 128;
  int runs = 5;
};

BenchTopology Topology(int hosts, const std::string& security) {
  BenchTopology topology;
  topology.hosts = hosts;
  topology.devices_per_host = kDevicesPerHost;
  topology.security = security;
  return topology;
}

// step(x) = all_reduce_sum(spin(x, compute_us)) + 1, x a replicated scalar; fused runs
// `steps` of those in one function.
Result<Function> StepFunction(Client& client, const Slice& slice, int compute_us, int steps) {
  FunctionBuilder b(steps == 1 ? "step" : "fused");
  Value x = b.Input(DType::kF32, {1}, Sharding::Replicated());
  for (int i = 0; i < steps; ++i) x = b.Add(b.AllReduceSum(b.Spin(x, compute_us)), 1.0);
  b.Output(x);
  return client.Register(b, slice);
}

Result<Program> ChainOf(const Function& fn, int length) {
  ProgramBuilder p;
  Traced x = p.Arg(DType::kF32, {1});
  for (int i = 0; i < length; ++i) x = p.Call(fn, {x})[0];
  p.Return({x});
  return p.Build();
}

std::chrono::milliseconds Budget(const Sweep& sweep, int compute_us) {
  return std::chrono::milliseconds(30000 + 20 * sweep.steps * compute_us / 1000);
}

double Rate(int computations, Clock::time_point start) {
  return computations / std::chrono::duration<double>(Clock::now() - start).count();
}

// One cluster of `topology`, one slice over all its devices.
class Bench {
 public:
  Bench(BenchTopology topology, const Sweep& sweep)
      : topology_(std::move(topology)), sweep_(sweep) {}

  Status Start(const std::string& dir) {
    ATOLL_ASSIGN_OR_RETURN(cluster_, StartBenchCluster(dir, ClusterToml(topology_), ATOLL_BIN_DIR));
    ATOLL_ASSIGN_OR_RETURN(client_, Client::Connect({.rm_endpoint = cluster_->info().rm_endpoint,
                                                     .name = "bench-dispatch",
                                                     .keys_dir = cluster_->keys_dir()}));
    ATOLL_ASSIGN_OR_RETURN(slice_,
                           client_->CreateSlice(topology_.hosts * topology_.devices_per_host));
    return Status::Ok();
  }

  // The client goes first, while the services it says goodbye to still answer.
  Status Stop() {
    client_.reset();
    return cluster_->Stop();
  }
  const LocalCluster& cluster() const { return *cluster_; }
  Client& client() { return *client_; }
  const Slice& slice() const { return slice_; }

  Result<double> Chained(int compute_us, bool sequential) {
    ATOLL_ASSIGN_OR_RETURN(Function step, StepFunction(*client_, slice_, compute_us, 1));
    ATOLL_ASSIGN_OR_RETURN(Program chain, ChainOf(step, sweep_.steps));
    const auto start = Clock::now();
    ATOLL_ASSIGN_OR_RETURN(
        Run run, client_->Submit(chain, {Tensor::F32({1}, {0})}, {.sequential = sequential}));
    ATOLL_RETURN_IF_ERROR(run.Wait(Budget(sweep_, compute_us)).status());
    return Rate(sweep_.steps, start);
  }

  Result<double> Fused(int compute_us) {
    ATOLL_ASSIGN_OR_RETURN(Function fused,
                           StepFunction(*client_, slice_, compute_us, sweep_.steps));
    ATOLL_ASSIGN_OR_RETURN(Program one, ChainOf(fused, 1));
    const auto start = Clock::now();
    ATOLL_ASSIGN_OR_RETURN(Run run, client_->Submit(one, {Tensor::F32({1}, {0})}));
    ATOLL_RETURN_IF_ERROR(run.Wait(Budget(sweep_, compute_us)).status());
    return Rate(sweep_.steps, start);
  }

  Result<double> OpByOp(int compute_us) {
    ATOLL_ASSIGN_OR_RETURN(Function step, StepFunction(*client_, slice_, compute_us, 1));
    ATOLL_ASSIGN_OR_RETURN(Program one, ChainOf(step, 1));
    const auto start = Clock::now();
    ATOLL_ASSIGN_OR_RETURN(Run run, client_->Submit(one, {Tensor::F32({1}, {0})}));
    for (int i = 1; i < sweep_.steps; ++i) {
      ATOLL_ASSIGN_OR_RETURN(Run next, client_->Submit(one, {run.Output(0)}));
      run = std::move(next);
    }
    ATOLL_RETURN_IF_ERROR(run.Wait(Budget(sweep_, compute_us)).status());
    return Rate(sweep_.steps, start);
  }

  Result<double> MultiController(int compute_us) {
    ATOLL_ASSIGN_OR_RETURN(Function step, StepFunction(*client_, slice_, compute_us, 1));
    if (layout_.empty()) {
      ATOLL_ASSIGN_OR_RETURN(layout_, Layout());
    }
    const uint64_t run_id = (client_->id() << 32) | (1u << 31) | ++mc_runs_;
    const uint64_t object = (client_->id() << 40) | (uint64_t{1} << 39) | mc_runs_;
    const Tensor first = Tensor::F32({1}, {0});
    const auto start = Clock::now();
    for (const auto& [control, host] : layout_) {
      proto::RunLoop loop{run_id,        step.id(),   static_cast<uint32_t>(sweep_.steps),
                          client_->id(), host.shards, host.devices,
                          object,        DType::kF32, {1}};
      ATOLL_ASSIGN_OR_RETURN(zmq::socket_t * socket, executors_.Get(control));
      net::Frames data;
      data.emplace_back(first.data(), first.nbytes());
      ATOLL_RETURN_IF_ERROR(net::Send(*socket, nullptr, 1, loop, std::move(data)));
    }
    for (const auto& [control, host] : layout_) {
      ATOLL_ASSIGN_OR_RETURN(net::Requester * store, Store(host.store));
      for (uint32_t shard : host.shards) {
        const auto budget = Budget(sweep_, compute_us);
        auto got = store->Call<proto::GetObjectReply>(
            proto::GetObject{object, shard, static_cast<uint32_t>(budget.count()), false},
            budget + std::chrono::seconds(5));
        ATOLL_RETURN_IF_ERROR(got.status().WithContext("multi-controller result"));
      }
    }
    const double rate = Rate(sweep_.steps, start);
    for (const auto& [control, host] : layout_) {
      ATOLL_ASSIGN_OR_RETURN(net::Requester * store, Store(host.store));
      (void)store->Call<proto::Ok>(proto::ReleaseObject{object}, std::chrono::seconds(5));
    }
    return rate;
  }

 private:
  struct HostPart {
    std::string store;
    std::vector<uint32_t> shards, devices;
  };

  // A connection to the object store at `endpoint`, made on first use and kept, as the
  // client keeps its own: the baseline's runs do not pay for connecting either.
  Result<net::Requester*> Store(const std::string& endpoint) {
    auto& store = stores_[endpoint];
    if (!store) {
      store = std::make_unique<net::Requester>(mc_context_, endpoint);
      ATOLL_RETURN_IF_ERROR(store->Connect());
    }
    return store.get();
  }

  // Which executor runs which shard of the slice, on which local device.
  Result<std::map<std::string, HostPart>> Layout() {
    zmq::context_t context;
    net::Requester rm(context, cluster_->info().rm_endpoint);
    ATOLL_RETURN_IF_ERROR(rm.Connect());
    ATOLL_ASSIGN_OR_RETURN(auto status, rm.Call<proto::ClusterStatus>(proto::GetClusterStatus{},
                                                                      std::chrono::seconds(5)));
    const proto::SliceStatus* slice = nullptr;
    for (const auto& s : status.slices) {
      if (s.slice_id == slice_.id()) slice = &s;
    }
    if (slice == nullptr) return NotFound("the benchmark's slice is not in the cluster status");
    std::map<std::string, HostPart> layout;
    for (uint32_t shard = 0; shard < slice->device_ids.size(); ++shard) {
      for (const auto& island : status.islands) {
        for (const auto& host : island.hosts) {
          for (uint32_t local = 0; local < host.devices.size(); ++local) {
            if (host.devices[local].device_id != slice->device_ids[shard]) continue;
            HostPart& part = layout[host.control_endpoint];
            part.store = host.store_endpoint;
            part.shards.push_back(shard);
            part.devices.push_back(local);
          }
        }
      }
    }
    return layout;
  }

  BenchTopology topology_;
  Sweep sweep_;
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<Client> client_;
  Slice slice_;
  uint64_t mc_runs_ = 0;
  // The multi-controller baseline's connections to every executor and store: a socket
  // each, hence room for more than ZeroMQ's default 1023 at 512 hosts.
  zmq::context_t mc_context_{1, 8192};
  net::DealerPool executors_{mc_context_};
  std::map<std::string, std::unique_ptr<net::Requester>> stores_;
  std::map<std::string, HostPart> layout_;  // by executor; made at the first run
};

// Break-even: the smallest compute time at which `series` reaches 95% of the baseline's
// rate, interpolated linearly between measured points. Negative when never reached.
double BreakEvenMs(const std::map<int, double>& series, const std::map<int, double>& baseline) {
  double prev_compute = -1, prev_ratio = 0;
  for (const auto& [compute, rate] : series) {
    const double ratio = rate / baseline.at(compute);
    if (ratio >= 0.95) {
      if (prev_compute < 0) return compute / 1000.0;
      const double t = (0.95 - prev_ratio) / (ratio - prev_ratio);
      return (prev_compute + t * (compute - prev_compute)) / 1000.0;
    }
    prev_compute = compute;
    prev_ratio = ratio;
  }
  return -1;
}

// medians[series][hosts][compute_us]
using Medians = std::map<std::string, std::map<int, std::map<int, double>>>;

using Series = std::vector<std::pair<std::string, std::function<Result<double>()>>>;

// Measures every series at (hosts, compute): a run of each that warms up (connections,
// compiles), then `runs` rounds of one sample of each in turn, so that a busy spell of this
// shared machine falls on all of them rather than on whichever ran then, and the ratios
// between them hold. Each round starts one series further on, so that no series always
// follows the same one (and pays for what that one leaves running, as freeing its objects).
// Each is recorded as its row and its median.
Status MeasureSeries(const Series& series, int hosts, int compute, int runs, Medians& medians,
                     BenchResult& result) {
  std::vector<std::vector<double>> samples(series.size());
  for (int r = 0; r <= runs; ++r) {
    for (size_t k = 0; k < series.size(); ++k) {
      const size_t i = (k + r) % series.size();
      const auto& [name, measure] = series[i];
      auto rate = measure();
      ATOLL_RETURN_IF_ERROR(rate.status().WithContext(
          fmt::format("{} hosts={} compute_us={}", name, hosts, compute)));
      if (r > 0) samples[i].push_back(*rate);
    }
  }
  for (size_t i = 0; i < series.size(); ++i) {
    const std::string& name = series[i].first;
    medians[name][hosts][compute] = Median(samples[i]);
    fmt::print("{:>20} hosts={:<3} compute_us={:>6}: {:>9.1f} computations/s\n", name, hosts,
               compute, medians[name][hosts][compute]);
    result.Add(name, {{"hosts", hosts}, {"compute_us", compute}}, "computations_per_s", "1/s",
               samples[i]);
  }
  std::fflush(stdout);
  return Status::Ok();
}

std::string TempDir() {
  return std::filesystem::temp_directory_path() / fmt::format("atoll-bench-dispatch-{}", getpid());
}

// `only_hosts` not empty: those host counts of the sweep alone (to look at one closely).
Status RunSweep(const BenchOptions& options, const std::vector<int>& only_hosts,
                BenchResult& result) {
  Sweep sweep;
  if (options.quick) {
    sweep = {{1, 2}, {0, 1000}, 64, 3};
  } else {
    sweep = {{1, 2, 4, 8}, {0, 100, 300, 1000, 3000}, 128, 7};
  }
  if (!only_hosts.empty()) sweep.hosts = only_hosts;
  const std::string dir = TempDir();
  Medians medians;
  for (int hosts : sweep.hosts) {
    Bench bench(Topology(hosts, "plain"), sweep);
    Bench curve(Topology(hosts, "curve"), sweep);
    ATOLL_RETURN_IF_ERROR(bench.Start(fmt::format("{}/h{}", dir, hosts))
                              .WithContext(fmt::format("cluster of {} hosts", hosts)));
    ATOLL_RETURN_IF_ERROR(curve.Start(fmt::format("{}/h{}-curve", dir, hosts))
                              .WithContext(fmt::format("CURVE cluster of {} hosts", hosts)));
    for (int compute : sweep.compute_us) {
      const Series series = {
          {"op_by_op", [&] { return bench.OpByOp(compute); }},
          {"chained", [&] { return bench.Chained(compute, false); }},
          {"fused", [&] { return bench.Fused(compute); }},
          {"sequential", [&] { return bench.Chained(compute, true); }},
          {"multi_controller", [&] { return bench.MultiController(compute); }},
          {"op_by_op_curve", [&] { return curve.OpByOp(compute); }},
          {"chained_curve", [&] { return curve.Chained(compute, false); }},
      };
      ATOLL_RETURN_IF_ERROR(MeasureSeries(series, hosts, compute, sweep.runs, medians, result));
    }
    for (Bench* b : {&bench, &curve}) {
      Status stopped = b->Stop();
      if (!stopped.ok()) fmt::print(stderr, "dispatch: stopping: {}\n", stopped.ToString());
    }
  }
  for (int hosts : sweep.hosts) {
    const double breakeven =
        BreakEvenMs(medians["chained"][hosts], medians["multi_controller"][hosts]);
    if (breakeven >= 0)
      result.Derive(fmt::format("breakeven_compute_ms_hosts_{}", hosts), breakeven);
    const double chained0 = medians["chained"][hosts][0];
    result.Derive(fmt::format("chained_over_sequential_hosts_{}_compute_0", hosts),
                  chained0 / medians["sequential"][hosts][0]);
    result.Derive(fmt::format("chained_over_multi_controller_hosts_{}_compute_0", hosts),
                  chained0 / medians["multi_controller"][hosts][0]);
    // What CURVE costs: the rate with it over the rate without, same sweep.
    result.Derive(fmt::format("chained_curve_over_plain_hosts_{}_compute_0", hosts),
                  medians["chained_curve"][hosts][0] / chained0);
    result.Derive(fmt::format("op_by_op_curve_over_plain_hosts_{}_compute_0", hosts),
                  medians["op_by_op_curve"][hosts][0] / medians["op_by_op"][hosts][0]);
  }
  std::filesystem::remove_all(dir);
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------
// Simulated hosts: the paper's sizes, each host an executor and an object store with sockets
// and threads of their own, kSimHostsPerProcess of them to an atoll-simhosts process.

constexpr int kSimDevicesPerHost = 4;
constexpr int kSimHostsPerProcess = 64;
// Hundreds of services heartbeat and publish stats each period: slower than the default
// so that they do not crowd the two cores the figures are measured on.
constexpr int kSimHeartbeatMs = 1000;

// One cluster size: its own compute times, since the runtime's cost per computation (and
// so the break-even) grows with hosts, and fewer steps where each one is slow.
struct SimSize {
  int hosts;
  int steps;  // computations per measured run
  std::vector<int> compute_us;
};

struct SimSweep {
  std::vector<SimSize> sizes;
  int runs;
};

BenchTopology SimTopology(int hosts) {
  BenchTopology topology;
  topology.hosts = hosts;
  topology.devices_per_host = kSimDevicesPerHost;
  topology.heartbeat_ms = kSimHeartbeatMs;
  topology.liveness = 30;
  topology.device_memory_mb = 1;
  topology.arena_mb = 1;
  topology.sim_hosts_per_process = kSimHostsPerProcess;
  return topology;
}

// Control messages every process sent for one chained computation at compute 0: a run of
// 2N computations less a run of N, over N (so that what a run costs once cancels), as
// bench/control counts them.
Result<double> MessagesPerComputation(Bench& bench, int hosts, int steps) {
  zmq::context_t context;
  // Every host's executor and store, the scheduler and the RM report net.stats.
  MessageTally tally(context, bench.cluster().info().events_out, 2 * hosts + 2);
  ATOLL_RETURN_IF_ERROR(tally.Start());
  ATOLL_ASSIGN_OR_RETURN(Function step, StepFunction(bench.client(), bench.slice(), 0, 1));
  auto messages_of_run = [&](int length) -> Result<double> {
    ATOLL_ASSIGN_OR_RETURN(Program chain, ChainOf(step, length));
    ATOLL_ASSIGN_OR_RETURN(Traffic before, tally.Snapshot());
    ATOLL_ASSIGN_OR_RETURN(Run run, bench.client().Submit(chain, {Tensor::F32({1}, {0})}));
    ATOLL_RETURN_IF_ERROR(run.Wait(std::chrono::seconds(120)).status());
    // What follows a run (GangDone, releases) lands within a heartbeat on an idle cluster.
    std::this_thread::sleep_for(std::chrono::milliseconds(2 * kSimHeartbeatMs));
    ATOLL_ASSIGN_OR_RETURN(Traffic after, tally.Snapshot());
    double total = 0;
    for (const auto& [flow, f] : Minus(after, before).caused) total += f.messages;
    return total;
  };
  ATOLL_ASSIGN_OR_RETURN(const double once, messages_of_run(steps));
  ATOLL_ASSIGN_OR_RETURN(const double twice, messages_of_run(2 * steps));
  return (twice - once) / steps;
}

Status RunSimSweep(const BenchOptions& options, BenchResult& result) {
  SimSweep sweep;
  // The full sweep takes about 10 minutes on 2 cores, most of it at 512 hosts.
  if (options.quick) {
    sweep = {{{16, 16, {0, 3000}}, {64, 16, {0, 3000}}}, 1};
  } else {
    sweep = {{{16, 32, {0, 1000, 3000, 10000, 30000}},
              {64, 32, {0, 3000, 10000, 30000, 100000}},
              {128, 16, {0, 10000, 30000, 100000, 300000}},
              {512, 8, {0, 100000, 300000, 1000000}}},
             2};
  }
  const std::string dir = TempDir() + "-sim";
  Medians medians;
  std::map<int, double> messages;
  for (const SimSize& size : sweep.sizes) {
    const int hosts = size.hosts;
    const int processes = (hosts + kSimHostsPerProcess - 1) / kSimHostsPerProcess;
    fmt::print(
        "simulated: {} hosts x {} sim devices in {} atoll-simhosts process(es), {} threads "
        "(a loop per executor and store, one per device), sharing {} cores with the RM, the "
        "scheduler and this client\n",
        hosts, kSimDevicesPerHost, processes, hosts * (2 + kSimDevicesPerHost),
        std::thread::hardware_concurrency());
    std::fflush(stdout);
    Sweep steps{{hosts}, size.compute_us, size.steps, sweep.runs};
    Bench bench(SimTopology(hosts), steps);
    const auto started = Clock::now();
    ATOLL_RETURN_IF_ERROR(bench.Start(fmt::format("{}/h{}", dir, hosts))
                              .WithContext(fmt::format("cluster of {} simulated hosts", hosts)));
    fmt::print("  started in {:.1f} s\n",
               std::chrono::duration<double>(Clock::now() - started).count());
    for (int compute : size.compute_us) {
      const Series series = {
          {"chained_sim", [&] { return bench.Chained(compute, false); }},
          {"op_by_op_sim", [&] { return bench.OpByOp(compute); }},
          {"multi_controller_sim", [&] { return bench.MultiController(compute); }},
      };
      ATOLL_RETURN_IF_ERROR(MeasureSeries(series, hosts, compute, sweep.runs, medians, result));
    }
    ATOLL_ASSIGN_OR_RETURN(messages[hosts], MessagesPerComputation(bench, hosts, size.steps));
    fmt::print("{:>20} hosts={:<3}: {:.1f} control messages per computation ({:.2f} per host)\n",
               "chained_sim", hosts, messages[hosts], messages[hosts] / hosts);
    Status stopped = bench.Stop();
    if (!stopped.ok()) fmt::print(stderr, "dispatch: stopping: {}\n", stopped.ToString());
  }
  for (const SimSize& size : sweep.sizes) {
    const int hosts = size.hosts;
    const double breakeven =
        BreakEvenMs(medians["chained_sim"][hosts], medians["multi_controller_sim"][hosts]);
    if (breakeven >= 0)
      result.Derive(fmt::format("breakeven_compute_ms_sim_hosts_{}", hosts), breakeven);
    result.Derive(fmt::format("sim_control_messages_per_computation_hosts_{}", hosts),
                  messages[hosts]);
    // Roughly constant when a computation's messages grow as O(hosts).
    result.Derive(fmt::format("sim_control_messages_per_computation_over_hosts_{}", hosts),
                  messages[hosts] / hosts);
  }
  std::filesystem::remove_all(dir);
  return Status::Ok();
}

}  // namespace
}  // namespace atl::bench

int main(int argc, char** argv) {
  bool sim_only = false, no_sim = false;
  std::vector<int> only_hosts;
  return atl::bench::RunBenchmark(
      argc, argv, "dispatch", "computations per second against hosts and compute time (Figure 5)",
      [&](const atl::bench::BenchOptions& options, atl::bench::BenchResult& result) {
        if (!sim_only) ATOLL_RETURN_IF_ERROR(atl::bench::RunSweep(options, only_hosts, result));
        if (!no_sim) ATOLL_RETURN_IF_ERROR(atl::bench::RunSimSweep(options, result));
        return atl::Status::Ok();
      },
      [&](CLI::App& app) {
        app.add_flag("--sim-only", sim_only, "Only the simulated-hosts series (*_sim)");
        app.add_flag("--no-sim", no_sim, "Every series but the simulated-hosts ones")
            ->excludes(app.get_option("--sim-only"));
        app.add_option("--hosts", only_hosts,
                       "Only these host counts of the real-host sweep (a partial result: write "
                       "it elsewhere with --out)")
            ->delimiter(',')
            ->check(CLI::PositiveNumber);
      });
}
