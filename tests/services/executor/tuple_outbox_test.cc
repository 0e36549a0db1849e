// TupleOutbox over real ZeroMQ: a ROUTER on loopback stands for the peer executor's data
// socket. Every wait is bounded; the window is awaited through the outbox's own timer fd.
#include "services/executor/tuple_outbox.h"

#include <poll.h>

#include <cstring>
#include <numeric>

#include <gtest/gtest.h>
#include "tests/status_matchers.h"

namespace atl::executor {
namespace {

using namespace std::chrono_literals;

class TupleOutboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto bound = net::Bind(peer_, "tcp://127.0.0.1:*");
    ASSERT_THAT(bound, IsOk());
    endpoint_ = *bound;
  }

  // The next TupleBatch the peer received, within `timeout`.
  std::optional<proto::Incoming> Receive(std::chrono::milliseconds timeout = 1000ms) {
    auto frames = net::RecvFrames(peer_, timeout);
    if (!frames.ok() || !frames->has_value()) return std::nullopt;
    auto in = proto::ParseIncoming(std::move(**frames), /*routed=*/true);
    EXPECT_THAT(in, IsOk());
    if (!in.ok()) return std::nullopt;
    return std::move(in).value();
  }

  static proto::TupleHeader Header(uint32_t shard) {
    proto::TupleHeader h;
    h.run_id = 7;
    h.shard = shard;
    return h;
  }

  static bool TimerFires(const TupleOutbox& outbox, int timeout_ms) {
    pollfd p{outbox.timer_fd(), POLLIN, 0};
    return poll(&p, 1, timeout_ms) == 1;
  }

  zmq::context_t context_;
  zmq::socket_t peer_ = net::MakeSocket(context_, zmq::socket_type::router);
  std::string endpoint_;
};

TEST_F(TupleOutboxTest, WithoutAWindowEveryFlushSendsWhatWasQueued) {
  TupleOutbox outbox(context_, {.batch_bytes = 1 << 20, .batch_window_us = 0});
  ASSERT_THAT(outbox.Start(), IsOk());
  for (uint32_t s = 0; s < 3; ++s)
    outbox.Add(endpoint_, Header(s), Tensor::F32({2}, {1, 2}), false);
  EXPECT_TRUE(outbox.Flush().empty());
  outbox.Add(endpoint_, Header(3), Tensor::F32({1}, {5}), false);
  EXPECT_TRUE(outbox.Flush().empty());

  auto first = Receive();
  ASSERT_TRUE(first.has_value());
  auto batch = first->header.As<proto::TupleBatch>();
  ASSERT_THAT(batch, IsOk());
  EXPECT_EQ(batch->tuples.size(), 3u);
  auto second = Receive();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->header.As<proto::TupleBatch>()->tuples.size(), 1u);
  EXPECT_EQ(outbox.stats().tuples, 4u);
  EXPECT_EQ(outbox.stats().batches, 2u);
  EXPECT_EQ(outbox.stats().bytes, 7u * sizeof(float));  // 3 tuples of 2 floats, 1 of 1
  EXPECT_FALSE(TimerFires(outbox, 0)) << "nothing pending, yet the timer is armed";
}

