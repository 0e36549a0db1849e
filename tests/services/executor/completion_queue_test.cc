// CompletionQueue without processes: pushes from other threads wake the loop's fd, and Take
// hands over everything in push order.
#include "services/executor/completion_queue.h"

#include <poll.h>

#include <thread>

#include <gtest/gtest.h>

#include "tests/services/executor/executor_test_util.h"
#include "tests/status_matchers.h"

namespace atl::executor {
namespace {

bool Readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1;
}

TEST(CompletionQueueTest, PushesFromADeviceThreadWakeTheLoopAndComeOutInOrder) {
  CompletionQueue queue;
  ASSERT_THAT(queue.Open(), IsOk());
  EXPECT_FALSE(Readable(queue.fd(), 0));
  std::thread device([&queue] {
    for (uint32_t s = 0; s < 3; ++s) {
      Completion c;
      c.item = testutil::MakeItem(testutil::MakeEntry(1, s, 3));
      queue.Push(std::move(c));
    }
    proto::TupleHeader h;
    h.shard = 9;
    queue.Push(CompletionQueue::OutgoingTuple{"tcp://peer:1", h, Tensor::F32({1}, {2})});
  });
  device.join();
  EXPECT_TRUE(Readable(queue.fd(), 1000));

  CompletionQueue::Batch batch = queue.Take();
  ASSERT_EQ(batch.done.size(), 3u);
  for (uint32_t s = 0; s < 3; ++s) EXPECT_EQ(batch.done[s].item->entry.shard, s);
  ASSERT_EQ(batch.outgoing.size(), 1u);
  EXPECT_EQ(batch.outgoing[0].endpoint, "tcp://peer:1");
  EXPECT_EQ(batch.outgoing[0].header.shard, 9u);
  EXPECT_FALSE(Readable(queue.fd(), 0)) << "Take must clear the wake-up";
  EXPECT_TRUE(queue.Take().done.empty());
}

}  // namespace
}  // namespace atl::executor
