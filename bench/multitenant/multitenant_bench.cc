// bench/multitenant: K clients time-multiplexed on the same devices (the paper's
// multi-tenancy experiment). Every client runs chains of 0.33 ms gangs (an all-reduce over
// all 4 sim devices of one island) back to back; over a fixed window the benchmark reads the
// cluster's gang.done events and reports:
//   device_utilization  busy time over wall time, per device
//   share_error         per client, |its share of device time - its target| / target; the
//                       target is weight / total weight (weights 1, 2, 4, 8 repeating)
//                       under proportional share, equal shares under FIFO
// for K = 1, 2, 4, 8, 16 and both policies, each on its own cluster.
#include <atomic>
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
#include "common/net/event_reader.h"
#include "common/net/events.h"
#include "common/net/transport.h"
#include "launcher/local_cluster.h"

namespace atl::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kGangUs = 330;
constexpr int kChain = 4;
// Runs each client keeps submitted: enough that it never runs dry (proportional share is
// defined for clients that always have work queued).
constexpr size_t kOutstanding = 4;

double WeightOf(int client_index) { return std::pow(2.0, client_index % 4); }

std::string ClusterToml(const std::string& policy) {
  BenchTopology topology;
  topology.hosts = 2;
  topology.devices_per_host = 2;
  topology.extra_toml =
      fmt::format("[scheduler]\npolicy = \"{}\"\nwindow = {}\n", policy, policy == "share" ? 4 : 0);
  return ClusterToml(topology);
}

struct Window {
  std::map<uint64_t, double> busy_us_per_device;
  std::map<uint64_t, double> busy_us_per_client;  // by RM client id
  double wall_us = 0;
};

// Reads gang.done events for `length`, clipping each gang to the window.
Result<Window> Measure(const std::string& events_endpoint, std::chrono::milliseconds length) {
  zmq::context_t context;
  zmq::socket_t sub = net::MakeSocket(context, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "gang.done");
  ATOLL_RETURN_IF_ERROR(net::Connect(sub, events_endpoint));
  // The subscription is live once the first event arrives.
  ATOLL_ASSIGN_OR_RETURN(auto first, net::RecvFrames(sub, std::chrono::seconds(10)));
  if (!first) return DeadlineExceeded("no gang.done event within 10 s");
  const int64_t start_us = NowMicros();
  const int64_t end_us = start_us + length.count() * 1000;
  Window w;
  w.wall_us = static_cast<double>(end_us - start_us);
  while (NowMicros() < end_us + 200000) {  // gangs ending just after the window still report
    ATOLL_ASSIGN_OR_RETURN(auto frames, net::RecvFrames(sub, std::chrono::milliseconds(50)));
    if (!frames || frames->size() != 2) continue;
    auto event = DecodeEvent((*frames)[0], (*frames)[1]);
    if (!event.ok()) continue;
    const auto& f = event->fields;
    const int64_t a = std::max(f["start_us"].get<int64_t>(), start_us);
    const int64_t b = std::min(f["end_us"].get<int64_t>(), end_us);
    if (b <= a) continue;
    w.busy_us_per_device[f["device"].get<uint64_t>()] += static_cast<double>(b - a);
    w.busy_us_per_client[f["client"].get<uint64_t>()] += static_cast<double>(b - a);
  }
  return w;
}

// One client's loop: chains of gangs back to back, kOutstanding runs in flight.
void ClientLoop(const std::string& rm, int index, std::atomic<bool>& stop, uint64_t& id,
                std::atomic<int>& ready, std::string& error) {
  auto client = Client::Connect(
      {.rm_endpoint = rm, .name = fmt::format("tenant-{}", index), .weight = WeightOf(index)});
  if (!client.ok()) return void(error = client.status().ToString());
  id = (*client)->id();
  auto slice = (*client)->CreateSlice(4, "island0");
  if (!slice.ok()) return void(error = slice.status().ToString());
  FunctionBuilder b("gang");
  Value x = b.Input(DType::kF32, {1}, Sharding::Replicated());
  b.Output(b.Add(b.AllReduceSum(b.Spin(x, kGangUs)), 1.0));
  auto fn = (*client)->Register(b, *slice);
  if (!fn.ok()) return void(error = fn.status().ToString());
  ProgramBuilder p;
  Traced v = p.Arg(DType::kF32, {1});
  for (int i = 0; i < kChain; ++i) v = p.Call(*fn, {v})[0];
  p.Return({v});
  auto program = p.Build();
  if (!program.ok()) return void(error = program.status().ToString());
  ready++;
  std::deque<Run> outstanding;
  while (!stop.load()) {
    while (outstanding.size() < kOutstanding) {
      auto run = (*client)->Submit(*program, {Tensor::F32({1}, {0})});
      if (!run.ok()) return void(error = run.status().ToString());
      outstanding.push_back(std::move(*run));
    }
    auto out = outstanding.front().Wait(std::chrono::seconds(60));
    if (!out.ok()) return void(error = out.status().ToString());
    outstanding.pop_front();
  }
  for (auto& run : outstanding) (void)run.Wait(std::chrono::seconds(60));
}

