// CollectiveHub without processes: the shards of a gang meet on device threads made here;
// other hosts' partials are deposited as the data plane would, and this host's partial is
// captured where it would be sent.
#include "services/executor/collective_hub.h"

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/services/executor/hub_network.h"
#include "tests/status_matchers.h"

namespace atl::executor {
namespace {

using namespace std::chrono_literals;
using testutil::HostNames;
using testutil::HubNetwork;
using testutil::Interleaved;
using testutil::WholeSliceSum;

// Shard `shard`'s all-reduce sum over the whole (1-D) slice of `layout`.
Result<Tensor> Sum(CollectiveHub& hub, const CollectiveKey& key, const GangLayout& layout,
                   uint32_t shard, Tensor local) {
  return hub.Run(key, layout, WholeSliceSum(static_cast<int64_t>(layout.shard_endpoints.size())),
                 shard, std::move(local));
}

constexpr char kA[] = "tcp://a:1";
constexpr char kB[] = "tcp://b:1";
constexpr char kC[] = "tcp://c:1";

class CollectiveHubTest : public ::testing::Test {
 protected:
  struct Sent {
    std::string endpoint;
    CollectiveKey key;
    CollectiveValue what;
    uint32_t from_host;
    Result<Tensor> partial;
  };
  CollectiveHub MakeHub(std::chrono::milliseconds timeout,
                        size_t all_pairs_max_hosts = CollectiveHub::kAllPairsMaxHosts) {
    return CollectiveHub(
        kB,
        [this](const std::string& endpoint, const CollectiveKey& key, CollectiveValue what,
               uint32_t from_host, Result<Tensor> partial) {
          {
            std::lock_guard lock(mu_);
            sent_.push_back({endpoint, key, what, from_host, partial});
          }
          sent_cv_.notify_all();
        },
        timeout, all_pairs_max_hosts);
  }
  std::vector<Sent> sent() {
    std::lock_guard lock(mu_);
    return sent_;
  }
  // Waits (at most 10 s) until `n` partials went out: their shards are then in the hub.
  bool WaitForSent(size_t n) {
    std::unique_lock lock(mu_);
    return sent_cv_.wait_for(lock, 10s, [&] { return sent_.size() >= n; });
  }

  std::mutex mu_;
  std::condition_variable sent_cv_;
  std::vector<Sent> sent_;
};

TEST_F(CollectiveHubTest, PartialsFromEveryHostAreSummedForEachLocalShard) {
  CollectiveHub hub = MakeHub(10s);
  // Shards 1 and 2 run here (host b, index 1 of a, b, c); shards 0 and 3 elsewhere.
  const GangLayout layout({kA, kB, kB, kC});
  const CollectiveKey key{7, 3, 0};
  auto s1 = std::async(std::launch::async, [&] {
    return Sum(hub, key, layout, 1, Tensor::F32({2}, {1, 2}));
  });
  auto s2 = std::async(std::launch::async, [&] {
    return Sum(hub, key, layout, 2, Tensor::F32({2}, {10, 20}));
  });
  hub.Deposit(key, 0, Tensor::F32({2}, {100, 200}));
  hub.Deposit(key, 2, Tensor::F32({2}, {1000, 2000}));

  for (auto* shard : {&s1, &s2}) {
    Result<Tensor> total = shard->get();
    ASSERT_THAT(total, IsOk());
    EXPECT_EQ(*total, Tensor::F32({2}, {1111, 2222}));
  }
  // This host's partial (its shards summed) went once to each other host.
  const auto out = sent();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].endpoint, kA);
  EXPECT_EQ(out[1].endpoint, kC);
  for (const auto& s : out) {
    EXPECT_EQ(s.key, key);
    EXPECT_EQ(s.from_host, 1u);
    ASSERT_THAT(s.partial, IsOk());
    EXPECT_EQ(*s.partial, Tensor::F32({2}, {11, 22}));
  }
}

