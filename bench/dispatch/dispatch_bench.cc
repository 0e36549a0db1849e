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
// Devices are `sim` devices: compute time is slept, so the figures measure the runtime.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "atoll/client.h"
#include "bench/common/bench_args.h"
#include "bench/common/bench_cluster.h"
#include "bench/common/bench_result.h"
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

std::string ClusterToml(int hosts, const std::string& security) {
  BenchTopology topology;
  topology.hosts = hosts;
  topology.devices_per_host = kDevicesPerHost;
  topology.security = security;
  return ClusterToml(topology);
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

// One cluster of `hosts` hosts, one slice over all its devices.
class Bench {
 public:
  // `security`: the cluster's security.mode, "plain" or "curve".
  Bench(int hosts, const Sweep& sweep, std::string security)
      : hosts_(hosts), sweep_(sweep), security_(std::move(security)) {}

  Status Start(const std::string& dir) {
    ATOLL_ASSIGN_OR_RETURN(cluster_,
                           StartBenchCluster(dir, ClusterToml(hosts_, security_), ATOLL_BIN_DIR));
    ATOLL_ASSIGN_OR_RETURN(client_, Client::Connect({.rm_endpoint = cluster_->info().rm_endpoint,
                                                     .name = "bench-dispatch",
                                                     .keys_dir = cluster_->keys_dir()}));
    ATOLL_ASSIGN_OR_RETURN(slice_, client_->CreateSlice(hosts_ * kDevicesPerHost));
    return Status::Ok();
  }

  Status Stop() { return cluster_->Stop(); }

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
    ATOLL_ASSIGN_OR_RETURN(auto layout, Layout());
    const uint64_t run_id = (client_->id() << 32) | (1u << 31) | ++mc_runs_;
    const uint64_t object = (client_->id() << 40) | (uint64_t{1} << 39) | mc_runs_;
    zmq::context_t context;
    net::DealerPool executors(context);
    const Tensor first = Tensor::F32({1}, {0});
    const auto start = Clock::now();
    for (const auto& [control, host] : layout) {
      proto::RunLoop loop{run_id,        step.id(),   static_cast<uint32_t>(sweep_.steps),
                          client_->id(), host.shards, host.devices,
                          object,        DType::kF32, {1}};
      ATOLL_ASSIGN_OR_RETURN(zmq::socket_t * socket, executors.Get(control));
      net::Frames data;
      data.emplace_back(first.data(), first.nbytes());
      ATOLL_RETURN_IF_ERROR(net::Send(*socket, nullptr, 1, loop, std::move(data)));
    }
    for (const auto& [control, host] : layout) {
      net::Requester store(context, host.store);
      ATOLL_RETURN_IF_ERROR(store.Connect());
      for (uint32_t shard : host.shards) {
        const auto budget = Budget(sweep_, compute_us);
        auto got = store.Call<proto::GetObjectReply>(
            proto::GetObject{object, shard, static_cast<uint32_t>(budget.count()), false},
            budget + std::chrono::seconds(5));
        ATOLL_RETURN_IF_ERROR(got.status().WithContext("multi-controller result"));
      }
    }
    const double rate = Rate(sweep_.steps, start);
    for (const auto& [control, host] : layout) {
      net::Requester store(context, host.store);
      ATOLL_RETURN_IF_ERROR(store.Connect());
      (void)store.Call<proto::Ok>(proto::ReleaseObject{object}, std::chrono::seconds(5));
    }
    return rate;
  }

 private:
  struct HostPart {
    std::string store;
    std::vector<uint32_t> shards, devices;
  };

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

  int hosts_;
  Sweep sweep_;
  std::string security_;
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<Client> client_;
  Slice slice_;
  uint64_t mc_runs_ = 0;
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

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

Status RunSweep(const BenchOptions& options, BenchResult& result) {
  Sweep sweep;
  if (options.quick) {
    sweep = {{1, 2}, {0, 1000}, 64, 3};
  } else {
    sweep = {{1, 2, 4, 8}, {0, 100, 300, 1000, 3000}, 128, 5};
  }
  const std::string dir =
      std::filesystem::temp_directory_path() / fmt::format("atoll-bench-dispatch-{}", getpid());
  // medians[series][hosts][compute_us]
  std::map<std::string, std::map<int, std::map<int, double>>> medians;
  for (int hosts : sweep.hosts) {
    Bench bench(hosts, sweep, "plain");
    Bench curve(hosts, sweep, "curve");
    ATOLL_RETURN_IF_ERROR(bench.Start(fmt::format("{}/h{}", dir, hosts))
                              .WithContext(fmt::format("cluster of {} hosts", hosts)));
    ATOLL_RETURN_IF_ERROR(curve.Start(fmt::format("{}/h{}-curve", dir, hosts))
                              .WithContext(fmt::format("CURVE cluster of {} hosts", hosts)));
    for (int compute : sweep.compute_us) {
      const std::vector<std::pair<std::string, std::function<Result<double>()>>> series = {
          {"op_by_op", [&] { return bench.OpByOp(compute); }},
          {"chained", [&] { return bench.Chained(compute, false); }},
          {"fused", [&] { return bench.Fused(compute); }},
          {"sequential", [&] { return bench.Chained(compute, true); }},
          {"multi_controller", [&] { return bench.MultiController(compute); }},
          {"op_by_op_curve", [&] { return curve.OpByOp(compute); }},
          {"chained_curve", [&] { return curve.Chained(compute, false); }},
      };
      for (const auto& [name, measure] : series) {
        std::vector<double> samples;
        for (int r = 0; r <= sweep.runs; ++r) {  // run 0 warms up (connections, compiles)
          auto rate = measure();
          ATOLL_RETURN_IF_ERROR(rate.status().WithContext(
              fmt::format("{} hosts={} compute_us={}", name, hosts, compute)));
          if (r > 0) samples.push_back(*rate);
        }
        medians[name][hosts][compute] = Median(samples);
        fmt::print("{:>16} hosts={} compute_us={:>5}: {:>9.0f} computations/s\n", name, hosts,
                   compute, medians[name][hosts][compute]);
        std::fflush(stdout);
        result.Add(name, {{"hosts", hosts}, {"compute_us", compute}}, "computations_per_s", "1/s",
                   samples);
      }
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

}  // namespace
}  // namespace atl::bench

int main(int argc, char** argv) {
  return atl::bench::RunBenchmark(argc, argv, "dispatch",
                                  "computations per second against hosts and compute time "
                                  "(Figure 5)",
                                  atl::bench::RunSweep);
}
