// Chaos: 16 clients submit checked programs for 60 s while a killer SIGKILLs a random
// service (the RM, a scheduler, an executor, an object store) every few seconds and the
// launcher's supervisor restarts it. Every run either returns the right values or fails
// with an error before its timeout; none returns a wrong value, none hangs; once every
// client has gone, no store holds an object.
#include <signal.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <stop_token>
#include <thread>

#include <fmt/format.h>

#include "common/net/event_reader.h"
#include "common/net/transport.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/member_context.h"
#include "tests/e2e/store_stats.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kClients = 16;
constexpr auto kChaos = 60s;
constexpr auto kRunTimeout = 30s;  // each run's own bound: past it, a run counts as hung

class ChaosTest : public ClusterTest {
 public:
  // Heartbeats of 200 ms x 3: 16 clients and 11 services share two loaded cores, and a
  // client whose heartbeats lapse under load loses its slices like a dead one.
  static void SetUpTestSuite() { StartCluster(ATOLL_SOURCE_DIR "/tests/e2e/liveness.toml"); }

  // Where the event stream goes, beside the services' logs, which a failed suite keeps:
  // a hung run's events say which gang or object it waited for.
  static std::string EventLogPath() { return *state_dir_ + "/logs/events.log"; }
};

// Writes every event of the bus to `path`, one line each, until stopped.
void RecordEvents(std::stop_token stop, const std::string& endpoint, const std::string& path) {
  MemberContext context;
  zmq::socket_t socket = net::MakeSocket(context, zmq::socket_type::sub);
  socket.set(zmq::sockopt::subscribe, "");
  socket.set(zmq::sockopt::rcvhwm, 0);  // a loaded bus must not drop what explains a hang
  if (!net::Connect(socket, endpoint).ok()) return;
  std::ofstream out(path);
  while (!stop.stop_requested()) {
    auto frames = net::RecvFrames(socket, std::chrono::milliseconds(100));
    if (!frames.ok() || !frames->has_value() || (*frames)->size() != 2) continue;
    if (auto event = DecodeEvent((**frames)[0], (**frames)[1]); event.ok()) {
      out << FormatEventLine(*event) << "\n";
    }
  }
}

// What happened to the runs, over all clients.
struct Tally {
  std::mutex mu;
  uint64_t ok = 0;
  uint64_t wrong = 0;
  uint64_t hung = 0;
  uint64_t setups_failed = 0;
  std::map<std::string, uint64_t> failed;  // by error code
  std::vector<std::string> samples;        // a few errors and wrong values, to print

  void Failed(const Status& error) {
    std::lock_guard lock(mu);
    const auto count = ++failed[std::string(CodeName(error.code()))];
    if (count <= 3) samples.push_back(error.ToString());  // a few of each kind
  }
};

// One client's program: x -> (x * 2 + 1) twice over a two-device slice, with an all-reduce
// for odd clients (so that gangs span hosts); its expected value is known in closed form.
struct Workload {
  std::unique_ptr<Client> client;
  Program program;
  std::vector<float> x;
  std::vector<float> want;
};

Result<Workload> StartWorkload(const std::string& rm, int index) {
  Workload w;
  ATOLL_ASSIGN_OR_RETURN(
      w.client, Client::Connect({.rm_endpoint = rm, .name = "chaos-" + std::to_string(index)}));
  const std::string island = index % 2 == 0 ? "island0" : "island1";
  ATOLL_ASSIGN_OR_RETURN(Slice slice, w.client->CreateSlice(2, island));
  const bool reduce = index % 4 >= 2;
  FunctionBuilder b("step");
  Value v = b.Input(DType::kF32, {4}, Sharding::Replicated());
  if (reduce) v = b.AllReduceSum(v);
  b.Output(b.Add(b.Mul(v, 2.0), 1.0));
  ATOLL_ASSIGN_OR_RETURN(Function step, w.client->Register(b, slice));
  ProgramBuilder p;
  Traced t = p.Arg(DType::kF32, {4});
  for (int i = 0; i < 2; ++i) t = p.Call(step, {t})[0];
  p.Return({t});
  ATOLL_ASSIGN_OR_RETURN(w.program, p.Build());
  w.x = {float(index), 1, -2, 0.5};
  w.want = w.x;
  for (int i = 0; i < 2; ++i) {
    for (auto& e : w.want) e = (reduce ? e * 2 : e) * 2 + 1;
  }
  return w;
}

// Runs the client's program until `stop`, counting outcomes. A hung run's sample says
// when it was submitted, in seconds since `start`, to be matched with the kills.
void RunClient(Workload& w, const std::atomic<bool>& stop, Clock::time_point start, Tally& tally) {
  while (!stop.load()) {
    // Submit is bounded by the client's request timeout (its argument puts), Wait by the
    // run's own: a run is hung when Wait takes all of it.
    auto run = w.client->Submit(w.program, {Tensor::F32({4}, w.x)});
    const auto waited_from = Clock::now();
    Result<std::vector<Tensor>> out =
        run.ok() ? run->Wait(kRunTimeout) : Result<std::vector<Tensor>>(run.status());
    if (Clock::now() - waited_from >= kRunTimeout) {
      std::lock_guard lock(tally.mu);
      tally.hung++;
      tally.samples.push_back(
          fmt::format("hung (run {}, submitted at {:.1f} s): {}", run.ok() ? run->id() : 0,
                      std::chrono::duration<double>(waited_from - start).count(),
                      out.ok() ? std::string("late result") : out.status().ToString()));
      continue;
    }
    if (!out.ok()) {
      tally.Failed(out.status());
      continue;
    }
    std::lock_guard lock(tally.mu);
    if (out->at(0) == Tensor::F32({4}, w.want)) {
      tally.ok++;
    } else {
      tally.wrong++;
      tally.samples.push_back("wrong value from " + std::to_string(run->id()));
    }
  }
}