// bf16 shards are summed in f32: the partial this host sends is f32, and the total is
// rounded into bf16 once. 1 + 2^-8 + 2^-8 + 2^-8 is 1 + 3 * 2^-8, which rounds to bf16's
// 1 + 2^-6; summed in bf16, each 2^-8 would tie to even and vanish, leaving 1.
TEST_F(CollectiveHubTest, BF16IsSummedInF32AndRoundedOnce) {
  CollectiveHub hub = MakeHub(10s);
  const GangLayout layout({kA, kB, kB});
  const CollectiveKey key{7, 3, 2};
  auto bf16 = [](double v) { return Tensor::FromDoubles(DType::kBF16, {1}, {v}).value(); };
  auto s1 = std::async(std::launch::async, [&] { return Sum(hub, key, layout, 1, bf16(0x1p-8)); });
  auto s2 = std::async(std::launch::async, [&] { return Sum(hub, key, layout, 2, bf16(0x1p-8)); });
  hub.Deposit(key, 0, Tensor::F32({1}, {1 + 0x1p-8f}));  // host a's partial, in f32
  for (auto* shard : {&s1, &s2}) {
    Result<Tensor> total = shard->get();
    ASSERT_THAT(total, IsOk());
    EXPECT_EQ(*total, bf16(1 + 0x1p-6));
  }
  const auto out = sent();
  ASSERT_EQ(out.size(), 1u);
  ASSERT_THAT(out[0].partial, IsOk());
  EXPECT_EQ(*out[0].partial, Tensor::F32({1}, {0x1p-7f}));
}

TEST_F(CollectiveHubTest, APartialThatArrivesBeforeTheLocalShardIsKept) {
  CollectiveHub hub = MakeHub(10s);
  const GangLayout layout({kA, kB});
  const CollectiveKey key{7, 3, 1};
  hub.Deposit(key, 0, Tensor::F32({1}, {5}));
  Result<Tensor> total = Sum(hub, key, layout, 1, Tensor::F32({1}, {2}));
  ASSERT_THAT(total, IsOk());
  EXPECT_EQ(*total, Tensor::F32({1}, {7}));
}