TEST_F(TupleOutboxTest, AWindowHoldsSmallTuplesUntilItsTimerFires) {
  TupleOutbox outbox(context_, {.batch_bytes = 1 << 20, .batch_window_us = 20'000});
  ASSERT_THAT(outbox.Start(), IsOk());
  for (uint32_t s = 0; s < 3; ++s) {
    outbox.Add(endpoint_, Header(s), Tensor::F32({1}, {float(s)}), false);
    EXPECT_TRUE(outbox.Flush().empty());  // the executor flushes at the end of every turn
  }
  EXPECT_EQ(outbox.stats().batches, 0u) << "sent before the window passed";
  ASSERT_TRUE(TimerFires(outbox, 2000)) << "the window's timer never fired";
  EXPECT_TRUE(outbox.Flush().empty());
  EXPECT_EQ(outbox.stats().batches, 1u);

  auto in = Receive();
  ASSERT_TRUE(in.has_value());
  auto batch = in->header.As<proto::TupleBatch>();
  ASSERT_THAT(batch, IsOk());
  ASSERT_EQ(batch->tuples.size(), 3u);
  ASSERT_EQ(in->data.size(), 1u) << "small tuples share one packed frame";
  auto values = TupleValues(*batch, in->data);
  ASSERT_THAT(values, IsOk());
  for (uint32_t s = 0; s < 3; ++s) {
    EXPECT_EQ(batch->tuples[s].shard, s) << "tuples left their order";
    ASSERT_THAT((*values)[s], IsOk());
    EXPECT_EQ(*(*values)[s], Tensor::F32({1}, {float(s)}));
  }
  EXPECT_FALSE(TimerFires(outbox, 0));
}

TEST_F(TupleOutboxTest, AnUrgentTupleTakesItsDestinationsBatchAtOnce) {
  TupleOutbox outbox(context_, {.batch_bytes = 1 << 20, .batch_window_us = 1'000'000});
  ASSERT_THAT(outbox.Start(), IsOk());
  outbox.Add(endpoint_, Header(0), Tensor::F32({1}, {1}), false);
  outbox.Add(endpoint_, Header(1), Tensor::F32({1}, {2}), false);
  EXPECT_TRUE(outbox.Flush().empty());
  EXPECT_EQ(outbox.stats().batches, 0u);
  outbox.Add(endpoint_, Header(2), Tensor::F32({1}, {3}), true);
  EXPECT_TRUE(outbox.Flush().empty());
  auto in = Receive();
  ASSERT_TRUE(in.has_value());
  EXPECT_EQ(in->header.As<proto::TupleBatch>()->tuples.size(), 3u);
}

TEST_F(TupleOutboxTest, AFullBatchGoesWithoutWaitingForTheWindow) {
  TupleOutbox outbox(context_, {.batch_bytes = 1024, .batch_window_us = 1'000'000});
  ASSERT_THAT(outbox.Start(), IsOk());
  const Tensor small(DType::kF32, {16});  // 64 bytes
  for (uint32_t s = 0; s < 15; ++s) outbox.Add(endpoint_, Header(s), small, false);
  EXPECT_TRUE(outbox.Flush().empty());
  EXPECT_EQ(outbox.stats().batches, 0u) << "960 of 1024 bytes is not full";
  outbox.Add(endpoint_, Header(15), small, false);
  EXPECT_TRUE(outbox.Flush().empty());
  auto in = Receive();
  ASSERT_TRUE(in.has_value());
  EXPECT_EQ(in->header.As<proto::TupleBatch>()->tuples.size(), 16u);
}

TEST_F(TupleOutboxTest, ALargeTensorTravelsAsItsOwnFrameOutsideTheHeader) {
  TupleOutbox outbox(context_, {.batch_bytes = 64 << 10, .batch_window_us = 20'000});
  ASSERT_THAT(outbox.Start(), IsOk());
  std::vector<int32_t> values(1 << 18);  // 1 MiB
  std::iota(values.begin(), values.end(), 0);
  const Tensor large = Tensor::I32({int64_t(values.size())}, values);
  outbox.Add(endpoint_, Header(0), Tensor::F32({1}, {9}), false);
  outbox.Add(endpoint_, Header(1), large, false);
  EXPECT_TRUE(outbox.Flush().empty());  // the large tensor fills the batch: sent at once
  outbox.Add(endpoint_, Header(2), InvalidArgument("producer failed"), false);
  EXPECT_TRUE(outbox.Flush().empty());

  auto in = Receive();
  ASSERT_TRUE(in.has_value());
  auto batch = in->header.As<proto::TupleBatch>();
  ASSERT_THAT(batch, IsOk());
  ASSERT_EQ(batch->tuples.size(), 2u) << "the error waits for the window";
  EXPECT_TRUE(batch->tuples[0].packed);
  EXPECT_FALSE(batch->tuples[1].packed);
  ASSERT_EQ(in->data.size(), 2u);  // the packed small tensor, then the large one's own
  ASSERT_EQ(in->data[1].size(), large.nbytes());
  EXPECT_EQ(std::memcmp(in->data[1].data(), large.data(), large.nbytes()), 0);
  EXPECT_EQ(batch->tuples[1].dtype, DType::kI32);
  EXPECT_EQ(batch->tuples[1].shape, large.shape());

  ASSERT_TRUE(TimerFires(outbox, 2000));
  EXPECT_TRUE(outbox.Flush().empty());
  auto failed = Receive();
  ASSERT_TRUE(failed.has_value());
  auto errors = failed->header.As<proto::TupleBatch>();
  ASSERT_THAT(errors, IsOk());
  ASSERT_EQ(errors->tuples.size(), 1u);
  EXPECT_EQ(errors->tuples[0].error_code, static_cast<int32_t>(Code::kInvalidArgument));
  EXPECT_EQ(errors->tuples[0].error, "producer failed");
  ASSERT_EQ(failed->data.size(), 1u);
  EXPECT_EQ(failed->data[0].size(), 0u) << "an error has no bytes";
}

TEST_F(TupleOutboxTest, AnUnreachablePeerIsReportedNotThrown) {
  TupleOutbox outbox(context_, {.batch_bytes = 1024, .batch_window_us = 0});
  ASSERT_THAT(outbox.Start(), IsOk());
  outbox.Add("not an endpoint", Header(0), Tensor::F32({1}, {1}), false);
  auto errors = outbox.Flush();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].message().find("not an endpoint"), std::string::npos) << errors[0].ToString();
  EXPECT_EQ(outbox.stats().batches, 0u);
}

// The peer's ROUTER stops reading (its queue and the outbox's fill): batches wait in the
// outbox instead of being dropped, and all of them arrive, in order, once the peer reads.
TEST_F(TupleOutboxTest, APeerThatDoesNotReadHoldsItsBatchesUntilItDoes) {
  TupleOutbox outbox(context_, {.batch_bytes = 1, .batch_window_us = 0});
  ASSERT_THAT(outbox.Start(), IsOk());
  const std::vector<float> values(1024, 1.0f);  // 4 KiB a tuple: past the kernel's buffers
  constexpr uint32_t kTuples = 5000;            // one batch each (batch_bytes 1)
  for (uint32_t s = 0; s < kTuples; ++s) {
    outbox.Add(endpoint_, Header(s), Tensor::F32({1024}, values), false);
    const auto errors = outbox.Flush();
    ASSERT_TRUE(errors.empty()) << errors[0].ToString();
  }
  EXPECT_GT(outbox.held(), 0u) << "the peer read nothing, yet everything went";
  EXPECT_LT(outbox.stats().tuples, kTuples);
  EXPECT_EQ(outbox.stats().batches + outbox.held(), kTuples) << "a batch was neither sent nor held";

  // The peer reads; the held batch goes on the outbox's timer.
  uint32_t next = 0;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (next < kTuples && std::chrono::steady_clock::now() < deadline) {
    while (auto in = Receive(10ms)) {
      auto batch = in->header.As<proto::TupleBatch>();
      ASSERT_THAT(batch, IsOk());
      for (const auto& h : batch->tuples) ASSERT_EQ(h.shard, next++) << "out of order";
      if (next == kTuples) break;
    }
    if (TimerFires(outbox, 100)) {
      ASSERT_TRUE(outbox.Flush().empty());
    }
  }
  EXPECT_EQ(next, kTuples) << "tuples were lost";
  EXPECT_EQ(outbox.held(), 0u);
  EXPECT_EQ(outbox.stats().tuples, kTuples);
}

TEST_F(TupleOutboxTest, ABatchHeldPastTheHoldLimitIsDroppedAndReported) {
  TupleOutbox outbox(context_, {.batch_bytes = 1, .batch_window_us = 0}, 50ms);
  ASSERT_THAT(outbox.Start(), IsOk());
  const std::vector<float> values(1024, 1.0f);
  // A producer goes on adding (64 MB/s) while the peer reads nothing, until a batch is
  // dropped.
  std::vector<Status> errors;
  bool held = false;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (uint32_t s = 0; errors.empty() && std::chrono::steady_clock::now() < deadline;) {
    for (int i = 0; i < 16; ++i) {
      outbox.Add(endpoint_, Header(s++), Tensor::F32({1024}, values), false);
    }
    errors = outbox.Flush();
    held = held || outbox.held() > 0;
    TimerFires(outbox, 1);
  }
  EXPECT_TRUE(held);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].message().find("took nothing for 50 ms"), std::string::npos)
      << errors[0].ToString();
  EXPECT_EQ(outbox.held(), 0u);
}

