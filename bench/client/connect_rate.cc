#include "bench/client/connect_rate.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "atoll/client.h"
#include "bench/common/bench_cluster.h"

namespace atl::bench {
namespace {

using ConnectClock = std::chrono::steady_clock;
constexpr auto kRunTimeout = std::chrono::seconds(60);

// One new client's whole start: connect, slice, function, one run (its result checked).
Status OneClient(const std::string& rm, const std::string& keys, int index) {
  ATOLL_ASSIGN_OR_RETURN(
      auto client,
      Client::Connect(
          {.rm_endpoint = rm, .name = fmt::format("bench-connect-{}", index), .keys_dir = keys}));
  ATOLL_ASSIGN_OR_RETURN(Slice slice, client->CreateSlice(1));
  FunctionBuilder b("inc");
  b.Output(b.Add(b.Input(DType::kF32, {2}), 1.0));
  ATOLL_ASSIGN_OR_RETURN(Function inc, client->Register(b, slice));
  ProgramBuilder p;
  p.Return({p.Call(inc, {p.Arg(DType::kF32, {2})})[0]});
  ATOLL_ASSIGN_OR_RETURN(Program program, p.Build());
  ATOLL_ASSIGN_OR_RETURN(Run run, client->Submit(program, {Tensor::F32({2}, {1, float(index)})}));
  ATOLL_ASSIGN_OR_RETURN(auto out, run.Wait(kRunTimeout));
  if (!(out.at(0) == Tensor::F32({2}, {2, float(index) + 1}))) {
    return Internal(fmt::format("client {} got a wrong result", index));
  }
  return Status::Ok();
}

// `count` clients at once: clients per second from the first connect to the last result.
Result<double> ClientsPerSecond(const std::string& rm, const std::string& keys, int count) {
  std::mutex mu;
  Status first_error;
  const auto start = ConnectClock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < count; ++i) {
    threads.emplace_back([&, i] {
      Status s = OneClient(rm, keys, i);
      std::lock_guard lock(mu);
      if (!s.ok() && first_error.ok()) first_error = s;
    });
  }
  for (auto& t : threads) t.join();
  ATOLL_RETURN_IF_ERROR(first_error);
  return count / std::chrono::duration<double>(ConnectClock::now() - start).count();
}

struct SecuredCluster {
  std::string security;
  std::unique_ptr<LocalCluster> cluster;
  std::string keys;  // ClientOptions::keys_dir
};

}  // namespace

Status MeasureConnectRate(const ConnectSweep& sweep, const std::string& dir, BenchResult& result) {
  // What `atoll up` starts (config/local.toml): 2 islands x 2 hosts x 2 cpu devices.
  std::vector<SecuredCluster> clusters;
  for (const std::string security : {"curve", "plain"}) {
    BenchTopology topology;
    topology.islands = 2;
    topology.hosts = 2;
    topology.devices_per_host = 2;
    topology.kind = "cpu";
    topology.liveness = 4;
    topology.security = security;
    ATOLL_ASSIGN_OR_RETURN(auto cluster, StartBenchCluster(dir + "/connect-" + security,
                                                           ClusterToml(topology), ATOLL_BIN_DIR));
    const std::string keys = security == "plain" ? "plain" : cluster->keys_dir();
    clusters.push_back({security, std::move(cluster), keys});
  }
  for (int count : sweep.clients) {
    std::vector<double> rates[2];
    // The two take turns, each round starting with the other, so that a busy spell of the
    // machine slows both alike.
    for (int r = 0; r < sweep.runs; ++r) {
      for (int k = 0; k < 2; ++k) {
        const SecuredCluster& c = clusters[(r + k) % 2];
        ATOLL_ASSIGN_OR_RETURN(double rate,
                               ClientsPerSecond(c.cluster->info().rm_endpoint, c.keys, count));
        rates[(r + k) % 2].push_back(rate);
      }
    }
    for (int i = 0; i < 2; ++i) {
      fmt::print("{} clients at once, {}: {:.0f} clients/s\n", count, clusters[i].security,
                 Median(rates[i]));
      result.Add("clients_connected", {{"clients", count}, {"security", clusters[i].security}},
                 "clients_per_s", "1/s", rates[i]);
    }
    result.Derive(fmt::format("clients_connected_curve_over_plain_clients_{}", count),
                  Median(rates[0]) / Median(rates[1]));
  }
  Status stopped;
  for (auto& c : clusters) {
    Status s = c.cluster->Stop();
    if (stopped.ok()) stopped = s;
  }
  return stopped;
}

}  // namespace atl::bench
