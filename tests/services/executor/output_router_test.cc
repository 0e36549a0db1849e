// OutputRouter without processes: local consumers fed through a mailbox, remote tuples and
// store writes captured, reshard pieces put together, routed rows selected.
#include "services/executor/output_router.h"

#include <gtest/gtest.h>

#include "tests/services/executor/executor_test_util.h"
#include "tests/status_matchers.h"

namespace atl::executor {
namespace {

using testutil::MakeEntry;
using testutil::MakeItem;
using testutil::RecordingSink;
using testutil::StoreDest;
using testutil::TupleDest;
using Call = RecordingSink::Call;

constexpr char kSelf[] = "tcp://self:1";
constexpr char kPeer[] = "tcp://peer:1";

class OutputRouterTest : public ::testing::Test {
 protected:
  struct Remote {
    std::string endpoint;
    proto::TupleHeader header;
    Result<Tensor> value;
    bool urgent;
  };
  struct StoreWrite {
    proto::OutputDest dest;
    Result<Tensor> value;
  };

  // A finished shard 1 of run 7 node 3 with outputs `outputs` (or `failure`).
  Completion Done(std::vector<std::vector<proto::OutputDest>> dests,
                  Result<std::vector<Tensor>> outputs) {
    proto::Entry e = MakeEntry(1, 1, 2);
    e.outputs = std::move(dests);
    Completion c;
    c.item = MakeItem(std::move(e));
    c.outputs = std::move(outputs);
    return c;
  }
  // A consumer awaiting (run 7, node, input, shard).
  std::shared_ptr<WorkItem> Consumer(uint32_t node, uint32_t input, uint32_t shard) {
    auto item = MakeItem(MakeEntry(2, shard, 2));
    mailbox_.Await({7, node, input, shard}, item);
    return item;
  }

  RecordingSink sink_;
  InputMailbox mailbox_{sink_};
  ObjectReaders readers_{sink_};
  std::vector<Remote> remote_;
  std::vector<StoreWrite> stored_;
  OutputRouter router_{
      kSelf, mailbox_, readers_,
      [this](const std::string& endpoint, proto::TupleHeader h, Result<Tensor> v, bool urgent) {
        remote_.push_back({endpoint, std::move(h), std::move(v), urgent});
      },
      [this](const proto::OutputDest& dest, const Result<Tensor>& v) {
        stored_.push_back({dest, v});
      }};
};

TEST_F(OutputRouterTest, EachDestinationGetsTheOutputOnce) {
  auto local = Consumer(4, 0, 1);
  Completion done = Done({{TupleDest(kSelf, 4, 0, 1), TupleDest(kPeer, 4, 0, 0), StoreDest(5, 1)}},
                         std::vector<Tensor>{Tensor::F32({2}, {1, 2})});
  router_.DeliverLocal(done);  // on the device thread
  EXPECT_TRUE(done.local_tuples_delivered);
  auto calls = sink_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].item, local);
  EXPECT_EQ(*calls[0].value, Tensor::F32({2}, {1, 2}));

  router_.Route(done);  // on the loop
  EXPECT_EQ(sink_.calls().size(), 1u) << "the local consumer was fed twice";
  EXPECT_EQ(mailbox_.early(), 0u) << "the local tuple was sent again";
  ASSERT_EQ(remote_.size(), 1u);
  EXPECT_EQ(remote_[0].endpoint, kPeer);
  EXPECT_EQ(remote_[0].header.run_id, 7u);
  EXPECT_EQ(remote_[0].header.node, 4u);
  EXPECT_EQ(remote_[0].header.shard, 0u);
  EXPECT_FALSE(remote_[0].urgent);
  ASSERT_THAT(remote_[0].value, IsOk());
  EXPECT_EQ(*remote_[0].value, Tensor::F32({2}, {1, 2}));
  ASSERT_EQ(stored_.size(), 1u);
  EXPECT_EQ(stored_[0].dest.object_id, 5u);
  EXPECT_EQ(*stored_[0].value, Tensor::F32({2}, {1, 2}));
}

TEST_F(OutputRouterTest, AShardReadingAStoreOutputGetsItFromTheDeviceThreadAndTheStoreStill) {
  auto reader = MakeItem(MakeEntry(2, 1, 2));
  readers_.Await({5, 1}, reader, 0);  // an op-by-op call on the writer's future
  Completion done = Done({{StoreDest(5, 1)}}, std::vector<Tensor>{Tensor::F32({1}, {4})});
  router_.DeliverLocal(done);  // on the device thread
  const auto calls = sink_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].kind, Call::kDeliver);
  EXPECT_EQ(calls[0].item, reader);
  EXPECT_EQ(*calls[0].value, Tensor::F32({1}, {4}));
  EXPECT_TRUE(stored_.empty()) << "the store's write is the loop's";
  router_.Route(done);
  ASSERT_EQ(stored_.size(), 1u);
  EXPECT_EQ(sink_.calls().size(), 1u);
}

TEST_F(OutputRouterTest, AFailedStoreOutputsReadersAreLeftToTheWrite) {
  auto reader = MakeItem(MakeEntry(2, 1, 2));
  readers_.Await({5, 1}, reader, 0);
  Completion done = Done({{StoreDest(5, 1)}}, Internal("kernel broke"));
  router_.DeliverLocal(done);
  EXPECT_TRUE(sink_.calls().empty()) << "the write fails its readers, with its context";
  router_.Route(done);
  ASSERT_EQ(stored_.size(), 1u);
  EXPECT_FALSE(stored_[0].value.ok());
}

