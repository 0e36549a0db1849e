// Fuzzing a running cluster from the wire: real messages of every kind (and tuple batches,
// and events) are recorded, mutated (wire_mutator.h) and sent, at least 100,000 of them,
// to every endpoint of a local cluster: the RM's request socket and event input, each
// scheduler, each executor's control and data sockets, each object store. Afterwards:
//  (a) every service process still runs, and the Figure 2 program still gives the paper's
//      result;
//  (b) no service's resident memory grew by more than kRssGrowthBound;
//  (c) once the clients the fuzzing made up would have been collected (no heartbeat for a
//      liveness window), the stores hold objects of live clients only, and the RM counts
//      live clients only.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/net/event_reader.h"
#include "common/net/transport.h"
#include "launcher/process.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/figure2_program.h"
#include "tests/e2e/member_context.h"
#include "tests/e2e/wire_mutator.h"
#include "tests/e2e/wire_sender.h"
#include "tests/fuzz/sample_messages.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kMessages = 100'000;  // to the request sockets; events come on top
constexpr uint64_t kSeed = 20240516;
// Far below what would show a leak per message (100,000 messages leaking even 1 KiB each
// is 100 MiB), far above what a service's allocator keeps after a burst: ZeroMQ's and the
// heap's caches, and the object store's arena pages that accepted objects touched (at
// most a few MiB of the fuzzing's small tensors).
constexpr int64_t kRssGrowthBound = int64_t{64} << 20;
// A sanitized build's resident size says nothing about leaks: AddressSanitizer keeps freed
// memory in a quarantine (256 MiB by default) and both sanitizers map shadow memory as it is
// touched. There, LeakSanitizer checks every service as it exits instead.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kRssShowsLeaks = false;
#else
constexpr bool kRssShowsLeaks = true;
#endif
// How long the test may send: the bound on its runtime, not a pace.
constexpr auto kSendBudget = 60s;
// How long the services may take, once the fuzzing stops, to work through the messages
// still queued for them and notice what lapsed meanwhile: seconds under CURVE, more under
// a sanitizer. A bound, not a pace: each wait ends as soon as what it awaits holds.
constexpr auto kSettleBound = 60s;

// A socket of a service to fuzz.
struct Target {
  std::string service;  // "rm", "executor-i0h0", ...
  std::string what;     // "endpoint", "control", "data", "events_in"
  std::string endpoint;
  zmq::socket_type type = zmq::socket_type::dealer;
};

std::vector<Target> TargetsOf(const ClusterInfo& info) {
  std::vector<Target> targets;
  for (const auto& p : info.processes) {
    for (const auto& [what, endpoint] : p.endpoints) {
      if (what == "endpoint" || what == "control" || what == "data") {
        targets.push_back({p.name, what, endpoint, zmq::socket_type::dealer});
      } else if (what == "events_in") {
        targets.push_back({p.name, what, endpoint, zmq::socket_type::pub});
      }
    }
  }
  return targets;
}

// VmRSS of `pid` in bytes; -1 when it cannot be read.
int64_t ResidentBytes(int64_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      int64_t kib = 0;
      status >> kib;
      return kib << 10;
    }
    status.ignore(1 << 10, '\n');
  }
  return -1;
}

std::map<std::string, int64_t> ResidentByService(const ClusterInfo& info) {
  std::map<std::string, int64_t> rss;
  for (const auto& p : info.processes) rss[p.name] = ResidentBytes(p.pid);
  return rss;
}

std::vector<WireMessage> AsWire(const std::vector<fuzz::SampleMessage>& samples) {
  std::vector<WireMessage> out;
  for (const auto& s : samples) {
    WireMessage& m = out.emplace_back();
    for (const auto& frame : s.frames) m.push_back(frame.to_string());
  }
  return out;
}

Status RunFigure2(const std::string& rm) {
  ATOLL_ASSIGN_OR_RETURN(auto client, Client::Connect({.rm_endpoint = rm, .name = "figure2"}));
  ATOLL_ASSIGN_OR_RETURN(Program program, TraceFigure2(*client, {2}));
  ATOLL_ASSIGN_OR_RETURN(auto run, client->Submit(program, {Tensor::F32({2}, {1, 2})}));
  ATOLL_ASSIGN_OR_RETURN(std::vector<Tensor> out, run.Wait(20s));
  if (out.size() != 2 || out[0] != Tensor::F32({2}, {2, 3}) || out[1] != Tensor::F32({2}, {2, 4})) {
    return Internal("Figure 2 gave wrong results");
  }
  return Status::Ok();
}

