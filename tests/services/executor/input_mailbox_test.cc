// InputMailbox without processes: tuples meeting the shards that await them, early tuples,
// producer errors, lost peers, and deliveries from several threads.
#include "services/executor/input_mailbox.h"

#include <thread>

#include <gtest/gtest.h>

#include "tests/services/executor/executor_test_util.h"

namespace atl::executor {
namespace {

using testutil::MakeEntry;
using testutil::MakeItem;
using testutil::RecordingSink;
using Call = RecordingSink::Call;

TEST(InputMailboxTest, AnAwaitedTupleGoesToItsItemAsThatInput) {
  RecordingSink sink;
  InputMailbox mailbox(sink);
  auto item = MakeItem(MakeEntry(1, 0, 1));
  mailbox.Await({7, 3, 2, 0}, item);
  EXPECT_TRUE(sink.calls().empty());
  EXPECT_EQ(mailbox.waiting(), 1u);

  mailbox.Deliver({7, 3, 2, 0}, Tensor::F32({2}, {1, 2}));
  const auto calls = sink.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].kind, Call::kDeliver);
  EXPECT_EQ(calls[0].item, item);
  EXPECT_EQ(calls[0].input, 2u);
  EXPECT_EQ(*calls[0].value, Tensor::F32({2}, {1, 2}));
  EXPECT_EQ(mailbox.waiting(), 0u);
}

TEST(InputMailboxTest, ATupleForAnotherKeyWaitsForItsOwnEntry) {
  RecordingSink sink;
  InputMailbox mailbox(sink);
  auto item = MakeItem(MakeEntry(1, 0, 1));
  mailbox.Await({7, 3, 0, 0}, item);
  mailbox.Deliver({7, 3, 0, 1}, Tensor::F32({1}, {5}));  // another shard's
  EXPECT_TRUE(sink.calls().empty());
  EXPECT_EQ(mailbox.waiting(), 1u);
  EXPECT_EQ(mailbox.early(), 1u);
}

TEST(InputMailboxTest, ATupleBeforeItsEntryIsKeptAndHandedOverOnAwait) {
  RecordingSink sink;
  InputMailbox mailbox(sink);
  mailbox.Deliver({7, 3, 0, 0}, Tensor::F32({1}, {1}));
  mailbox.Deliver({7, 3, 0, 0}, Tensor::F32({1}, {2}));  // the later one wins
  EXPECT_EQ(mailbox.early(), 1u);
  EXPECT_TRUE(sink.calls().empty());

  auto item = MakeItem(MakeEntry(1, 0, 1));
  mailbox.Await({7, 3, 0, 0}, item);
  const auto calls = sink.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].kind, Call::kDeliver);
  EXPECT_EQ(*calls[0].value, Tensor::F32({1}, {2}));
  EXPECT_EQ(mailbox.early(), 0u);
  EXPECT_EQ(mailbox.waiting(), 0u) << "a handed-over tuple leaves nothing waiting";
}

TEST(InputMailboxTest, AProducersErrorFailsTheItemEarlyOrLate) {
  RecordingSink sink;
  InputMailbox mailbox(sink);
  auto late = MakeItem(MakeEntry(1, 0, 1));
  mailbox.Await({7, 3, 0, 0}, late);
  mailbox.Deliver({7, 3, 0, 0}, Internal("producer broke"));
  mailbox.Deliver({7, 3, 0, 1}, Internal("other producer broke"));
  auto early = MakeItem(MakeEntry(1, 1, 2));
  mailbox.Await({7, 3, 0, 1}, early);

  const auto calls = sink.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].kind, Call::kFail);
  EXPECT_EQ(calls[0].item, late);
  EXPECT_EQ(calls[0].status.message(), "producer broke");
  EXPECT_EQ(calls[1].kind, Call::kFail);
  EXPECT_EQ(calls[1].item, early);
  EXPECT_EQ(calls[1].status.message(), "other producer broke");
}

