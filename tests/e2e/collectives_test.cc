// Collectives inside a slice, across the devices of one host and of several hosts, and
// gang scheduling that keeps many clients' all-reduces over overlapping devices from
// deadlocking or mixing.
#include <atomic>
#include <random>
#include <thread>

#include "tests/e2e/cluster_fixture.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

// step(x) = all_reduce_sum(x) + 1 over a slice, x replicated.
Result<Function> RegisterStep(Client& client, const Slice& slice, Shape shape) {
  FunctionBuilder b("step");
  Value x = b.Input(DType::kF32, shape, Sharding::Replicated());
  b.Output(b.Add(b.AllReduceSum(x), 1.0));
  return client.Register(b, slice);
}

Result<Program> Chain(const Function& step, Shape shape, int length) {
  ProgramBuilder p;
  Traced x = p.Arg(DType::kF32, shape);
  for (int i = 0; i < length; ++i) x = p.Call(step, {x})[0];
  p.Return({x});
  return p.Build();
}

std::vector<float> Expected(std::vector<float> v, int devices, int length) {
  for (int i = 0; i < length; ++i) {
    for (auto& e : v) e = e * static_cast<float>(devices) + 1;
  }
  return v;
}

class CollectivesTest : public ClusterTest {};

TEST_F(CollectivesTest, AllReduceSumsOverDevicesOfOneAndOfSeveralHosts) {
  auto client = Connect("allreduce");
  ASSERT_NE(client, nullptr);
  // Island0 has 2 hosts x 2 devices: a 2-device slice spreads over both hosts, a 4-device
  // slice covers both devices of both.
  for (uint32_t devices : {1u, 2u, 4u}) {
    auto slice = client->CreateSlice(devices, "island0");
    ASSERT_THAT(slice, IsOk());
    auto step = RegisterStep(*client, *slice, {3});
    ASSERT_THAT(step, IsOk());
    auto program = Chain(*step, {3}, 3);
    ASSERT_THAT(program, IsOk());
    const std::vector<float> v = {1, -2, 0.5};
    auto run = client->Submit(*program, {Tensor::F32({3}, v)});
    ASSERT_THAT(run, IsOk());
    auto out = run->Wait(30s);
    ASSERT_THAT(out, IsOk()) << devices << " devices: " << out.status().ToString();
    EXPECT_EQ(out->at(0), Tensor::F32({3}, Expected(v, static_cast<int>(devices), 3)))
        << devices << " devices";
  }
}

// Clients run chains of all-reduces over slices that share devices; every result must be
// right and nothing may hang (each wait is bounded).
void RunConcurrentClients(ClusterTest* fixture, int clients, int runs_per_client) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto client = Client::Connect(
          {.rm_endpoint = fixture->RmEndpoint(), .name = "concurrent-" + std::to_string(c)});
      if (!client.ok()) return void(failures++);
      // Alternate 4-device and 2-device slices on the same 4 devices of island0.
      auto slice = (*client)->CreateSlice(c % 2 == 0 ? 4 : 2, "island0");
      if (!slice.ok()) return void(failures++);
      auto step = RegisterStep(**client, *slice, {2});
      if (!step.ok()) return void(failures++);
      auto program = Chain(*step, {2}, 4);
      if (!program.ok()) return void(failures++);
      std::mt19937 rng(c);
      std::uniform_int_distribution<int> dist(-3, 3);
      for (int r = 0; r < runs_per_client; ++r) {
        const std::vector<float> v = {static_cast<float>(dist(rng)), static_cast<float>(dist(rng))};
        auto run = (*client)->Submit(*program, {Tensor::F32({2}, v)});
        if (!run.ok()) {
          ADD_FAILURE() << "client " << c << " run " << r << ": " << run.status().ToString();
          return void(failures++);
        }
        auto out = run->Wait(60s);
        if (!out.ok() || !(out->at(0) == Tensor::F32({2}, Expected(v, slice->num_devices(), 4)))) {
          ADD_FAILURE() << "client " << c << " run " << r << ": "
                        << (out.ok() ? out->at(0).ToString() : out.status().ToString());
          return void(failures++);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(CollectivesTest, TwoClientsWithOverlappingAllReducesAllFinishCorrectly) {
  RunConcurrentClients(this, 2, 100);
}

TEST_F(CollectivesTest, EightClientsWithOverlappingAllReducesAllFinishCorrectly) {
  RunConcurrentClients(this, 8, 30);
}

}  // namespace
}  // namespace atl::testing
