// A checkpoint of 256 MiB saved and loaded back while the store that writes and reads it
// keeps serving: its files are written and read on the store's checkpoint thread, not its
// event loop (services/objectstore/checkpoint_worker.h). Another client's runs, whose
// results that same store answers, go on throughout; the RM never declares the store lost;
// the save and the load stall the store's loop for under half the liveness window (the
// longest stall its heartbeats carry, `atoll status --json`, read before and after them:
// the weights' put before them copies on the loop too); and the tensor loaded back is the
// one that was put. With the checkpoint files written on the loop (before), the RM declared
// the store lost during this test.
//
// Alone (SERIAL): it bounds a stall, which another cluster on the same two cores stretches.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/net/event_topics.h"
#include "common/net/events.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/event_recorder.h"
#include "tests/launcher/subprocess.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// tests/e2e/big_checkpoint.toml: heartbeats of 100 ms, 10 missed make a service lost.
constexpr auto kHeartbeat = 100ms;
constexpr auto kLivenessWindow = 10 * kHeartbeat;
constexpr int64_t kRows = 8192, kCols = 8192;  // f32: 256 MiB
constexpr char kHost[] = "h0";

class BigCheckpointTest : public ClusterTest {
 public:
  static void SetUpTestSuite() { StartCluster(ATOLL_SOURCE_DIR "/tests/e2e/big_checkpoint.toml"); }
};

// What another client sees meanwhile: tiny runs on the same host, each result read back
// from its store and checked.
struct ProbeFigures {
  std::atomic<int> answers = 0;
  int wrong = 0;
  Clock::duration longest{0};
  std::string error;
};

void Probe(const std::atomic<bool>& done, ProbeFigures& out) {
  auto client = ClusterTest::Connect("probe");
  if (client == nullptr) {
    out.error = "the probe did not connect";
    return;
  }
  auto slice = client->CreateSlice(1, "island0");
  if (!slice.ok()) {
    out.error = slice.status().ToString();
    return;
  }
  FunctionBuilder f("plus_one");
  f.Output(f.Add(f.Input(DType::kF32, {4}), 1.0));
  auto fn = client->Register(f, *slice);
  ProgramBuilder p;
  if (fn.ok()) p.Return(p.Call(*fn, {p.Arg(DType::kF32, {4})}));
  auto program = fn.ok() ? p.Build() : Result<Program>(fn.status());
  if (!program.ok()) {
    out.error = program.status().ToString();
    return;
  }
  for (float i = 0; !done.load(); ++i) {
    const Tensor x = Tensor::F32({4}, {i, -i, 2 * i, 0.5f});
    const auto start = Clock::now();
    auto run = client->Submit(*program, {x});
    auto values = run.ok() ? run->Wait(30s) : Result<std::vector<Tensor>>(run.status());
    out.longest = std::max(out.longest, Clock::now() - start);
    if (!values.ok()) {
      out.error = values.status().ToString();
      return;
    }
    ++out.answers;
    // The oracle: the same sums on the host.
    out.wrong += !((*values)[0] == Tensor::F32({4}, {i + 1, -i + 1, 2 * i + 1, 1.5f}));
  }
}

// The store's longest loop stall, as its last heartbeat told the RM.
int64_t StoreStallUs() {
  const CommandResult status = RunCommand(ClusterTest::AtollCommand({"status", "--json"}));
  EXPECT_EQ(status.exit_code, 0) << status.Describe();
  if (status.exit_code != 0) return -1;
  const nlohmann::json json = nlohmann::json::parse(status.out);
  for (const auto& island : json.at("islands")) {
    for (const auto& host : island.at("hosts")) {
      if (host.at("name").get<std::string>() == kHost) {
        return host.at("store_longest_stall_us").get<int64_t>();
      }
    }
  }
  ADD_FAILURE() << "host " << kHost << " is not in `atoll status`: " << status.out;
  return -1;
}

// Reads `events` up to the store's second stats after `after_us` (its clock), keeping the
// losses of a host or a store in `lost`: by then the store has sent the RM a heartbeat
// carrying its longest stall (heartbeats are not events).
void AwaitStoreStats(EventRecorder& events, int64_t after_us, std::vector<Event>& lost) {
  int stats_after = 0;
  for (auto e = events.Next(10s); e; e = events.Next(10s)) {
    if (e->topic == topics::kHostStoreLost || e->topic == topics::kHostLost) lost.push_back(*e);
    if (e->topic == topics::kStoreStats && e->fields.value("host", "") == kHost &&
        e->fields.value("ts_us", int64_t{0}) > after_us && ++stats_after == 2) {
      return;
    }
  }
  ADD_FAILURE() << "the store published no stats for 10 s";
}