// True when the RM answers and sees every executor, store and scheduler alive.
bool AllAlive(const std::string& rm) {
  MemberContext context;
  net::Requester rm_peer(context, rm);
  if (!rm_peer.Connect().ok()) return false;
  auto status = rm_peer.Call<proto::ClusterStatus>(proto::GetClusterStatus{}, 1s);
  if (!status.ok()) return false;
  for (const auto& island : status->islands) {
    if (!island.scheduler_alive) return false;
    for (const auto& host : island.hosts) {
      if (!host.alive || !host.store_alive) return false;
    }
  }
  return true;
}

TEST_F(ChaosTest, RunsReturnOrFailClearlyWhileServicesDieAndNothingIsLeftBehind) {
  std::vector<Workload> workloads;
  for (int i = 0; i < kClients; ++i) {
    auto w = StartWorkload(RmEndpoint(), i);
    ASSERT_THAT(w, IsOk()) << "client " << i << ": " << w.status().ToString();
    workloads.push_back(std::move(w).value());
  }
  std::jthread recorder(RecordEvents, EventsEndpoint(), EventLogPath());
  Tally tally;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (auto& w : workloads) threads.emplace_back([&] { RunClient(w, stop, start, tally); });

  const std::vector<std::string> services = {"rm",
                                             "scheduler-island0",
                                             "scheduler-island1",
                                             "executor-i0h0",
                                             "executor-i0h1",
                                             "executor-i1h0",
                                             "executor-i1h1",
                                             "objectstore-i0h0",
                                             "objectstore-i0h1",
                                             "objectstore-i1h0",
                                             "objectstore-i1h1"};
  std::mt19937 random(20261124);
  std::map<std::string, int> kills;
  const auto end = Clock::now() + kChaos;
  auto next_kill = Clock::now() + 2s;
  while (Clock::now() < end) {
    if (Clock::now() >= next_kill) {
      const std::string& victim = services[random() % services.size()];
      // Killed behind the launcher's back (Signal() would tell it the exit is expected),
      // so that its supervision restarts it.
      if (auto pid = cluster_->Pid(victim); pid.ok() && kill(*pid, SIGKILL) == 0) {
        kills[victim]++;
        std::cout << fmt::format("{:.1f} s: killed {}\n",
                                 std::chrono::duration<double>(Clock::now() - start).count(),
                                 victim);
      }
      next_kill = Clock::now() + std::chrono::milliseconds(2000 + random() % 2000);
    }
    ASSERT_THAT(cluster_->Supervise(), IsOk());
    std::this_thread::sleep_for(50ms);  // the supervisor's own poll period
  }
  stop = true;
  for (auto& t : threads) t.join();
  // Every service up again, as the RM sees it, before the clients leave, so that their
  // goodbyes are heard.
  const auto settle = Clock::now() + 30s;
  while (!AllAlive(RmEndpoint()) && Clock::now() < settle) {
    ASSERT_THAT(cluster_->Supervise(), IsOk());
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(AllAlive(RmEndpoint())) << "a service was not back within 30 s";
  workloads.clear();  // every client says goodbye

  // Objects go with their owners: at once on goodbye, or after the liveness window of a
  // client whose goodbye a restarting store missed.
  std::map<std::string, uint64_t> left;
  MemberContext context;
  const auto gone = Clock::now() + 30s;
  do {
    ASSERT_THAT(cluster_->Supervise(), IsOk());
    left.clear();
    uint64_t total = 0;
    for (const auto& [host, stats] : StoreStatsByHost(context, RmEndpoint())) {
      left[host] = stats.objects;
      total += stats.objects;
    }
    if (left.size() == 4 && total == 0) break;
    std::this_thread::sleep_for(100ms);
  } while (Clock::now() < gone);

  recorder = {};  // stops and joins: the log is complete

  uint64_t failed = 0;
  for (const auto& [code, n] : tally.failed) failed += n;
  std::cout << "chaos: " << tally.ok << " runs ok, " << failed << " failed clearly (";
  for (const auto& [code, n] : tally.failed) std::cout << code << " " << n << ", ";
  std::cout << "), " << tally.wrong << " wrong, " << tally.hung << " hung; kills:";
  for (const auto& [name, n] : kills) std::cout << " " << name << " " << n;
  std::cout << "\n";
  for (const auto& s : tally.samples) std::cout << "  " << s << "\n";
  RecordProperty("runs_ok", static_cast<int>(tally.ok));
  RecordProperty("runs_failed", static_cast<int>(failed));

  EXPECT_EQ(tally.wrong, 0u);
  EXPECT_EQ(tally.hung, 0u);
  EXPECT_GT(tally.ok, 0u);
  EXPECT_EQ(left.size(), 4u) << "not every store answered";
  for (const auto& [host, n] : left) EXPECT_EQ(n, 0u) << "objects left in the store of " << host;
}

}  // namespace
}  // namespace atl::testing