TEST_F(OutputRouterTest, WithoutTheDeviceThreadTheLoopFeedsLocalConsumers) {
  auto local = Consumer(4, 1, 0);
  Completion done = Done({{TupleDest(kSelf, 4, 1, 0)}}, std::vector<Tensor>{Tensor::F32({1}, {6})});
  router_.Route(done);
  const auto calls = sink_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].item, local);
  EXPECT_EQ(calls[0].input, 1u);
  EXPECT_TRUE(remote_.empty());
}

TEST_F(OutputRouterTest, AFailedShardPassesItsErrorToEveryDestination) {
  auto local = Consumer(4, 0, 1);
  Completion done = Done({{TupleDest(kSelf, 4, 0, 1), TupleDest(kPeer, 4, 0, 0), StoreDest(5, 1)}},
                         Internal("kernel broke"));
  router_.DeliverLocal(done);
  router_.Route(done);
  const auto calls = sink_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].kind, Call::kFail);
  EXPECT_EQ(calls[0].status.message(), "kernel broke");
  ASSERT_EQ(remote_.size(), 1u);
  EXPECT_EQ(remote_[0].value.status().message(), "kernel broke");
  ASSERT_EQ(stored_.size(), 1u);
  EXPECT_EQ(stored_[0].value.status().message(), "kernel broke");
}

TEST_F(OutputRouterTest, ReshardPiecesForThisHostArePutTogetherBeforeTheConsumerGetsThem) {
  auto consumer = Consumer(4, 0, 0);
  // Shard 1's [4] output goes to consumer shard 0 ([4]) in two blocks of 2, each landing in
  // the other half.
  proto::OutputDest first = TupleDest(kSelf, 4, 0, 0);
  first.piece = {{0}, {2}, {2}, {4}, 2};
  proto::OutputDest second = TupleDest(kSelf, 4, 0, 0);
  second.piece = {{2}, {2}, {0}, {4}, 2};
  Completion done = Done({{first, second}}, std::vector<Tensor>{Tensor::F32({4}, {1, 2, 3, 4})});
  router_.DeliverLocal(done);
  EXPECT_TRUE(sink_.calls().empty()) << "pieces are the loop's to put together";
  router_.Route(done);
  const auto calls = sink_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].item, consumer);
  EXPECT_EQ(*calls[0].value, Tensor::F32({4}, {3, 4, 1, 2}));
  EXPECT_EQ(router_.partial_shards(), 0u);
}

TEST_F(OutputRouterTest, RoutedRowsGoOnlyWhereTheirDestinationSays) {
  proto::OutputDest to_peer = TupleDest(kPeer, 4, 0, 1);
  to_peer.piece.of = 2;
  to_peer.route_by = 1;
  to_peer.route_shards = 2;
  Completion done = Done({{to_peer}, {}}, std::vector<Tensor>{Tensor::F32({3}, {10, 20, 30}),
                                                              Tensor::I32({3}, {1, 0, 1})});
  router_.Route(done);
  ASSERT_EQ(remote_.size(), 1u);
  EXPECT_EQ(remote_[0].header.kind, proto::TupleHeader::kRows);
  EXPECT_EQ(remote_[0].header.pieces, 2u);
  EXPECT_EQ(remote_[0].header.part, 1u) << "the producer shard's place among the pieces";
  ASSERT_THAT(remote_[0].value, IsOk());
  EXPECT_EQ(*remote_[0].value, Tensor::F32({2}, {10, 30}));
}

TEST_F(OutputRouterTest, ARowRoutedNowhereIsAnErrorForEveryConsumer) {
  proto::OutputDest to_peer = TupleDest(kPeer, 4, 0, 0);
  to_peer.piece.of = 2;
  to_peer.route_by = 1;
  to_peer.route_shards = 2;
  Completion done = Done({{to_peer}, {}},
                         std::vector<Tensor>{Tensor::F32({2}, {10, 20}), Tensor::I32({2}, {0, 2})});
  router_.Route(done);
  ASSERT_EQ(remote_.size(), 1u);
  EXPECT_EQ(remote_[0].value.status().code(), Code::kInvalidArgument);
  EXPECT_NE(remote_[0].value.status().message().find("routed to shard 2"), std::string::npos);
}

TEST_F(OutputRouterTest, ReceivedRowsWithoutAProducerCountFailTheConsumer) {
  auto consumer = Consumer(4, 0, 0);
  proto::TupleHeader h;
  h.kind = proto::TupleHeader::kRows;
  h.run_id = 7;
  h.node = 4;
  router_.Receive(h, Tensor::F32({1}, {1}));
  const auto calls = sink_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].kind, Call::kFail);
  EXPECT_EQ(calls[0].item, consumer);
}

TEST_F(OutputRouterTest, ACollectivePartialForThisHostStillLeavesUrgently) {
  proto::TupleHeader h;
  h.kind = proto::TupleHeader::kCollective;
  router_.Queue(kSelf, h, Tensor::F32({1}, {1}));
  router_.Queue(kPeer, h, Tensor::F32({1}, {1}));
  ASSERT_EQ(remote_.size(), 2u);
  EXPECT_TRUE(remote_[0].urgent);
  EXPECT_TRUE(remote_[1].urgent);
  EXPECT_TRUE(sink_.calls().empty());
}

}  // namespace
}  // namespace atl::executor