class WireFuzzTest : public ClusterTest {
 protected:
  // Each object store's statistics, by service name (only the configured hosts' stores:
  // the RM may also list hosts that fuzzed registrations made up).
  std::map<std::string, proto::StoreStats> StoreStats() {
    std::map<std::string, proto::StoreStats> out;
    for (const auto& p : cluster_->info().processes) {
      if (p.role != "objectstore") continue;
      net::Requester store(context_, p.endpoints.at("endpoint"));
      EXPECT_THAT(store.Connect(), IsOk());
      auto stats = store.Call<proto::StoreStats>(proto::GetStoreStats{}, 5s);
      EXPECT_THAT(stats, IsOk()) << p.name << ": " << stats.status().ToString();
      if (stats.ok()) out[p.name] = *stats;
    }
    return out;
  }

  Result<proto::ClusterStatus> ClusterStatus() {
    net::Requester rm(context_, RmEndpoint());
    ATOLL_RETURN_IF_ERROR(rm.Connect());
    return rm.Call<proto::ClusterStatus>(proto::GetClusterStatus{}, 5s);
  }

  // The owners that have objects in some store.
  std::set<uint64_t> Owners() {
    std::set<uint64_t> owners;
    for (const auto& [store, stats] : StoreStats()) {
      for (const auto& [owner, n] : stats.objects_per_owner) {
        if (n > 0) owners.insert(owner);
      }
    }
    return owners;
  }

  // The hosts that the RM deems alive.
  std::set<std::string> AliveHosts() {
    std::set<std::string> alive;
    auto status = ClusterStatus();
    if (!status.ok()) return alive;
    for (const auto& island : status->islands) {
      for (const auto& host : island.hosts) {
        if (host.alive) alive.insert(host.name);
      }
    }
    return alive;
  }

  std::set<std::string> ConfiguredHosts() const {
    std::set<std::string> hosts;
    for (const auto& island : cluster_->config().islands) {
      for (const auto& host : island.hosts) hosts.insert(host.name);
    }
    return hosts;
  }

  // Waits at most `timeout` for `done`, checking every heartbeat period, and says how long
  // it took.
  template <typename Done>
  bool AwaitUpTo(std::chrono::milliseconds timeout, Done done) {
    const auto start = Clock::now();
    while (!done()) {
      if (Clock::now() >= start + timeout) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(cluster_->config().heartbeat_ms));
    }
    std::cout << "settled after " << std::chrono::duration<double>(Clock::now() - start).count()
              << " s\n";
    return true;
  }

  MemberContext context_;  // fuzzing as a member reaches every socket, executors included
};