Status RunSweep(const BenchOptions& options, BenchResult& result) {
  const std::vector<int> clients =
      options.quick ? std::vector<int>{1, 4, 16} : std::vector<int>{1, 2, 4, 8, 16};
  const auto window = std::chrono::milliseconds(options.quick ? 2000 : 5000);
  const int runs = options.quick ? 1 : 3;
  const std::string dir =
      std::filesystem::temp_directory_path() / fmt::format("atoll-bench-multitenant-{}", getpid());
  for (const std::string policy : {"fifo", "share"}) {
    ATOLL_ASSIGN_OR_RETURN(
        std::unique_ptr<LocalCluster> cluster,
        StartBenchCluster(dir + "/" + policy, ClusterToml(policy), ATOLL_BIN_DIR));
    for (int k : clients) {
      std::vector<double> utilization, share_error;
      std::string worst;  // the client furthest from its target, for the log
      double worst_error = -1;
      for (int r = 0; r < runs; ++r) {
        std::atomic<bool> stop{false};
        std::atomic<int> ready{0};
        std::vector<uint64_t> ids(k);
        std::vector<std::string> errors(k);
        std::vector<std::thread> threads;
        for (int c = 0; c < k; ++c) {
          threads.emplace_back(ClientLoop, cluster->info().rm_endpoint, c, std::ref(stop),
                               std::ref(ids[c]), std::ref(ready), std::ref(errors[c]));
        }
        const auto deadline = Clock::now() + std::chrono::seconds(30);
        while (ready.load() < k && Clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling a counter
        }
        auto w = Measure(cluster->info().events_out, window);
        stop = true;
        for (auto& t : threads) t.join();
        for (const auto& e : errors) {
          if (!e.empty()) return Internal(fmt::format("{} clients={}: {}", policy, k, e));
        }
        ATOLL_RETURN_IF_ERROR(w.status());
        for (const auto& [device, busy] : w->busy_us_per_device) {
          utilization.push_back(busy / w->wall_us);
        }
        double total_busy = 0, total_weight = 0;
        for (int c = 0; c < k; ++c) {
          total_busy += w->busy_us_per_client[ids[c]];
          total_weight += WeightOf(c);
        }
        for (int c = 0; c < k; ++c) {
          const double target = policy == "share" ? WeightOf(c) / total_weight : 1.0 / k;
          const double share = w->busy_us_per_client[ids[c]] / total_busy;
          share_error.push_back(std::abs(share - target) / target);
          if (share_error.back() > worst_error) {
            worst_error = share_error.back();
            worst = fmt::format("client {} (weight {}): share {:.4f}, target {:.4f}", c,
                                WeightOf(c), share, target);
          }
        }
      }
      std::vector<double> sorted = utilization;
      std::sort(sorted.begin(), sorted.end());
      fmt::print(
          "{:>5} clients={:>2}: device utilization min {:.3f} median {:.3f}; "
          "share error max {:.3f}, {}\n",
          policy, k, sorted.front(), sorted[sorted.size() / 2],
          *std::max_element(share_error.begin(), share_error.end()), worst);
      std::fflush(stdout);
      result.Add(policy, {{"clients", k}}, "device_utilization", "ratio", utilization);
      result.Add(policy, {{"clients", k}}, "share_error", "ratio", share_error);
    }
    (void)cluster->Stop();
  }
  std::filesystem::remove_all(dir);
  return Status::Ok();
}

}  // namespace
}  // namespace atl::bench

int main(int argc, char** argv) {
  return atl::bench::RunBenchmark(argc, argv, "multitenant",
                                  "device utilisation and fairness with K concurrent clients",
                                  atl::bench::RunSweep);
}