TEST_F(CollectiveHubTest, AHostThatNeverContributesTimesTheGangOut) {
  CollectiveHub hub = MakeHub(50ms);
  const GangLayout layout({kA, kB});
  Result<Tensor> total = Sum(hub, {7, 3, 2}, layout, 1, Tensor::F32({1}, {2}));
  EXPECT_EQ(total.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(total.status().message().find("heard from 0 of the 1 hosts it waits for"),
            std::string::npos)
      << total.status().ToString();
}

// Both shards on this host (kB), one never comes: the timeout says which wait it was.
TEST_F(CollectiveHubTest, ALocalShardThatNeverComesTimesTheGangOutNamingIt) {
  CollectiveHub hub = MakeHub(50ms);
  const GangLayout layout({kB, kB});
  Result<Tensor> total = Sum(hub, {7, 3, 2}, layout, 1, Tensor::F32({1}, {2}));
  EXPECT_EQ(total.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(total.status().message().find("1 of its 2 shards on this host came within 50 ms"),
            std::string::npos)
      << total.status().ToString();
}

TEST_F(CollectiveHubTest, AnErrorFromAnotherHostIsEveryShardsResult) {
  CollectiveHub hub = MakeHub(10s);
  const GangLayout layout({kA, kB});
  const CollectiveKey key{7, 3, 3};
  hub.Deposit(key, 0, Result<Tensor>(Unavailable("host a lost")));
  Result<Tensor> total = Sum(hub, key, layout, 1, Tensor::F32({1}, {2}));
  EXPECT_EQ(total.status().code(), Code::kUnavailable);
}

TEST_F(CollectiveHubTest, ALostHostFailsTheAllReducesWaitingForItAtOnceNamingIt) {
  using Clock = std::chrono::steady_clock;
  CollectiveHub hub = MakeHub(30s);  // the executor's timeout: far beyond what the test waits
  const GangLayout layout({kA, kB, kC});
  const CollectiveKey key{7, 3, 5};
  auto waiting = std::async(std::launch::async,
                            [&] { return Sum(hub, key, layout, 1, Tensor::F32({1}, {2})); });
  hub.Deposit(key, 2, Tensor::F32({1}, {3}));  // c contributed; a never will
  ASSERT_TRUE(WaitForSent(2)) << "the local partial never went out";

  const auto lost_at = Clock::now();
  hub.HostLost(kA, Unavailable("host a lost: missed 4 heartbeats"));
  ASSERT_EQ(waiting.wait_for(1s), std::future_status::ready) << "still waiting after HostLost";
  const auto took = Clock::now() - lost_at;
  Result<Tensor> total = waiting.get();
  EXPECT_EQ(total.status().code(), Code::kUnavailable) << total.status().ToString();
  EXPECT_NE(total.status().message().find("host a lost"), std::string::npos)
      << total.status().ToString();
  EXPECT_NE(total.status().message().find("all_reduce_sum of run 7 node 3 op 5"), std::string::npos)
      << total.status().ToString();
  EXPECT_LT(took, 100ms);
}

TEST_F(CollectiveHubTest, ACancelledRunsWaitingAllReduceFailsWithTheCancelOthersWaitOn) {
  CollectiveHub hub = MakeHub(30s);  // the executor's timeout: far beyond what the test waits
  const GangLayout layout({kA, kB});
  const CollectiveKey cancelled{7, 3, 5};
  const CollectiveKey other{8, 3, 5};
  auto waiting = std::async(std::launch::async,
                            [&] { return Sum(hub, cancelled, layout, 1, Tensor::F32({1}, {2})); });
  auto other_waiting = std::async(
      std::launch::async, [&] { return Sum(hub, other, layout, 1, Tensor::F32({1}, {4})); });
  ASSERT_TRUE(WaitForSent(2)) << "the local partials never went out";

  hub.CancelRun(7, Unavailable("host a was lost"));
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready) << "still waiting after the cancel";
  Result<Tensor> total = waiting.get();
  EXPECT_EQ(total.status().code(), Code::kUnavailable) << total.status().ToString();
  EXPECT_NE(total.status().message().find("host a was lost"), std::string::npos)
      << total.status().ToString();
  EXPECT_NE(other_waiting.wait_for(0s), std::future_status::ready) << "run 8 was not cancelled";
  hub.Deposit(other, 0, Tensor::F32({1}, {1}));
  ASSERT_EQ(other_waiting.wait_for(10s), std::future_status::ready);
  Result<Tensor> other_total = other_waiting.get();
  ASSERT_THAT(other_total, IsOk());
  EXPECT_EQ(*other_total, Tensor::F32({1}, {5}));
}

TEST_F(CollectiveHubTest, AnAllReduceIncludingALostHostFailsAtOnceUntilItIsBack) {
  using Clock = std::chrono::steady_clock;
  CollectiveHub hub = MakeHub(30s);
  const GangLayout layout({kA, kB});
  hub.HostLost(kA, Unavailable("host a lost"));

  const auto start = Clock::now();
  Result<Tensor> refused = Sum(hub, {8, 0, 0}, layout, 1, Tensor::F32({1}, {2}));
  EXPECT_LT(Clock::now() - start, 100ms);
  EXPECT_EQ(refused.status().code(), Code::kUnavailable) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("host a lost"), std::string::npos)
      << refused.status().ToString();
  EXPECT_TRUE(sent().empty()) << "a doomed all-reduce sends no partial";
  // A gang without the lost host is not concerned.
  Result<Tensor> alone = Sum(hub, {8, 1, 0}, GangLayout({kB}), 0, Tensor::F32({1}, {4}));
  ASSERT_THAT(alone, IsOk());
  EXPECT_EQ(*alone, Tensor::F32({1}, {4}));

  hub.HostBack(kA);
  const CollectiveKey key{9, 0, 0};
  hub.Deposit(key, 0, Tensor::F32({1}, {5}));
  Result<Tensor> total = Sum(hub, key, layout, 1, Tensor::F32({1}, {2}));
  ASSERT_THAT(total, IsOk());
  EXPECT_EQ(*total, Tensor::F32({1}, {7}));
}

TEST_F(CollectiveHubTest, AShardThatFailedBeforeItsAllReduceFailsItsGangEverywhereAtOnce) {
  CollectiveHub hub = MakeHub(30s);
  const GangLayout layout({kA, kB, kB});  // shards 1 and 2 here
  const CollectiveKey key{13, 0, 0};
  auto waiting = std::async(std::launch::async,
                            [&] { return Sum(hub, key, layout, 1, Tensor::F32({1}, {2})); });
  hub.Abandon(key, layout, WholeSliceSum(3), 2, NotFound("argument 0: object 5 is unknown"));
  ASSERT_EQ(waiting.wait_for(1s), std::future_status::ready) << "still waiting after Abandon";
  EXPECT_EQ(waiting.get().status().code(), Code::kNotFound);
  // Host a hears the error as this host's partial, once.
  ASSERT_TRUE(WaitForSent(1));
  const auto out = sent();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].endpoint, kA);
  EXPECT_EQ(out[0].partial.status().code(), Code::kNotFound);
}

