// A host lost under every kind of collective: one run per kind over the 4 devices of
// island0's two hosts, each a quick call then a spin followed by the collective, queued one
// after the other; the executor of one host is SIGKILLed once it has finished the first
// run's quick call. The first run's collective is then waiting for the lost host, the others
// queued behind it: every run fails naming the host, and the surviving host's devices get
// through all of them and serve a new program well within the executors' 30 s collective
// timeout.
#include <signal.h>

#include <chrono>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/event_recorder.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

// Before each collective; shorter than the loss takes to be noticed, so that the first run's
// surviving shards are waiting in their collective when it is.
constexpr double kCollectiveSpinUs = 200e3;
constexpr char kCollectiveVictim[] = "i0h1";

struct Kind {
  std::string name;
  bool cut;  // x [4, 8] cut over the slice; else [8] replicated-typed
  std::function<Value(FunctionBuilder&, Value)> apply;
};

const std::vector<Kind>& Kinds() {
  static const std::vector<Kind> kinds = {
      {"all_reduce_sum", false, [](FunctionBuilder& b, Value x) { return b.AllReduceSum(x, 0); }},
      {"all_reduce_max", false, [](FunctionBuilder& b, Value x) { return b.AllReduceMax(x, 0); }},
      {"all_reduce_min", false, [](FunctionBuilder& b, Value x) { return b.AllReduceMin(x, 0); }},
      {"all_reduce_mean", false, [](FunctionBuilder& b, Value x) { return b.AllReduceMean(x, 0); }},
      {"all_gather", true, [](FunctionBuilder& b, Value x) { return b.AllGather(x, 0); }},
      {"reduce_scatter", false,
       [](FunctionBuilder& b, Value x) { return b.ReduceScatter(x, 0, 0); }},
      {"all_to_all", true, [](FunctionBuilder& b, Value x) { return b.AllToAll(x, 0, 1); }},
      {"broadcast", false, [](FunctionBuilder& b, Value x) { return b.Broadcast(x, 0, 1); }},
      {"collective_permute", true,
       [](FunctionBuilder& b, Value x) {
         return b.CollectivePermute(x, 0, {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
       }},
  };
  return kinds;
}

class CollectiveLossTest : public ClusterTest {
 public:
  static void SetUpTestSuite() { StartCluster(ATOLL_SOURCE_DIR "/tests/e2e/liveness.toml"); }
};

// f(x) = g(collective(spin(x * 1))) as two calls: the quick x * 1, then the spin and the
// collective.
Result<Program> KindProgram(Client& client, const Slice& slice, const Kind& kind) {
  const Shape shape = kind.cut ? Shape{4, 8} : Shape{8};
  const Sharding layout = kind.cut ? Sharding::Split(0) : Sharding::Replicated();
  FunctionBuilder quick("quick_" + kind.name);
  quick.Output(quick.Mul(quick.Input(DType::kF32, shape, layout), 1.0));
  ATOLL_ASSIGN_OR_RETURN(Function first, client.Register(quick, slice));
  FunctionBuilder slow(kind.name);
  slow.Output(
      kind.apply(slow, slow.Spin(slow.Input(DType::kF32, shape, layout), kCollectiveSpinUs)));
  ATOLL_ASSIGN_OR_RETURN(Function second, client.Register(slow, slice));
  ProgramBuilder p;
  p.Return(p.Call(second, p.Call(first, {p.Arg(DType::kF32, shape)})));
  return p.Build();
}

TEST_F(CollectiveLossTest, ALostHostFailsEveryKindOfCollectiveNamingIt) {
  auto client = Connect("collective-loss");
  ASSERT_NE(client, nullptr);
  auto slice = client->CreateSlice(4, "island0");
  ASSERT_THAT(slice, IsOk());
  std::vector<Program> programs;
  for (const Kind& kind : Kinds()) {
    auto program = KindProgram(*client, *slice, kind);
    ASSERT_THAT(program, IsOk()) << kind.name << ": " << program.status().ToString();
    programs.push_back(*program);
  }
  EventRecorder events(EventsEndpoint());
  std::vector<atl::Run> runs;
  for (size_t k = 0; k < Kinds().size(); ++k) {
    const Shape shape = Kinds()[k].cut ? Shape{4, 8} : Shape{8};
    auto run = client->Submit(programs[k], {Tensor(DType::kF32, shape)});
    ASSERT_THAT(run, IsOk());
    runs.push_back(std::move(run).value());
  }
  // Once the victim has run the first run's quick call, its devices are in the first run's
  // spin, the survivors' soon in its collective.
  const uint64_t first = runs.front().id();
  ASSERT_TRUE(events
                  .WaitFor(
                      "gang.done",
                      [&](const Event& e) {
                        return e.fields["host"] == kCollectiveVictim && e.fields["run"] == first &&
                               e.fields["node"] == 0;
                      },
                      30s)
                  .has_value());
  ASSERT_THAT(cluster_->Signal(std::string("executor-") + kCollectiveVictim, SIGKILL), IsOk());

  for (size_t k = 0; k < runs.size(); ++k) {
    SCOPED_TRACE(Kinds()[k].name);
    // Beyond the 30 s collective timeout: a run that waited it out shows as DeadlineExceeded.
    auto out = runs[k].Wait(45s);
    ASSERT_FALSE(out.ok()) << "completed without the lost host";
    EXPECT_NE(out.status().code(), Code::kDeadlineExceeded) << out.status().ToString();
    EXPECT_NE(out.status().message().find(kCollectiveVictim), std::string::npos)
        << out.status().ToString();
    std::cout << Kinds()[k].name << ": " << out.status().ToString() << "\n";
  }

  // The surviving host's devices are free for a new program, queued behind every run above:
  // far within the 30 s a collective would wait for a partner, so none of them held its
  // devices for that long.
  auto survivor = client->CreateSlice(2, "island0");
  ASSERT_THAT(survivor, IsOk());
  auto program = KindProgram(*client, *survivor, Kinds().front());
  ASSERT_THAT(program, IsOk());
  auto run = client->Submit(*program, {Tensor::F32({8}, std::vector<float>(8, 1))});
  ASSERT_THAT(run, IsOk());
  auto out = run->Wait(10s);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->at(0), Tensor::F32({8}, std::vector<float>(8, 2)));
}

}  // namespace
}  // namespace atl::testing