TEST_F(WireFuzzTest, MutatedRealMessagesToEveryEndpointLeaveTheClusterWorking) {
  const ClusterInfo& info = cluster_->info();
  const std::vector<Target> targets = TargetsOf(info);
  // The RM (request socket, event input), a store and an executor (control, data) per
  // host, a scheduler per island.
  const size_t hosts = ConfiguredHosts().size();
  ASSERT_EQ(targets.size(), 2 + 3 * hosts + cluster_->config().islands.size());

  // A real program first, so that the memory measured before is that of a cluster that
  // has run something (its pools and caches warm).
  Status warm = RunFigure2(RmEndpoint());
  ASSERT_THAT(warm, IsOk());
  const std::map<std::string, int64_t> rss_before = ResidentByService(info);

  // A watcher of the event stream, decoding everything the fuzzing publishes.
  zmq::socket_t watcher = net::MakeSocket(context_, zmq::socket_type::sub);
  watcher.set(zmq::sockopt::subscribe, "");
  ASSERT_THAT(net::Connect(watcher, EventsEndpoint()), IsOk());
  uint64_t events_seen = 0;
  auto watch = [&] {
    while (true) {
      auto frames = net::RecvFrames(watcher, 0ms);
      if (!frames.ok() || !frames->has_value()) return;
      ++events_seen;
      auto& f = **frames;
      if (f.size() == 2) {
        auto event = DecodeEvent(f[0], f[1]);
        if (event.ok()) (void)FormatEventLine(*event);
      }
    }
  };

  std::vector<fuzz::SampleMessage> samples = fuzz::SampleMessages();
  WireMutator requests(AsWire(samples), kSeed);
  WireMutator events(AsWire(fuzz::SampleEvents()), kSeed + 1);
  std::vector<WireSender> senders;
  for (const Target& t : targets) {
    senders.emplace_back(context_, t.type, t.endpoint);
    ASSERT_THAT(senders.back().Connect(), IsOk()) << t.endpoint;
  }

  const auto start = Clock::now();
  uint64_t request_sent = 0, replies = 0, full = 0;
  while (request_sent < kMessages && Clock::now() - start < kSendBudget) {
    bool any_sent = false;
    for (size_t i = 0; i < senders.size(); ++i) {
      const bool is_events = targets[i].type == zmq::socket_type::pub;
      auto sent = senders[i].TrySend(is_events ? events.Next() : requests.Next());
      ASSERT_THAT(sent, IsOk());
      if (!is_events) {
        request_sent += *sent ? 1 : 0;
        full += *sent ? 0 : 1;
        any_sent |= *sent;
      }
      replies += senders[i].DrainReplies();
    }
    watch();
    // Every service's queue full: wait until one takes more (or answers), not spinning.
    if (!any_sent) {
      std::vector<zmq::pollitem_t> items;
      for (auto& s : senders) items.push_back({s.handle(), 0, ZMQ_POLLOUT | ZMQ_POLLIN, 0});
      zmq::poll(items, 10ms);
    }
  }
  const double send_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::map<std::string, uint64_t> sent_to;
  for (size_t i = 0; i < senders.size(); ++i) {
    sent_to[targets[i].service + " " + targets[i].what] = senders[i].sent();
  }
  senders.clear();
  std::string per_target;
  for (const auto& [target, n] : sent_to) per_target += " " + target + "=" + std::to_string(n);
  RecordProperty("messages", std::to_string(request_sent));
  std::cout << "sent " << request_sent << " mutated messages in " << send_s << " s (" << full
            << " times a peer was full), " << replies << " replies, " << events_seen << " events;"
            << per_target << "\n";
  EXPECT_GE(request_sent, kMessages) << "in " << send_s << " s;" << per_target;

  // (a) Every service still runs ...
  for (const auto& p : info.processes) {
    auto exit = cluster_->ExitStatus(p.name);
    ASSERT_THAT(exit, IsOk());
    EXPECT_FALSE(exit->has_value()) << p.name << " " << (*exit)->Describe() << "; log " << p.log;
  }
  if (HasFailure()) return;

  // ... and, once the hosts the fuzzing registered are lost (no heartbeats), a real
  // program runs as before.
  const std::set<std::string> configured = ConfiguredHosts();
  EXPECT_TRUE(AwaitUpTo(kSettleBound, [&] { return AliveHosts() == configured; }));
  Status after = RunFigure2(RmEndpoint());
  EXPECT_THAT(after, IsOk());

  // (b) No service grew beyond the bound (unsanitized builds).
  const std::map<std::string, int64_t> rss_after = ResidentByService(info);
  for (const auto& [service, before] : rss_before) {
    const int64_t grew = rss_after.at(service) - before;
    std::cout << service << ": VmRSS " << (before >> 10) << " KiB -> "
              << (rss_after.at(service) >> 10) << " KiB\n";
    if (kRssShowsLeaks) {
      EXPECT_LE(grew, kRssGrowthBound) << service << " grew by " << (grew >> 20) << " MiB";
    }
  }

  // (c) The clients the fuzzing made up are collected a liveness window after their last
  // message (the Figure 2 clients said goodbye): no store keeps objects, and the RM counts
  // no client.
  std::set<uint64_t> owners;
  const bool collected = AwaitUpTo(kSettleBound, [&] {
    owners = Owners();
    return owners.empty();
  });
  std::string left;
  for (uint64_t owner : owners) left += " " + std::to_string(owner);
  EXPECT_TRUE(collected) << "objects owned by no live client are left, owners:" << left;
  for (const auto& [store, stats] : StoreStats()) {
    EXPECT_EQ(stats.objects, 0u) << store;
  }
  uint32_t clients = 0;
  EXPECT_TRUE(AwaitUpTo(kSettleBound,
                        [&] {
                          auto status = ClusterStatus();
                          clients = status.ok() ? status->clients : ~0u;
                          return clients == 0;
                        }))
      << "the RM still counts " << clients << " clients";
}

}  // namespace
}  // namespace atl::testing