TEST_F(CollectiveHubTest, StoppingFailsEveryWaitingAndLaterAllReduceAtOnce) {
  CollectiveHub hub = MakeHub(30s);
  const GangLayout layout({kA, kB});
  auto waiting = std::async(std::launch::async, [&] {
    return Sum(hub, {11, 0, 0}, layout, 1, Tensor::F32({1}, {2}));
  });
  ASSERT_TRUE(WaitForSent(1)) << "the local partial never went out";
  hub.Stop(Cancelled("the executor is stopping"));
  ASSERT_EQ(waiting.wait_for(1s), std::future_status::ready) << "still waiting after Stop";
  EXPECT_EQ(waiting.get().status().code(), Code::kCancelled);
  Result<Tensor> later = Sum(hub, {12, 0, 0}, layout, 1, Tensor::F32({1}, {2}));
  EXPECT_EQ(later.status().code(), Code::kCancelled) << later.status().ToString();
}

TEST_F(CollectiveHubTest, APartialThatCameBeforeItsHostWasLostStillCounts) {
  CollectiveHub hub = MakeHub(30s);
  const CollectiveKey key{10, 0, 0};
  hub.Deposit(key, 0, Tensor::F32({1}, {5}));
  hub.HostLost(kA, Unavailable("host a lost"));
  Result<Tensor> total = Sum(hub, key, GangLayout({kA, kB}), 1, Tensor::F32({1}, {2}));
  ASSERT_THAT(total, IsOk());
  EXPECT_EQ(*total, Tensor::F32({1}, {7}));
}

TEST_F(CollectiveHubTest, AShardThatDoesNotRunHereIsRefused) {
  CollectiveHub hub = MakeHub(10s);
  Result<Tensor> total = Sum(hub, {7, 3, 4}, GangLayout({kA, kB}), 0, Tensor::F32({1}, {2}));
  EXPECT_EQ(total.status().code(), Code::kInternal);
  EXPECT_TRUE(sent().empty());
}

// Values over many magnitudes, so that float sums in another order come out different.
std::vector<Tensor> MixedValues(int shards) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mantissa(-1, 1);
  std::uniform_int_distribution<int> exponent(-8, 8);
  std::vector<Tensor> values;
  for (int s = 0; s < shards; ++s) {
    std::vector<float> v(3);
    for (float& e : v) e = std::ldexp(mantissa(rng), 3 * exponent(rng));
    values.push_back(Tensor::F32({3}, v));
  }
  return values;
}

// The all-reduce's definition: each host's shards summed in shard order, then the hosts'
// partials in host order.
Tensor HostOrderSum(const GangLayout& layout, const std::vector<Tensor>& values) {
  std::vector<float> total;
  for (const auto& host : layout.hosts) {
    std::vector<float> partial;
    for (size_t s = 0; s < values.size(); ++s) {
      if (layout.shard_endpoints[s] != host) continue;
      const auto v = values[s].as<float>();
      if (partial.empty()) {
        partial.assign(v.begin(), v.end());
      } else {
        for (size_t i = 0; i < partial.size(); ++i) partial[i] += v[i];
      }
    }
    if (total.empty()) {
      total = partial;
    } else {
      for (size_t i = 0; i < total.size(); ++i) total[i] += partial[i];
    }
  }
  return Tensor::F32({static_cast<int64_t>(total.size())}, total);
}

