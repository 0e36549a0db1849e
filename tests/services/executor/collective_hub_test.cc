// CollectiveHub without processes: the shards of a gang meet on device threads made here;
// other hosts' partials are deposited as the data plane would, and this host's partial is
// captured where it would be sent.
#include "services/executor/collective_hub.h"

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
    Tensor partial;
  };
  CollectiveHub MakeHub(std::chrono::milliseconds timeout) {
    return CollectiveHub(
        kB,
        [this](const std::string& endpoint, const CollectiveKey& key, uint32_t from_host,
               const Tensor& partial) {
          std::lock_guard lock(mu_);
          sent_.push_back({endpoint, key, from_host, partial});
        },
        timeout);
  }
  std::vector<Sent> sent() {
    std::lock_guard lock(mu_);
    return sent_;
  }

  std::mutex mu_;
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
    EXPECT_EQ(s.partial, Tensor::F32({2}, {11, 22}));
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

TEST_F(CollectiveHubTest, AShardThatDoesNotRunHereIsRefused) {
  CollectiveHub hub = MakeHub(10s);
  Result<Tensor> total =
      hub.AllReduceSum({7, 3, 4}, GangLayout({kA, kB}), 0, Tensor::F32({1}, {2}));
  EXPECT_EQ(total.status().code(), Code::kInternal);
  EXPECT_TRUE(sent().empty());
}

}  // namespace
}  // namespace atl::executor
