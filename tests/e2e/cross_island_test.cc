// Programs that cross islands in opposite directions, from many clients at once: each
// island's scheduler orders its gangs alone, so without a rule that keeps those orders
// consistent with the programs' cross-island edges, island0 can queue run A's last gang
// ahead of run B's middle one while island1 queues B's last ahead of A's middle one, and
// every device then waits for ever (docs/design-notes.md, "One order across islands").
#include <deque>
#include <thread>

#include "tests/e2e/cluster_fixture.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kClients = 8;
constexpr int kRunsPerClient = 200;
constexpr size_t kCrossingsInFlight = 8;
constexpr auto kRunTimeout = 60s;

// step(x) = all_reduce_sum(x) + 1 over a 4-device slice spanning both hosts of its island.
Result<Function> RegisterStep(Client& client, const Slice& slice) {
  FunctionBuilder b("step");
  Value x = b.Input(DType::kF32, {2}, Sharding::Replicated());
  b.Output(b.Add(b.AllReduceSum(x), 1.0));
  return client.Register(b, slice);
}

// first -> second -> first: three all-reduce steps, two island crossings.
Result<Program> Crossing(const Function& first, const Function& second) {
  ProgramBuilder p;
  Traced x = p.Arg(DType::kF32, {2});
  x = p.Call(first, {x})[0];
  x = p.Call(second, {x})[0];
  x = p.Call(first, {x})[0];
  p.Return({x});
  return p.Build();
}

float Expected(float v) {
  for (int i = 0; i < 3; ++i) v = v * 4 + 1;
  return v;
}

// One client's share of the load: runs `kRunsPerClient` crossings, `kCrossingsInFlight` at a time,
// checking every result. Returns what went wrong, or OK.
Status CrossManyTimes(const std::string& rm, int index) {
  ATOLL_ASSIGN_OR_RETURN(
      auto client, Client::Connect({.rm_endpoint = rm, .name = "cross" + std::to_string(index)}));
  ATOLL_ASSIGN_OR_RETURN(Slice on0, client->CreateSlice(4, "island0"));
  ATOLL_ASSIGN_OR_RETURN(Slice on1, client->CreateSlice(4, "island1"));
  ATOLL_ASSIGN_OR_RETURN(Function step0, RegisterStep(*client, on0));
  ATOLL_ASSIGN_OR_RETURN(Function step1, RegisterStep(*client, on1));
  // Half the clients go island0 -> island1 -> island0, the other half the opposite way.
  ATOLL_ASSIGN_OR_RETURN(Program program,
                         index % 2 == 0 ? Crossing(step0, step1) : Crossing(step1, step0));
  std::deque<std::pair<Run, float>> in_flight;
  auto check_oldest = [&]() -> Status {
    auto [run, input] = std::move(in_flight.front());
    in_flight.pop_front();
    ATOLL_ASSIGN_OR_RETURN(std::vector<Tensor> out, run.Wait(kRunTimeout));
    const Tensor want = Tensor::F32({2}, {Expected(input), Expected(-input)});
    if (!(out.at(0) == want)) {
      return Internal("run " + std::to_string(run.id()) + " gave " + out.at(0).ToString() +
                      ", not " + want.ToString());
    }
    return Status::Ok();
  };
  for (int r = 0; r < kRunsPerClient; ++r) {
    const float input = static_cast<float>(index * 1000 + r) / 1000.0f;
    ATOLL_ASSIGN_OR_RETURN(Run run, client->Submit(program, {Tensor::F32({2}, {input, -input})}));
    in_flight.emplace_back(std::move(run), input);
    if (in_flight.size() == kCrossingsInFlight) ATOLL_RETURN_IF_ERROR(check_oldest());
  }
  while (!in_flight.empty()) ATOLL_RETURN_IF_ERROR(check_oldest());
  return Status::Ok();
}

// One crossing from a fresh client.
Status CrossOnce(const std::string& rm) {
  ATOLL_ASSIGN_OR_RETURN(auto client, Client::Connect({.rm_endpoint = rm}));
  ATOLL_ASSIGN_OR_RETURN(Slice on0, client->CreateSlice(4, "island0"));
  ATOLL_ASSIGN_OR_RETURN(Slice on1, client->CreateSlice(4, "island1"));
  ATOLL_ASSIGN_OR_RETURN(Function step0, RegisterStep(*client, on0));
  ATOLL_ASSIGN_OR_RETURN(Function step1, RegisterStep(*client, on1));
  ATOLL_ASSIGN_OR_RETURN(Program program, Crossing(step0, step1));
  ATOLL_ASSIGN_OR_RETURN(Run run, client->Submit(program, {Tensor::F32({2}, {1, 2})}));
  ATOLL_ASSIGN_OR_RETURN(std::vector<Tensor> out, run.Wait(kRunTimeout));
  if (!(out.at(0) == Tensor::F32({2}, {Expected(1), Expected(2)}))) {
    return Internal("the run afterwards gave " + out.at(0).ToString());
  }
  return Status::Ok();
}

class CrossIslandTest : public ClusterTest {};

TEST_F(CrossIslandTest, OppositeCrossingsFromManyClientsAllComplete) {
  std::vector<Status> outcomes(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] { outcomes[c] = CrossManyTimes(RmEndpoint(), c); });
  }
  for (auto& t : clients) t.join();
  for (int c = 0; c < kClients; ++c) {
    EXPECT_THAT(outcomes[c], IsOk()) << "client " << c << ": " << outcomes[c].ToString();
  }

  // The cluster is still usable afterwards: one more crossing completes.
  Status after = CrossOnce(RmEndpoint());
  EXPECT_THAT(after, IsOk());
}

}  // namespace
}  // namespace atl::testing