TEST_F(BigCheckpointTest, A256MiBCheckpointIsSavedAndLoadedWhileTheStoreKeepsServing) {
  EventRecorder events(EventsEndpoint());
  auto client = Connect("trainer");
  ASSERT_NE(client, nullptr);
  auto slice = client->CreateSlice(4, "island0");
  ASSERT_THAT(slice, IsOk());

  // The weights: f32[8192, 8192], cut by rows over the four devices; the host array is the
  // oracle.
  std::vector<float> host(static_cast<size_t>(kRows * kCols));
  uint32_t state = 12345;
  for (float& v : host) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(static_cast<int32_t>(state)) * 0x1p-31f;
  }
  const Tensor weights = Tensor::F32({kRows, kCols}, host);
  FunctionBuilder f("weights");
  f.Output(f.Cast(f.Input(DType::kF32, {kRows, kCols}, Sharding::Split(0)), DType::kF32));
  auto fn = client->Register(f, *slice);
  ASSERT_THAT(fn, IsOk());
  ProgramBuilder p;
  p.Return(p.Call(*fn, {p.Arg(DType::kF32, {kRows, kCols})}));
  auto program = p.Build();
  ASSERT_THAT(program, IsOk());
  auto run = client->Submit(*program, {weights});
  ASSERT_THAT(run, IsOk());

  // The weights' 64 MiB shards put and copied on the store's loop (on a loaded machine, a
  // stall of its own): the stall before the checkpoint is taken once they ran.
  std::vector<Event> lost;
  int shards_done = 0;
  for (auto e = events.Next(60s); e && shards_done < 4; e = events.Next(60s)) {
    shards_done +=
        e->topic == topics::kGangDone && e->fields.value("run", uint64_t{0}) == run->id();
  }
  ASSERT_EQ(shards_done, 4) << "the weights' run did not finish within a minute";
  AwaitStoreStats(events, NowMicros(), lost);
  const int64_t stall_before_us = StoreStallUs();

  std::atomic<bool> done{false};
  ProbeFigures probe;
  std::thread prober(Probe, std::cref(done), std::ref(probe));
  const auto start = Clock::now();
  const Status saved = client->Save({{"w", run->Output(0)}}, "big", 120s);
  const auto saved_at = Clock::now();
  auto loaded = client->Load("big", *slice, {.timeout = 120s});
  const auto loaded_at = Clock::now();
  // The stall of the save and the load: read before the weights are read back, which copies
  // all 256 MiB into replies on the store's loop (a cost of reading, not of checkpoints).
  AwaitStoreStats(events, NowMicros(), lost);
  const int64_t stall_us = StoreStallUs();
  Result<Tensor> back = loaded.ok() ? loaded->run.Wait(0, 120s) : Result<Tensor>(loaded.status());
  const int answers_meanwhile = probe.answers;
  done.store(true);
  prober.join();
  AwaitStoreStats(events, NowMicros(), lost);

  ASSERT_THAT(saved, IsOk());
  ASSERT_THAT(loaded, IsOk());
  ASSERT_THAT(back, IsOk());
  ASSERT_EQ(back->shape(), (Shape{kRows, kCols}));
  EXPECT_TRUE(std::memcmp(back->data(), host.data(), back->nbytes()) == 0)
      << "the loaded weights differ from those put";

  // The other client was answered throughout, every answer right. (Its slowest answer is
  // printed, not bounded: it also waits for the executor, busy with the weights' run at
  // first, on two cores shared with whatever else runs.)
  EXPECT_TRUE(probe.error.empty()) << probe.error;
  EXPECT_EQ(probe.wrong, 0);
  EXPECT_GE(probe.answers, 3) << "the probe was hardly answered while the checkpoint moved";

  // Never declared lost, and its loop never stalled for half the liveness window.
  EXPECT_TRUE(lost.empty()) << EventRecorder::Describe(lost);
  // The longest stall is the process's: the save and the load stalled the loop for under
  // half the window, or they did not make it longer than it was before them.
  EXPECT_GE(stall_us, 0);
  EXPECT_TRUE(stall_us == stall_before_us ||
              std::chrono::microseconds(stall_us) < kLivenessWindow / 2)
      << "the store's event loop stalled for " << stall_us / 1000
      << " ms while the checkpoint was saved and loaded";

  const auto ms = [](Clock::duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  std::cout << fmt::format(
      "256 MiB checkpoint: save {} ms, load {} ms; the store's longest loop stall {} ms "
      "after them, {} ms before (liveness window {} ms); the probe client: {} answers ({} "
      "before the read-back), the slowest {} ms\n",
      ms(saved_at - start), ms(loaded_at - saved_at), stall_us / 1000, stall_before_us / 1000,
      ms(kLivenessWindow), probe.answers.load(), answers_meanwhile, ms(probe.longest));
}

}  // namespace
}  // namespace atl::testing