TEST(InputMailboxTest, ALostPeerFailsOnlyTheItemsWaitingOnIt) {
  RecordingSink sink;
  InputMailbox mailbox(sink);
  proto::Entry on_b = MakeEntry(1, 0, 2);
  on_b.peers = {"tcp://a:1", "tcp://b:1"};
  proto::Entry on_a = MakeEntry(1, 1, 2);
  on_a.peers = {"tcp://a:1"};
  auto doomed = MakeItem(on_b);
  auto spared = MakeItem(on_a);
  mailbox.Await({7, 3, 0, 0}, doomed);
  mailbox.Await({7, 3, 0, 1}, spared);

  EXPECT_EQ(mailbox.FailWaitingOn("tcp://b:1", Unavailable("host b lost")), 1u);
  auto calls = sink.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].kind, Call::kFail);
  EXPECT_EQ(calls[0].item, doomed);
  EXPECT_EQ(calls[0].status.code(), Code::kUnavailable);
  EXPECT_EQ(mailbox.waiting(), 1u);

  EXPECT_EQ(mailbox.FailWaitingOn("tcp://b:1", Unavailable("again")), 0u);
  mailbox.Deliver({7, 3, 0, 1}, Tensor::F32({1}, {3}));  // the spared item still gets its input
  calls = sink.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].kind, Call::kDeliver);
  EXPECT_EQ(calls[1].item, spared);
}

TEST(InputMailboxTest, AnItemWaitingLongerThanAllowedFailsNamingWhatItWaitsFor) {
  RecordingSink sink;
  InputMailbox mailbox(sink);
  auto late = MakeItem(MakeEntry(1, 0, 2));
  auto fed = MakeItem(MakeEntry(1, 1, 2));
  mailbox.Await({7, 3, 1, 0}, late);
  mailbox.Await({7, 3, 1, 1}, fed);
  EXPECT_TRUE(mailbox.FailWaitingLongerThan(1'000, 5'000).empty()) << "first seen now";
  mailbox.Deliver({7, 3, 1, 1}, Tensor::F32({1}, {3}));
  EXPECT_TRUE(mailbox.FailWaitingLongerThan(6'000, 5'000).empty()) << "waited 5 ms of 5";
  auto failed = mailbox.FailWaitingLongerThan(6'001, 5'000);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0], (InputKey{7, 3, 1, 0}));
  const auto calls = sink.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].kind, Call::kFail);
  EXPECT_EQ(calls[1].item, late);
  EXPECT_EQ(calls[1].status.code(), Code::kDeadlineExceeded);
  EXPECT_NE(calls[1].status.message().find("run 7 node 3 shard 0 waited over 5 ms for input 1"),
            std::string::npos)
      << calls[1].status.ToString();
  EXPECT_EQ(mailbox.waiting(), 0u);
  // A tuple that comes after all is kept as early, not delivered to the failed item.
  mailbox.Deliver({7, 3, 1, 0}, Tensor::F32({1}, {4}));
  EXPECT_EQ(sink.calls().size(), 2u);
}

TEST(InputMailboxTest, DeliveriesFromSeveralThreadsEachReachTheirItem) {
  RecordingSink sink;
  InputMailbox mailbox(sink);
  constexpr uint32_t kThreads = 4;
  constexpr uint32_t kPerThread = 200;
  std::vector<std::shared_ptr<WorkItem>> items;
  // Half the keys are awaited before the tuples come, half after.
  for (uint32_t k = 0; k < kThreads * kPerThread; k += 2) {
    items.push_back(MakeItem(MakeEntry(1, k, kThreads * kPerThread)));
    mailbox.Await({7, 3, 0, k}, items.back());
  }
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&mailbox, t] {
      for (uint32_t i = 0; i < kPerThread; ++i) {
        const uint32_t k = t * kPerThread + i;
        mailbox.Deliver({7, 3, 0, k}, Tensor::F32({1}, {static_cast<float>(k)}));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (uint32_t k = 1; k < kThreads * kPerThread; k += 2) {
    mailbox.Await({7, 3, 0, k}, MakeItem(MakeEntry(1, k, kThreads * kPerThread)));
  }

  const auto calls = sink.calls();
  ASSERT_EQ(calls.size(), kThreads * kPerThread);
  std::vector<bool> seen(kThreads * kPerThread, false);
  for (const auto& c : calls) {
    ASSERT_EQ(c.kind, Call::kDeliver);
    const uint32_t k = c.item->entry.shard;
    EXPECT_EQ(c.value->as<float>()[0], static_cast<float>(k)) << "tuple went to another item";
    EXPECT_FALSE(seen[k]) << "shard " << k << " got its input twice";
    seen[k] = true;
  }
  EXPECT_EQ(mailbox.waiting(), 0u);
  EXPECT_EQ(mailbox.early(), 0u);
}

}  // namespace
}  // namespace atl::executor
