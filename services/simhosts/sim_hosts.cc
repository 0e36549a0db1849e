#include "services/simhosts/sim_hosts.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/service/advertise.h"
#include "common/service/service_main.h"
#include "services/objectstore/host_store_options.h"
#include "services/simhosts/process_limits.h"

namespace atl::simhosts {

namespace {

// What one host holds open, measured: sockets (each with its mailbox fd), connections to
// the RM, the event bus and its store (both ends in this process), listening sockets,
// accepted peers and timers. A gang's root host holds a connection to every other host of
// the gang on top (its all-reduce totals); kSpareFiles covers those and the rest.
constexpr uint64_t kFilesPerHost = 48;
constexpr uint64_t kSpareFiles = 1024;
// Threads per host beside its devices': the executor's loop and the store's.
constexpr uint64_t kLoopThreadsPerHost = 2;
// ZeroMQ sockets per host, with room for the data plane's per-peer sockets.
constexpr int kSocketsPerHost = 16;

}  // namespace

SimHosts::SimHosts(int io_threads, int max_sockets) : context_(io_threads, max_sockets) {}

Result<std::unique_ptr<SimHosts>> SimHosts::Start(ClusterConfig config,
                                                  const std::vector<HostPlacement>& hosts,
                                                  std::chrono::milliseconds timeout) {
  std::set<std::string> names;
  uint64_t threads = 0;
  for (const HostPlacement& where : hosts) {
    if (where.host.kind != "sim") {
      return InvalidArgument(fmt::format(
          "host {} has {} devices; atoll-simhosts runs only hosts of kind \"sim\" (start it "
          "as atoll-executor and atoll-objectstore)",
          where.host.name, where.host.kind));
    }
    if (!names.insert(where.host.name).second) {
      return InvalidArgument("host " + where.host.name + " is named twice");
    }
    threads += kLoopThreadsPerHost + where.host.devices;
  }
  if (hosts.empty()) return InvalidArgument("no hosts to simulate");
  ATOLL_RETURN_IF_ERROR(RaiseOpenFileLimit(hosts.size() * kFilesPerHost + kSpareFiles));
  ATOLL_RETURN_IF_ERROR(CheckThreadLimit(threads));

  // A few I/O threads carry every host's traffic: enough that heartbeats and tuples of
  // hundreds of hosts do not queue behind one, few enough for a small machine.
  const int io_threads = static_cast<int>(std::min<size_t>(4, 1 + hosts.size() / 128));
  const int max_sockets = static_cast<int>(hosts.size()) * kSocketsPerHost + 1024;
  std::unique_ptr<SimHosts> sim(new SimHosts(io_threads, max_sockets));
  // Before any socket: each socket takes the keys its context has when it is made.
  ATOLL_ASSIGN_OR_RETURN(sim->zap_, SecureService(sim->context_, config));
  sim->hosts_.reserve(hosts.size());
  for (const HostPlacement& where : hosts) {
    ATOLL_RETURN_IF_ERROR(
        sim->StartHost(config, where, timeout).WithContext("simulated host " + where.host.name));
  }
  spdlog::info("{} simulated hosts registered ({} threads, {} ZeroMQ I/O threads)", hosts.size(),
               threads, io_threads);
  return sim;
}

Status SimHosts::StartHost(const ClusterConfig& config, const HostPlacement& where,
                           std::chrono::milliseconds timeout) {
  Host& host = hosts_.emplace_back();
  host.name = where.host.name;
  ATOLL_ASSIGN_OR_RETURN(
      host.store,
      store::StoreService::Create(
          context_, store::HostStoreOptions(config, where, "tcp://" + config.bind_host + ":*")));
  ATOLL_ASSIGN_OR_RETURN(const std::string store_endpoint,
                         AdvertisedEndpoint(host.store->endpoint(), config));
  host.store_loop = std::thread([store = host.store.get()] { store->Run(); });
  host.executor =
      std::make_unique<executor::ExecutorService>(context_, config, where, store_endpoint);
  // Hundreds of hosts' device threads share this process's cores: spinning would only take
  // the core from the thread that has work.
  host.executor->SetWaitSpin(std::chrono::microseconds(0));
  ATOLL_RETURN_IF_ERROR(host.executor->Start(timeout));
  host.executor_loop = std::thread([executor = host.executor.get()] { executor->Run(); });
  return Status::Ok();
}

void SimHosts::Stop() {
  for (Host& host : hosts_) {
    if (host.executor) host.executor->Stop();
    if (host.store) host.store->Stop();
  }
}

void SimHosts::Wait() {
  for (Host& host : hosts_) {
    if (host.executor_loop.joinable()) host.executor_loop.join();
    if (host.store_loop.joinable()) host.store_loop.join();
  }
}

SimHosts::~SimHosts() {
  Stop();
  Wait();
  // Executors first: each one's device threads may still talk to its store.
  for (Host& host : hosts_) host.executor.reset();
  hosts_.clear();
}

std::map<std::string, std::string> SimHosts::ReadyValues() const {
  std::map<std::string, std::string> values = {{"hosts", std::to_string(hosts_.size())}};
  for (const Host& host : hosts_) values["arena_" + host.name] = host.store->arena_name();
  return values;
}

}  // namespace atl::simhosts