TEST(CollectiveHubAtScaleTest, RootedAndAllPairsGiveEveryShardTheHostOrderSumBitForBit) {
  for (int hosts : {2, 5, 8, 24}) {
    SCOPED_TRACE(fmt::format("{} hosts", hosts));
    const auto names = HostNames(hosts);
    const GangLayout layout = Interleaved(names, 2 * hosts + 1);
    const auto values = MixedValues(2 * hosts + 1);
    const Tensor want = HostOrderSum(layout, values);
    // The definition is order-sensitive on these values (else the test would prove little).
    std::vector<float> shard_order(3, 0);
    for (const auto& v : values) {
      for (size_t i = 0; i < 3; ++i) shard_order[i] += v.as<float>()[i];
    }
    if (hosts > 2) {
      EXPECT_NE(Tensor::F32({3}, shard_order), want);
    }

    HubNetwork all_pairs(names, /*all_pairs_max_hosts=*/1000);
    HubNetwork rooted(names, /*all_pairs_max_hosts=*/1);
    for (HubNetwork* network : {&all_pairs, &rooted}) {
      for (const Result<Tensor>& got :
           network->Run({1, 2, 3}, layout, WholeSliceSum(layout.shard_endpoints.size()), values)) {
        ASSERT_THAT(got, IsOk());
        EXPECT_EQ(*got, want) << got->ToString() << " vs " << want.ToString();
      }
    }
    EXPECT_EQ(all_pairs.messages(), hosts * (hosts - 1));
    EXPECT_EQ(rooted.messages(), 2 * (hosts - 1));
  }
}

TEST(CollectiveHubAtScaleTest, ARootedGangFailsOnEveryHostWhenAnyHostsShardAbandons) {
  const auto names = HostNames(6);
  const GangLayout layout = Interleaved(names, 12);
  const auto values = MixedValues(12);
  // Shard 0 is on the root; shard 3 and 9 on host 3.
  for (uint32_t abandoned : {0u, 3u}) {
    SCOPED_TRACE(fmt::format("shard {} abandons", abandoned));
    HubNetwork rooted(names, 1);
    const auto got = rooted.Run({5, 0, abandoned}, layout, WholeSliceSum(12), values, {abandoned},
                                NotFound("argument 0: object 5 is unknown"));
    for (const Result<Tensor>& shard : got) {
      EXPECT_EQ(shard.status().code(), Code::kNotFound) << shard.status().ToString();
    }
  }
}

TEST_F(CollectiveHubTest, AMessageTravelsAsACollectiveTupleAndIsDepositedFromOne) {
  const CollectiveKey key{7, 3, 2};
  const proto::TupleHeader partial = CollectiveHub::TupleOf(key, CollectiveValue::kPartial, 2);
  EXPECT_EQ(partial.kind, proto::TupleHeader::kCollective);
  EXPECT_EQ(partial.run_id, 7u);
  EXPECT_EQ(partial.node, 3u);
  EXPECT_EQ(partial.input, 2u);
  EXPECT_EQ(partial.shard, 2u);  // the sending host's index in the gang
  EXPECT_TRUE(partial.collective());
  const proto::TupleHeader total = CollectiveHub::TupleOf(key, CollectiveValue::kTotal, 0);
  EXPECT_EQ(total.kind, proto::TupleHeader::kCollectiveTotal);
  EXPECT_TRUE(total.collective());

  // Received here (host b of a, b, c), the partials of a and c complete b's shard's sum.
  CollectiveHub hub = MakeHub(10s);
  const GangLayout layout({kA, kB, kC});
  auto shard = std::async(std::launch::async,
                          [&] { return Sum(hub, key, layout, 1, Tensor::F32({1}, {1})); });
  hub.Receive(CollectiveHub::TupleOf(key, CollectiveValue::kPartial, 0), Tensor::F32({1}, {10}));
  hub.Receive(partial, Tensor::F32({1}, {100}));
  Result<Tensor> sum = shard.get();
  ASSERT_THAT(sum, IsOk());
  EXPECT_EQ(*sum, Tensor::F32({1}, {111}));
}

TEST_F(CollectiveHubTest, ARootedHostSendsItsPartialToTheRootAloneAndWaitsForItsTotal) {
  CollectiveHub hub = MakeHub(30s, /*all_pairs_max_hosts=*/2);
  const GangLayout layout({kA, kB, kC});  // rooted at a; this host is b
  const CollectiveKey key{20, 0, 0};
  auto waiting = std::async(std::launch::async,
                            [&] { return Sum(hub, key, layout, 1, Tensor::F32({1}, {2})); });
  ASSERT_TRUE(WaitForSent(1)) << "the local partial never went out";
  // Another host's loss is the root's business: it fails the gang if it must.
  hub.HostLost(kC, Unavailable("host c lost"));
  EXPECT_EQ(waiting.wait_for(50ms), std::future_status::timeout);
  hub.DepositTotal(key, Tensor::F32({1}, {42}));
  ASSERT_EQ(waiting.wait_for(1s), std::future_status::ready);
  Result<Tensor> total = waiting.get();
  ASSERT_THAT(total, IsOk());
  EXPECT_EQ(*total, Tensor::F32({1}, {42}));
  const auto out = sent();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].endpoint, kA);
  EXPECT_EQ(out[0].what, CollectiveValue::kPartial);
  EXPECT_EQ(*out[0].partial, Tensor::F32({1}, {2}));

  // The root's loss fails it at once.
  hub.HostBack(kC);
  hub.HostLost(kA, Unavailable("host a lost"));
  Result<Tensor> refused = Sum(hub, {21, 0, 0}, layout, 1, Tensor::F32({1}, {2}));
  EXPECT_EQ(refused.status().code(), Code::kUnavailable) << refused.status().ToString();
}

