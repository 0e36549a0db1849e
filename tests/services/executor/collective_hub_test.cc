// CollectiveHub without processes: the shards of a gang meet on device threads made here;
// other hosts' partials are deposited as the data plane would, and this host's partial is
// captured where it would be sent.
#include "services/executor/collective_hub.h"

#include <condition_variable>
#include <future>
#include <mutex>

#include <gtest/gtest.h>

namespace atl::executor {
namespace {

using namespace std::chrono_literals;

constexpr char kA[] = "tcp://a:1";
constexpr char kB[] = "tcp://b:1";
constexpr char kC[] = "tcp://c:1";

class CollectiveHubTest : public ::testing::Test {
 protected:
  struct Sent {
    std::string endpoint;
    CollectiveKey key;
    uint32_t from_host;
    Result<Tensor> partial;
  };
  CollectiveHub MakeHub(std::chrono::milliseconds timeout) {
    return CollectiveHub(
        kB,
        [this](const std::string& endpoint, const CollectiveKey& key, uint32_t from_host,
               const Result<Tensor>& partial) {
          {
            std::lock_guard lock(mu_);
            sent_.push_back({endpoint, key, from_host, partial});
          }
          sent_cv_.notify_all();
        },
        timeout);
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
    return hub.AllReduceSum(key, layout, 1, Tensor::F32({2}, {1, 2}));
  });
  auto s2 = std::async(std::launch::async, [&] {
    return hub.AllReduceSum(key, layout, 2, Tensor::F32({2}, {10, 20}));
  });
  hub.Deposit(key, 0, Tensor::F32({2}, {100, 200}));
  hub.Deposit(key, 2, Tensor::F32({2}, {1000, 2000}));