TEST_F(TupleOutboxTest, APeerDeclaredLostDropsWhatWasQueuedOrHeldForIt) {
  TupleOutbox outbox(context_, {.batch_bytes = 1 << 20, .batch_window_us = 0});
  ASSERT_THAT(outbox.Start(), IsOk());
  const std::vector<float> values(1024, 1.0f);
  // The peer reads nothing until batches are held; one more tuple then queues behind them.
  uint32_t added = 0;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (outbox.held() == 0 && std::chrono::steady_clock::now() < deadline) {
    outbox.Add(endpoint_, Header(added++), Tensor::F32({1024}, values), false);
    ASSERT_TRUE(outbox.Flush().empty());
  }
  ASSERT_GT(outbox.held(), 0u) << "the peer's queue never filled";
  outbox.Add(endpoint_, Header(added++), Tensor::F32({1024}, values), false);

  EXPECT_EQ(outbox.PeerLost(endpoint_), added - outbox.stats().tuples);
  EXPECT_EQ(outbox.held(), 0u);
  EXPECT_EQ(outbox.PeerLost(endpoint_), 0u);
  EXPECT_FALSE(TimerFires(outbox, 200)) << "a retry is still armed for the lost peer";
  EXPECT_TRUE(outbox.Flush().empty());
}

}  // namespace
}  // namespace atl::executor
