// Parallel asynchronous dispatch does the host-side work for a node before the node ahead
// of it finished; sequential dispatch does not, and irregular nodes (a data-dependent
// output shape) fall back to it on their own. Shown from the cluster's recorded events.
#include <map>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/event_recorder.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

// A chain of three nodes on one device, each keeping it busy for 100 ms.
Result<Program> SlowChain(Client& client) {
  ATOLL_ASSIGN_OR_RETURN(Slice slice, client.CreateSlice(1));
  FunctionBuilder b("slow");
  b.Output(b.Add(b.Spin(b.Input(DType::kF32, {1}), 100000), 1.0));
  ATOLL_ASSIGN_OR_RETURN(Function slow, client.Register(b, slice));
  ProgramBuilder p;
  Traced x = p.Arg(DType::kF32, {1});
  for (int i = 0; i < 3; ++i) x = p.Call(slow, {x})[0];
  p.Return({x});
  return p.Build();
}

// The same chain, whose second node keeps only the positive elements (an output whose
// length depends on the data) and whose third node doubles what is left: both irregular.
Result<Program> FilteringChain(Client& client) {
  ATOLL_ASSIGN_OR_RETURN(Slice slice, client.CreateSlice(1));
  FunctionBuilder slow("slow");
  slow.Output(slow.Add(slow.Spin(slow.Input(DType::kF32, {4}), 100000), 1.0));
  FunctionBuilder keep("keep_positive");
  keep.Output(keep.Filter(keep.Spin(keep.Input(DType::kF32, {4}), 100000), 0.0));
  FunctionBuilder twice("twice");
  twice.Output(twice.Mul(twice.Spin(twice.Input(DType::kF32, {kDynamicDim}), 100000), 2.0));
  ATOLL_ASSIGN_OR_RETURN(Function slow_fn, client.Register(slow, slice));
  ATOLL_ASSIGN_OR_RETURN(Function keep_fn, client.Register(keep, slice));
  ATOLL_ASSIGN_OR_RETURN(Function twice_fn, client.Register(twice, slice));
  ProgramBuilder p;
  Traced x = p.Arg(DType::kF32, {4});
  p.Return({p.Call(twice_fn, p.Call(keep_fn, p.Call(slow_fn, {x})))[0]});
  return p.Build();
}

struct Timeline {
  std::map<uint64_t, int64_t> admitted_us;  // gang -> when its host-side work was done
  std::map<uint64_t, int64_t> done_us;      // gang -> when it finished
};

class DispatchTest : public ClusterTest {
 protected:
  // Runs a three-node program and records when each gang was admitted and finished.
  Timeline RecordRun(const std::function<Result<Program>(Client&)>& make, const Tensor& input,
                     const Tensor& expected, const SubmitOptions& options) {
    auto client = Connect("dispatch");
    EXPECT_NE(client, nullptr);
    auto program = make(*client);
    EXPECT_THAT(program, IsOk());
    if (!program.ok()) return {};
    EventRecorder recorder(EventsEndpoint());
    auto run = client->Submit(*program, {input}, options);
    EXPECT_THAT(run, IsOk());
    if (!run.ok()) return {};
    auto out = run->Wait(30s);
    EXPECT_THAT(out, IsOk());
    if (out.ok()) {
      EXPECT_EQ(out->at(0), expected);
    }
    Timeline t;
    recorder.Collect(run->id(), [&](const std::vector<Event>& events) {
      for (const auto& e : events) {
        const int64_t ts = e.fields["ts_us"].get<int64_t>();
        if (e.topic == "gang.done") {
          t.done_us[e.fields["gang"].get<uint64_t>()] = e.fields["end_us"].get<int64_t>();
        }
        if (e.topic == "dispatch.admitted") {
          for (auto g = e.fields["first_gang"].get<uint64_t>();
               g <= e.fields["last_gang"].get<uint64_t>(); ++g) {
            t.admitted_us.try_emplace(g, ts);
          }
        }
      }
      return t.done_us.size() == 3 && t.admitted_us.size() == 3;
    });
    return t;
  }
};

TEST_F(DispatchTest, ParallelDispatchAdmitsLaterNodesBeforeEarlierOnesFinish) {
  Timeline t = RecordRun(SlowChain, Tensor::F32({1}, {0}), Tensor::F32({1}, {3}), {});
  ASSERT_EQ(t.done_us.size(), 3u);
  ASSERT_EQ(t.admitted_us.size(), 3u);
  const uint64_t first = t.done_us.begin()->first;
  // Nodes 1 and 2 were admitted (buffers reserved, queued on the device) while node 0 was
  // still running: its 100 ms had not passed.
  EXPECT_LT(t.admitted_us.at(first + 1), t.done_us.at(first));
  EXPECT_LT(t.admitted_us.at(first + 2), t.done_us.at(first));
}

TEST_F(DispatchTest, SequentialDispatchAdmitsEachNodeOnlyAfterThePreviousFinished) {
  Timeline t =
      RecordRun(SlowChain, Tensor::F32({1}, {0}), Tensor::F32({1}, {3}), {.sequential = true});
  ASSERT_EQ(t.done_us.size(), 3u);
  ASSERT_EQ(t.admitted_us.size(), 3u);
  const uint64_t first = t.done_us.begin()->first;
  EXPECT_GE(t.admitted_us.at(first + 1), t.done_us.at(first));
  EXPECT_GE(t.admitted_us.at(first + 2), t.done_us.at(first + 1));
}

TEST_F(DispatchTest, IrregularNodesFallBackToSequentialDispatch) {
  // [-1,2,-3,4] + 1 = [0,3,-2,5]; the positive ones [3,5], doubled.
  Timeline t =
      RecordRun(FilteringChain, Tensor::F32({4}, {-1, 2, -3, 4}), Tensor::F32({2}, {6, 10}), {});
  ASSERT_EQ(t.done_us.size(), 3u);
  ASSERT_EQ(t.admitted_us.size(), 3u);
  const uint64_t first = t.done_us.begin()->first;
  // The program asked for parallel dispatch, but the filtering node and its consumer were
  // admitted only once the node ahead of each had finished.
  EXPECT_GE(t.admitted_us.at(first + 1), t.done_us.at(first));
  EXPECT_GE(t.admitted_us.at(first + 2), t.done_us.at(first + 1));
}

}  // namespace
}  // namespace atl::testing
