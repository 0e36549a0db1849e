// atoll-bench-objectstore: what moving 64 MiB through a host's object store costs, against
// this machine's memcpy bandwidth measured in the same run. A local client's put and get
// copy through the store's shared-memory region (LocalStoreClient); a host<->device move
// copies between the region's arena and a device's pool. The same put and get with the
// bytes through the store's socket are measured for comparison.
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "bench/common/bench_args.h"
#include "bench/common/bench_cluster.h"
#include "bench/common/bench_result.h"
#include "common/net/transport.h"
#include "launcher/local_cluster.h"
#include "services/objectstore/local_store_client.h"

namespace atl::bench {
namespace {

constexpr uint64_t kBytes = uint64_t{64} << 20;
constexpr auto kTimeout = std::chrono::seconds(30);

// One host, one device: enough memory for a few 64 MiB objects in each pool.
BenchTopology ClusterTopology() {
  BenchTopology topology;
  topology.kind = "cpu";
  topology.liveness = 8;
  topology.device_memory_mb = 256;
  topology.arena_mb = 256;
  return topology;
}

// GB/s of one timed call moving kBytes; `prepare` runs untimed before each.
Result<std::vector<double>> Measure(int runs, const std::function<Status()>& prepare,
                                    const std::function<Status()>& body) {
  std::vector<double> gbps;
  for (int r = 0; r < runs; ++r) {
    ATOLL_RETURN_IF_ERROR(prepare());
    const auto start = std::chrono::steady_clock::now();
    ATOLL_RETURN_IF_ERROR(body());
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    gbps.push_back(static_cast<double>(kBytes) / took.count() / 1e9);
  }
  return gbps;
}

Result<std::string> StoreEndpoint(zmq::context_t& context, const std::string& rm) {
  net::Requester peer(context, rm);
  ATOLL_RETURN_IF_ERROR(peer.Connect());
  ATOLL_ASSIGN_OR_RETURN(auto status,
                         peer.Call<proto::ClusterStatus>(proto::GetClusterStatus{}, kTimeout));
  for (const auto& island : status.islands) {
    for (const auto& host : island.hosts) return host.store_endpoint;
  }
  return NotFound("the cluster has no host");
}

Status MeasureAll(const BenchOptions& options, BenchResult& result) {
  const int runs = options.quick ? 5 : 20;
  const std::string dir =
      std::filesystem::temp_directory_path() / fmt::format("atoll-bench-objectstore-{}", getpid());
  ATOLL_ASSIGN_OR_RETURN(std::unique_ptr<LocalCluster> cluster,
                         StartBenchCluster(dir, ClusterToml(ClusterTopology()), ATOLL_BIN_DIR));
  zmq::context_t context;
  ATOLL_ASSIGN_OR_RETURN(const std::string endpoint,
                         StoreEndpoint(context, cluster->info().rm_endpoint));
  ATOLL_ASSIGN_OR_RETURN(auto local, store::LocalStoreClient::Connect(context, endpoint, kTimeout));
  net::Requester socket_peer(context, endpoint);
  ATOLL_RETURN_IF_ERROR(socket_peer.Connect());

  // Touched once, so that page faults are not part of any timing.
  std::vector<std::byte> src(kBytes, std::byte{1}), dst(kBytes, std::byte{0});
  const Shape shape{static_cast<int64_t>(kBytes / 4)};
  const int32_t host = proto::CreateObject::kHost;
  uint64_t next = 1;
  auto none = [] { return Status::Ok(); };
  const Params params{{"mib", 64}};

  ATOLL_ASSIGN_OR_RETURN(auto memcpy_gbps, Measure(runs, none, [&] {
                           std::memcpy(dst.data(), src.data(), kBytes);
                           return Status::Ok();
                         }));
  result.Add("memcpy", params, "bandwidth", "GB/s", memcpy_gbps);

  // Put: each run makes a new object and frees the last one untimed.
  uint64_t last = 0;
  auto drop_last = [&] {
    return last == 0 ? Status::Ok() : local->Release(std::exchange(last, 0));
  };
  ATOLL_ASSIGN_OR_RETURN(auto put_gbps, Measure(runs, drop_last, [&] {
                           last = next++;
                           return local->Put(last, 0, 0, DType::kF32, shape, src, host);
                         }));
  result.Add("shm put", params, "bandwidth", "GB/s", put_gbps);

  // Get of the object the last put left.
  ATOLL_ASSIGN_OR_RETURN(auto get_gbps,
                         Measure(runs, none, [&] { return local->Get(last, 0, dst, kTimeout); }));
  result.Add("shm get", params, "bandwidth", "GB/s", get_gbps);

  // Host -> device and back: arena to the device's pool, region to region.
  const uint64_t on_host = last;
  uint64_t moved = 0;
  auto drop_moved = [&] {
    return moved == 0 ? Status::Ok() : local->Release(std::exchange(moved, 0));
  };
  ATOLL_ASSIGN_OR_RETURN(auto h2d_gbps, Measure(runs, drop_moved, [&] {
                           moved = next++;
                           return local->Copy(on_host, 0, moved, 0, /*device=*/0);
                         }));
  result.Add("host->device", params, "bandwidth", "GB/s", h2d_gbps);
  const uint64_t on_device = std::exchange(moved, 0);
  ATOLL_ASSIGN_OR_RETURN(auto d2h_gbps, Measure(runs, drop_moved, [&] {
                           moved = next++;
                           return local->Copy(on_device, 0, moved, 0, host);
                         }));
  result.Add("device->host", params, "bandwidth", "GB/s", d2h_gbps);
  ATOLL_RETURN_IF_ERROR(drop_moved());
  ATOLL_RETURN_IF_ERROR(local->Release(on_device));

  // The same put and get with the bytes through the socket.
  ATOLL_ASSIGN_OR_RETURN(auto socket_put_gbps, Measure(runs, drop_last, [&] {
                           last = next++;
                           net::Frames data;
                           data.emplace_back(src.data(), kBytes);
                           return socket_peer
                               .Call<proto::Ok>(proto::PutObject{last, 0, 0, DType::kF32, shape},
                                                kTimeout, std::move(data))
                               .status();
                         }));
  result.Add("socket put", params, "bandwidth", "GB/s", socket_put_gbps);
  ATOLL_ASSIGN_OR_RETURN(
      auto socket_get_gbps, Measure(runs, none, [&] {
        net::Frames data;
        ATOLL_RETURN_IF_ERROR(socket_peer
                                  .Call<proto::GetObjectReply>(proto::GetObject{last, 0, 0, true},
                                                               kTimeout, {}, &data)
                                  .status());
        if (data.size() != 1 || data[0].size() != kBytes) {
          return Internal("socket get: no 64 MiB data frame");
        }
        std::memcpy(dst.data(), data[0].data(), kBytes);
        return Status::Ok();
      }));
  result.Add("socket get", params, "bandwidth", "GB/s", socket_get_gbps);
  ATOLL_RETURN_IF_ERROR(drop_last());

  const double base = Median(memcpy_gbps);
  result.Derive("shm_put_over_memcpy", Median(put_gbps) / base);
  result.Derive("shm_get_over_memcpy", Median(get_gbps) / base);
  result.Derive("host_to_device_over_memcpy", Median(h2d_gbps) / base);
  result.Derive("device_to_host_over_memcpy", Median(d2h_gbps) / base);
  result.Derive("socket_put_over_memcpy", Median(socket_put_gbps) / base);
  result.Derive("socket_get_over_memcpy", Median(socket_get_gbps) / base);
  cluster.reset();
  std::filesystem::remove_all(dir);
  return Status::Ok();
}

}  // namespace
}  // namespace atl::bench

int main(int argc, char** argv) {
  return atl::bench::RunBenchmark(
      argc, argv, "objectstore",
      "64 MiB put/get and host<->device moves through the object store against memcpy",
      atl::bench::MeasureAll);
}