// Every kind of collective over a 1-D gang of two hosts, shard 0 on host a and shard 1 here
// on host b, each needing host a's block: the all-reduces, all_gather, reduce_scatter and
// all_to_all of [2,2] blocks, a swap of the two blocks and a broadcast from a.
std::vector<CollectiveOp> EveryKindNeedingHostA() {
  std::vector<CollectiveOp> ops;
  for (auto code :
       {ir::OpCode::kAllReduceSum, ir::OpCode::kAllReduceMax, ir::OpCode::kAllReduceMin,
        ir::OpCode::kAllReduceMean, ir::OpCode::kAllGather, ir::OpCode::kReduceScatter,
        ir::OpCode::kAllToAll, ir::OpCode::kCollectivePermute, ir::OpCode::kBroadcast}) {
    CollectiveOp op;
    op.code = code;
    op.mesh = {2};
    op.axis = 0;
    op.dim = 0;
    op.to_dim = 1;
    op.root = 0;
    op.target_of = {1, 0};
    ops.push_back(op);
  }
  return ops;
}

TEST_F(CollectiveHubTest, ALostHostFailsEveryKindOfCollectiveWaitingForItAtOnceNamingIt) {
  CollectiveHub hub = MakeHub(30s);  // the executor's timeout: far beyond what the test waits
  const GangLayout layout({kA, kB});
  uint32_t op_index = 0;
  for (const CollectiveOp& op : EveryKindNeedingHostA()) {
    // A broadcast's other members send nothing: nothing shows that it is waiting yet.
    if (op.code == ir::OpCode::kBroadcast) continue;
    SCOPED_TRACE(op.name());
    const CollectiveKey key{30, 0, ++op_index};
    const size_t sent_before = sent().size();
    auto waiting = std::async(std::launch::async, [&] {
      return hub.Run(key, layout, op, 1, Tensor::F32({2, 2}, {1, 2, 3, 4}));
    });
    ASSERT_TRUE(WaitForSent(sent_before + 1)) << "this host's items never went out";
    hub.HostLost(kA, Unavailable("host a lost: missed 4 heartbeats"));
    ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready) << "still waiting after HostLost";
    Result<Tensor> got = waiting.get();
    EXPECT_EQ(got.status().code(), Code::kUnavailable) << got.status().ToString();
    EXPECT_NE(got.status().message().find("host a lost"), std::string::npos)
        << got.status().ToString();
    EXPECT_NE(
        got.status().message().find(fmt::format("{} of run 30 node 0 op {}", op.name(), op_index)),
        std::string::npos)
        << got.status().ToString();
    hub.HostBack(kA);
  }
}

TEST_F(CollectiveHubTest, EveryKindOfCollectiveThatNeedsALostHostIsRefusedAtOnce) {
  CollectiveHub hub = MakeHub(30s);
  const GangLayout layout({kA, kB});
  hub.HostLost(kA, Unavailable("host a lost"));
  uint32_t op_index = 0;
  for (const CollectiveOp& op : EveryKindNeedingHostA()) {
    SCOPED_TRACE(op.name());
    Result<Tensor> refused =
        hub.Run({31, 0, ++op_index}, layout, op, 1, Tensor::F32({2, 2}, {1, 2, 3, 4}));
    EXPECT_EQ(refused.status().code(), Code::kUnavailable) << refused.status().ToString();
  }
  EXPECT_TRUE(sent().empty()) << "nothing goes to a lost host";
}

}  // namespace
}  // namespace atl::executor