  for (auto* shard : {&s1, &s2}) {
    Result<Tensor> total = shard->get();
    ASSERT_TRUE(total.ok()) << total.status().ToString();
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
    ASSERT_TRUE(s.partial.ok()) << s.partial.status().ToString();
    EXPECT_EQ(*s.partial, Tensor::F32({2}, {11, 22}));
  }
}

TEST_F(CollectiveHubTest, APartialThatArrivesBeforeTheLocalShardIsKept) {
  CollectiveHub hub = MakeHub(10s);
  const GangLayout layout({kA, kB});
  const CollectiveKey key{7, 3, 1};
  hub.Deposit(key, 0, Tensor::F32({1}, {5}));
  Result<Tensor> total = hub.AllReduceSum(key, layout, 1, Tensor::F32({1}, {2}));
  ASSERT_TRUE(total.ok()) << total.status().ToString();
  EXPECT_EQ(*total, Tensor::F32({1}, {7}));
}

TEST_F(CollectiveHubTest, AHostThatNeverContributesTimesTheGangOut) {
  CollectiveHub hub = MakeHub(50ms);
  const GangLayout layout({kA, kB});
  Result<Tensor> total = hub.AllReduceSum({7, 3, 2}, layout, 1, Tensor::F32({1}, {2}));
  EXPECT_EQ(total.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(total.status().message().find("1 of 2 hosts contributed"), std::string::npos)
      << total.status().ToString();
}

TEST_F(CollectiveHubTest, AnErrorFromAnotherHostIsEveryShardsResult) {
  CollectiveHub hub = MakeHub(10s);
  const GangLayout layout({kA, kB});
  const CollectiveKey key{7, 3, 3};
  hub.Deposit(key, 0, Result<Tensor>(Unavailable("host a lost")));
  Result<Tensor> total = hub.AllReduceSum(key, layout, 1, Tensor::F32({1}, {2}));
  EXPECT_EQ(total.status().code(), Code::kUnavailable);
}

TEST_F(CollectiveHubTest, ALostHostFailsTheAllReducesWaitingForItAtOnceNamingIt) {
  using Clock = std::chrono::steady_clock;
  CollectiveHub hub = MakeHub(30s);  // the executor's timeout: far beyond what the test waits
  const GangLayout layout({kA, kB, kC});
  const CollectiveKey key{7, 3, 5};
  auto waiting = std::async(
      std::launch::async, [&] { return hub.AllReduceSum(key, layout, 1, Tensor::F32({1}, {2})); });
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
  EXPECT_NE(total.status().message().find("all-reduce of run 7 node 3 op 5"), std::string::npos)
      << total.status().ToString();
  EXPECT_LT(took, 100ms);
}

TEST_F(CollectiveHubTest, AnAllReduceIncludingALostHostFailsAtOnceUntilItIsBack) {
  using Clock = std::chrono::steady_clock;
  CollectiveHub hub = MakeHub(30s);
  const GangLayout layout({kA, kB});
  hub.HostLost(kA, Unavailable("host a lost"));

  const auto start = Clock::now();
  Result<Tensor> refused = hub.AllReduceSum({8, 0, 0}, layout, 1, Tensor::F32({1}, {2}));
  EXPECT_LT(Clock::now() - start, 100ms);
  EXPECT_EQ(refused.status().code(), Code::kUnavailable) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("host a lost"), std::string::npos)
      << refused.status().ToString();
  EXPECT_TRUE(sent().empty()) << "a doomed all-reduce sends no partial";
  // A gang without the lost host is not concerned.
  Result<Tensor> alone = hub.AllReduceSum({8, 1, 0}, GangLayout({kB}), 0, Tensor::F32({1}, {4}));
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_EQ(*alone, Tensor::F32({1}, {4}));

  hub.HostBack(kA);
  const CollectiveKey key{9, 0, 0};
  hub.Deposit(key, 0, Tensor::F32({1}, {5}));
  Result<Tensor> total = hub.AllReduceSum(key, layout, 1, Tensor::F32({1}, {2}));
  ASSERT_TRUE(total.ok()) << total.status().ToString();
  EXPECT_EQ(*total, Tensor::F32({1}, {7}));
}

TEST_F(CollectiveHubTest, AShardThatFailedBeforeItsAllReduceFailsItsGangEverywhereAtOnce) {
  CollectiveHub hub = MakeHub(30s);
  const GangLayout layout({kA, kB, kB});  // shards 1 and 2 here
  const CollectiveKey key{13, 0, 0};
  auto waiting = std::async(
      std::launch::async, [&] { return hub.AllReduceSum(key, layout, 1, Tensor::F32({1}, {2})); });
  hub.Abandon(key, layout, 2, NotFound("argument 0: object 5 is unknown"));
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
    return hub.AllReduceSum({11, 0, 0}, layout, 1, Tensor::F32({1}, {2}));
  });
  ASSERT_TRUE(WaitForSent(1)) << "the local partial never went out";
  hub.Stop(Cancelled("the executor is stopping"));
  ASSERT_EQ(waiting.wait_for(1s), std::future_status::ready) << "still waiting after Stop";
  EXPECT_EQ(waiting.get().status().code(), Code::kCancelled);
  Result<Tensor> later = hub.AllReduceSum({12, 0, 0}, layout, 1, Tensor::F32({1}, {2}));
  EXPECT_EQ(later.status().code(), Code::kCancelled) << later.status().ToString();
}

TEST_F(CollectiveHubTest, APartialThatCameBeforeItsHostWasLostStillCounts) {
  CollectiveHub hub = MakeHub(30s);
  const CollectiveKey key{10, 0, 0};
  hub.Deposit(key, 0, Tensor::F32({1}, {5}));
  hub.HostLost(kA, Unavailable("host a lost"));
  Result<Tensor> total = hub.AllReduceSum(key, GangLayout({kA, kB}), 1, Tensor::F32({1}, {2}));
  ASSERT_TRUE(total.ok()) << total.status().ToString();
  EXPECT_EQ(*total, Tensor::F32({1}, {7}));
}

TEST_F(CollectiveHubTest, AShardThatDoesNotRunHereIsRefused) {
  CollectiveHub hub = MakeHub(10s);
  Result<Tensor> total =
      hub.AllReduceSum({7, 3, 4}, GangLayout({kA, kB}), 0, Tensor::F32({1}, {2}));
  EXPECT_EQ(total.status().code(), Code::kInternal);
  EXPECT_TRUE(sent().empty());
}

}  // namespace
}  // namespace atl::executor
