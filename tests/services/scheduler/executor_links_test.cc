// ExecutorLinks over real ZeroMQ: a ROUTER on loopback stands for an executor's control
// socket, and reads nothing until the test lets it. Every wait is bounded.
#include "services/scheduler/executor_links.h"

#include <gtest/gtest.h>
#include "tests/status_matchers.h"

namespace atl::scheduler {
namespace {

using namespace std::chrono_literals;

class ExecutorLinksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto bound = net::Bind(executor_, "tcp://127.0.0.1:*");
    ASSERT_THAT(bound, IsOk());
    endpoint_ = *bound;
  }

  // A cancel of run `n` whose failure text pads it to 4 KiB: past the kernel's buffers soon.
  static proto::CancelRun Numbered(uint64_t n) { return {1, n, std::string(4096, 'x')}; }

  // Sends numbered messages until one is held; returns how many were sent or held.
  uint64_t FillUntilHeld(ExecutorLinks& links) {
    uint64_t n = 0;
    while (links.held() == 0 && n < 100000) {
      EXPECT_THAT(links.Send(endpoint_, Numbered(n++)), IsOk());
    }
    return n;
  }

  // The run id of the next message the executor reads, within `timeout`.
  std::optional<uint64_t> Read(std::chrono::milliseconds timeout) {
    auto frames = net::RecvFrames(executor_, timeout);
    if (!frames.ok() || !frames->has_value()) return std::nullopt;
    auto in = proto::ParseIncoming(std::move(**frames), /*routed=*/true);
    if (!in.ok()) return std::nullopt;
    auto cancel = in->header.As<proto::CancelRun>();
    if (!cancel.ok()) return std::nullopt;
    return cancel->run_id;
  }

  zmq::context_t context_;
  zmq::socket_t executor_ = net::MakeSocket(context_, zmq::socket_type::router);
  std::string endpoint_;
};

TEST_F(ExecutorLinksTest, WhatAFullQueueRefusesIsHeldAndGoesInOrderOnceTheExecutorReads) {
  ExecutorLinks links(context_);
  uint64_t sent = FillUntilHeld(links);
  ASSERT_GT(links.held(), 0u) << "the executor read nothing, yet everything went";
  // Later messages queue behind the held one, even when there would be room for them.
  for (int i = 0; i < 10; ++i) ASSERT_THAT(links.Send(endpoint_, Numbered(sent++)), IsOk());
  EXPECT_EQ(links.held(), 11u);

  uint64_t next = 0;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (next < sent && std::chrono::steady_clock::now() < deadline) {
    while (auto run = Read(10ms)) ASSERT_EQ(*run, next++) << "out of order";
    links.Retry();
  }
  EXPECT_EQ(next, sent) << "messages were lost";
  EXPECT_EQ(links.held(), 0u);
}

TEST_F(ExecutorLinksTest, WhatIsHeldForALostExecutorIsDropped) {
  ExecutorLinks links(context_);
  FillUntilHeld(links);
  ASSERT_THAT(links.Send(endpoint_, Numbered(0)), IsOk());
  EXPECT_EQ(links.Drop(endpoint_), 2u);
  EXPECT_EQ(links.held(), 0u);
  EXPECT_EQ(links.Drop(endpoint_), 0u);
}

TEST_F(ExecutorLinksTest, ANonEndpointIsAnErrorNotAHold) {
  ExecutorLinks links(context_);
  Status sent = links.Send("not an endpoint", Numbered(0));
  EXPECT_FALSE(sent.ok());
  EXPECT_EQ(links.held(), 0u);
}

}  // namespace
}  // namespace atl::scheduler
