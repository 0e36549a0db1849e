// A host lost under load: eight clients run chains of all-reduces on 4-device slices that
// span both hosts of island0, and one of those hosts' executor is SIGKILLed. Every run it
// cut short fails naming the host, none waits out the executors' 30 s collective timeout,
// and the surviving host's devices serve a new program at once: with the clients still
// there, and again once they are gone.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/event_recorder.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kClients = 8;
constexpr int kCallsPerClient = 8;
constexpr double kStepSpinUs = 20e3;  // each call's device time after its all-reduce
constexpr char kVictim[] = "i0h1";

// Its own cluster (tests/e2e/liveness.toml, heartbeats of 200 ms x 3): the test kills one
// of its executors for good.
class HostLossTest : public ClusterTest {
 public:
  static void SetUpTestSuite() { StartCluster(ATOLL_SOURCE_DIR "/tests/e2e/liveness.toml"); }

 protected:
  // step(x) = spin(all_reduce_sum(x)) + 1 over `slice`, x replicated, as a one-call program.
  // The all-reduce comes first: a step queued behind the loss fails there without spinning.
  static Program StepProgram(Client& client, const Slice& slice) {
    FunctionBuilder b("step");
    Value x = b.Input(DType::kF32, {2}, Sharding::Replicated());
    b.Output(b.Add(b.Spin(b.AllReduceSum(x), kStepSpinUs), 1.0));
    Function step = client.Register(b, slice).value();
    ProgramBuilder p;
    p.Return({p.Call(step, {p.Arg(DType::kF32, {2})})[0]});
    return p.Build().value();
  }

  // A new client runs a 2-device all-reduce on island0, whose only live devices are the
  // surviving host's; returns how long it took from submission to its result.
  static Clock::duration RunOnLiveDevices(const std::string& name) {
    auto client = Connect(name);
    EXPECT_NE(client, nullptr);
    if (client == nullptr) return Clock::duration::max();
    auto slice = client->CreateSlice(2, "island0");
    EXPECT_THAT(slice, IsOk());
    if (!slice.ok()) return Clock::duration::max();
    const Program program = StepProgram(*client, *slice);
    const auto start = Clock::now();
    auto run = client->Submit(program, {Tensor::F32({2}, {1, 2})});
    EXPECT_THAT(run, IsOk());
    if (!run.ok()) return Clock::duration::max();
    auto out = run->Wait(60s);
    const auto took = Clock::now() - start;
    EXPECT_THAT(out, IsOk()) << name << ": " << out.status().ToString();
    if (out.ok()) {
      EXPECT_EQ(out->at(0), Tensor::F32({2}, {3, 5}));
    }
    return took;
  }
};

long long Ms(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

TEST_F(HostLossTest, ALostHostFailsEveryCollectiveWithItAtOnceAndFreesTheSurvivorsDevices) {
  struct Chain {
    std::unique_ptr<Client> client;
    std::vector<atl::Run> runs;  // each call's input is the previous call's result
  };
  std::vector<Chain> chains(kClients);
  for (int c = 0; c < kClients; ++c) {
    chains[c].client = Connect("chain-" + std::to_string(c));
    ASSERT_NE(chains[c].client, nullptr);
  }
  EventRecorder events(EventsEndpoint());
  for (auto& chain : chains) {
    // Island0 has 2 hosts x 2 devices: the slice covers every device of both.
    auto slice = chain.client->CreateSlice(4, "island0");
    ASSERT_THAT(slice, IsOk());
    const Program program = StepProgram(*chain.client, *slice);
    for (int i = 0; i < kCallsPerClient; ++i) {
      auto run = i == 0 ? chain.client->Submit(program, {Tensor::F32({2}, {1, -1})})
                        : chain.client->Submit(program, {chain.runs.back().Output(0)});
      ASSERT_THAT(run, IsOk());
      chain.runs.push_back(std::move(run).value());
    }
  }
  // Killed once the victim has run a gang: the rest of the chains are queued or running.
  ASSERT_TRUE(events
                  .WaitFor(
                      "gang.done", [](const Event& e) { return e.fields["host"] == kVictim; }, 30s)
                  .has_value());
  const auto killed_at = Clock::now();
  ASSERT_THAT(cluster_->Signal(std::string("executor-") + kVictim, SIGKILL), IsOk());

  // The RM declares the host lost within `liveness` periods of its last heartbeat, which
  // came at most a period before the kill, plus a quarter period (how often it looks); the
  // notice then reaches clients at once, and a client looks every quarter period: every
  // affected run has failed within the liveness window plus one period of the kill.
  const ClusterConfig& config = cluster_->config();
  const auto bound = std::chrono::milliseconds(config.heartbeat_ms) * (config.liveness + 1);
  // Each client waits for its own chain, all at once: what is measured is when each run
  // failed, not how long one thread took to look at every run in turn.
  struct Outcome {
    int completed = 0;
    int failed = 0;
    Clock::duration last_failure{};
    std::vector<std::string> wrong;  // unexpected values or errors
  };
  std::vector<Outcome> outcomes(chains.size());
  std::vector<std::thread> waiters;
  for (size_t c = 0; c < chains.size(); ++c) {
    waiters.emplace_back([&, c] {
      Outcome& o = outcomes[c];
      std::vector<float> want = {1, -1};
      for (atl::Run& run : chains[c].runs) {
        for (auto& v : want) v = 4 * v + 1;
        // Far beyond the bound, and beyond the 30 s collective timeout: a hang shows as one.
        auto out = run.Wait(0, 45s);
        const auto since_kill = Clock::now() - killed_at;
        if (out.ok()) {
          o.completed++;
          if (*out != Tensor::F32({2}, want))
            o.wrong.push_back("wrong value: run " + std::to_string(run.id()));
          continue;
        }
        o.failed++;
        o.last_failure = std::max(o.last_failure, since_kill);
        if (out.status().message().find(kVictim) == std::string::npos) {
          o.wrong.push_back(out.status().ToString());
        }
      }
    });
  }
  for (auto& t : waiters) t.join();
  int completed = 0;
  int failed = 0;
  Clock::duration last_failure{};
  for (const auto& o : outcomes) {
    completed += o.completed;
    failed += o.failed;
    last_failure = std::max(last_failure, o.last_failure);
    for (const auto& w : o.wrong) ADD_FAILURE() << w;
  }
  std::cout << completed << " runs completed before the kill, " << failed
            << " failed; the last failure came " << Ms(last_failure) << " ms after the kill (bound "
            << Ms(bound) << " ms)\n";
  RecordProperty("last_failure_after_kill_ms", static_cast<int>(Ms(last_failure)));
  EXPECT_GT(failed, 0) << "the kill cut no run short";
  EXPECT_LE(last_failure, bound);

  // The surviving host's devices are free: a new program runs there at once, far within
  // the 30 s a collective waited for the lost host before.
  const auto with_clients = RunOnLiveDevices("after-loss");
  const auto done_after_kill = Clock::now() - killed_at;
  std::cout << "a new program on the live devices took " << Ms(with_clients) << " ms, done "
            << Ms(done_after_kill) << " ms after the kill\n";
  RecordProperty("new_program_done_after_kill_ms", static_cast<int>(Ms(done_after_kill)));
  EXPECT_LT(with_clients, 5s);

  // Again once the clients that had queued the work are gone.
  for (auto& chain : chains) chain.runs.clear();
  chains.clear();
  const auto without_clients = RunOnLiveDevices("after-clients");
  std::cout << "and " << Ms(without_clients) << " ms once the clients were gone\n";
  EXPECT_LT(without_clients, 5s);
}

}  // namespace
}  // namespace atl::testing
