// StoreLink without an object-store process: requests are captured by a fake, replies are
// fed in decoded, and the arena is a real shared-memory region made here.
#include "services/executor/store_link.h"

#include <poll.h>

#include <cstring>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#include <sanitizer/common_interface_defs.h>
#endif

#include "tests/services/executor/executor_test_util.h"
#include "tests/status_matchers.h"

namespace atl::executor {
namespace {

// A death test's child faults on purpose. Under a sanitizer its report of that fault goes to
// the child's stderr, which the death test reads, instead of to the report files that
// scripts/sanitize.sh counts as failures.
void ExpectedFaultReportsToStderr() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  __sanitizer_set_report_path("stderr");
#endif
}

using testutil::MakeEntry;
using testutil::MakeItem;
using testutil::RecordingSink;
using Call = RecordingSink::Call;

// Records every request as encoded for the wire; refuses them all while `refuse` is not OK.
class FakeStore final : public StoreRequests {
 public:
  struct Sent {
    uint64_t id = 0;
    proto::Header header;  // decoded from the encoded request
  };
  Status Send(uint64_t id, const proto::CreateObject& r) override { return Record(id, r); }
  Status Send(uint64_t id, const proto::GetObject& r) override { return Record(id, r); }
  Status Send(uint64_t id, const proto::SealObject& r) override { return Record(id, r); }
  Status Send(uint64_t id, const proto::PutObject& r, const Tensor& value) override {
    ATOLL_RETURN_IF_ERROR(Record(id, r));
    values[sent.size() - 1] = value;
    return Status::Ok();
  }
  Status Send(uint64_t id, const proto::UnpinObjects& r) override { return Record(id, r); }

  std::vector<Sent> sent;
  std::map<size_t, Tensor> values;  // a put's data, by its index in `sent`
  Status refuse;

 private:
  template <typename T>
  Status Record(uint64_t id, const T& body) {
    if (!refuse.ok()) return refuse;
    zmq::message_t encoded = proto::EncodeHeader(id, body);
    ATOLL_ASSIGN_OR_RETURN(proto::Header header,
                           proto::DecodeHeader(encoded.data(), encoded.size()));
    sent.push_back({id, std::move(header)});
    return Status::Ok();
  }
};

template <typename T>
proto::Incoming Reply(uint64_t id, const T& body) {
  std::vector<zmq::message_t> frames;
  frames.push_back(proto::EncodeHeader(id, body));
  auto in = proto::ParseIncoming(std::move(frames), /*routed=*/false);
  EXPECT_THAT(in, IsOk());
  return std::move(in).value();
}

class StoreLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto region = ShmRegion::Create(ShmRegion::MakeName("store-link-test"), 4096);
    ASSERT_THAT(region, IsOk());
    arena_ = std::make_unique<ShmRegion>(std::move(region).value());
    // Every shard waits for its space unless a test lets it run ahead.
    MakeLink({.output_bytes = 0, .budget_bytes = 0});
  }
  void MakeLink(RunAheadLimits run_ahead, size_t max_in_flight = StoreLink::kMaxInFlight) {
    link_ = std::make_unique<StoreLink>(
        store_, sink_, readers_, *arena_,
        StoreLink::Hooks{.on_error = [this](const Status& e) { errors_.push_back(e); },
                         .on_restarted = {},
                         .on_ahead_answered =
                             [this](const std::shared_ptr<WorkItem>& item, const Status& answer) {
                               ahead_answers_.emplace_back(item, answer);
                             }},
        run_ahead, max_in_flight);
  }

  // An item that writes output shard (object, 0), f32 [2].
  std::shared_ptr<WorkItem> Writer(uint64_t object = 5) {
    auto item = MakeItem(MakeEntry(1, 0, 1));
    EXPECT_THAT(link_->ReserveOutput({object, 0, 42, DType::kF32, {2}, 0}, false, item), IsOk());
    return item;
  }
  // An item admitted to read output shard (object, 0) as its input 0.
  std::shared_ptr<WorkItem> ReaderOf(uint64_t object) {
    proto::Entry e = MakeEntry(1, 0, 1);
    e.inputs = {{proto::InputSource::kStore, object, 0}};
    auto reader = MakeItem(e);
    link_->ReadInput(reader, 0);
    return reader;
  }
  // Request `i` as a T (a default T when it is not one; the test fails then).
  template <typename T>
  T SentAs(size_t i) {
    if (i >= store_.sent.size()) {
      ADD_FAILURE() << "only " << store_.sent.size() << " requests were sent";
      return T{};
    }
    Result<T> body = store_.sent[i].header.As<T>();
    EXPECT_THAT(body, IsOk());
    return body.ok() ? *body : T{};
  }
  float ArenaFloat(uint64_t offset) {
    float v = 0;
    std::memcpy(&v, arena_->data() + offset, sizeof(v));
    return v;
  }

  FakeStore store_;
  RecordingSink sink_;
  ObjectReaders readers_{sink_};
  std::unique_ptr<ShmRegion> arena_;
  std::vector<Status> errors_;
  std::vector<std::pair<std::shared_ptr<WorkItem>, Status>> ahead_answers_;
  std::unique_ptr<StoreLink> link_;
};

TEST_F(StoreLinkTest, AReservedOutputIsWrittenIntoTheArenaAndSealed) {
  auto item = Writer();
  ASSERT_EQ(store_.sent.size(), 1u);
  const auto create = SentAs<proto::CreateObject>(0);
  EXPECT_EQ(create.object_id, 5u);
  EXPECT_EQ(create.shape, (Shape{2}));
  EXPECT_EQ(item->reservations_missing, 1u) << "the shard must wait for its space";

  link_->OnReply(Reply(store_.sent[0].id, proto::CreateObjectReply{64, 8}));
  auto calls = sink_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].kind, Call::kReserved);
  EXPECT_EQ(calls[0].item, item);
  EXPECT_EQ(store_.sent.size(), 1u) << "nothing to seal before the value exists";

  link_->WriteOutput(5, 0, Tensor::F32({2}, {1.5f, -2.0f}));
  EXPECT_EQ(ArenaFloat(64), 1.5f);
  EXPECT_EQ(ArenaFloat(68), -2.0f);
  ASSERT_EQ(store_.sent.size(), 2u);
  const auto seal = SentAs<proto::SealObject>(1);
  EXPECT_EQ(seal.object_id, 5u);
  EXPECT_EQ(seal.error_code, 0);
  EXPECT_EQ(link_->pending_writes(), 0u);

  link_->OnReply(Reply(store_.sent[1].id, proto::Ok{}));
  EXPECT_EQ(link_->pending_requests(), 0u);
  EXPECT_TRUE(errors_.empty());
}

TEST_F(StoreLinkTest, AValueBeforeItsSpaceIsWrittenOnceTheSpaceIsGranted) {
  Writer();
  link_->WriteOutput(5, 0, Tensor::F32({2}, {3, 4}));
  EXPECT_EQ(store_.sent.size(), 1u) << "sealed before the space exists";
  link_->OnReply(Reply(store_.sent[0].id, proto::CreateObjectReply{128, 8}));
  EXPECT_EQ(ArenaFloat(128), 3.0f);
  ASSERT_EQ(store_.sent.size(), 2u);
  EXPECT_EQ(SentAs<proto::SealObject>(1).error_code, 0);
}

TEST_F(StoreLinkTest, AFailedShardSealsItsOutputWithTheError) {
  Writer();
  link_->OnReply(Reply(store_.sent[0].id, proto::CreateObjectReply{0, 8}));
  link_->WriteOutput(5, 0, Result<Tensor>(Internal("kernel broke")));
  ASSERT_EQ(store_.sent.size(), 2u);
  const auto seal = SentAs<proto::SealObject>(1);
  EXPECT_EQ(seal.error_code, static_cast<int32_t>(Code::kInternal));
  EXPECT_EQ(seal.error, "kernel broke");
}

TEST_F(StoreLinkTest, ARefusedReservationFailsTheShardAndIsReported) {
  auto item = Writer();
  link_->OnReply(Reply(store_.sent[0].id, proto::ToError(OutOfMemory("device 0 is full"))));
  auto calls = sink_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].kind, Call::kFail);
  EXPECT_EQ(calls[0].item, item);
  EXPECT_EQ(calls[0].status.code(), Code::kOutOfMemory);
  EXPECT_NE(calls[0].status.ToString().find("reserve output"), std::string::npos);
  ASSERT_EQ(errors_.size(), 1u);
  EXPECT_EQ(errors_[0].code(), Code::kOutOfMemory);
  EXPECT_EQ(link_->pending_writes(), 0u);

  link_->WriteOutput(5, 0, Tensor::F32({2}, {1, 2}));  // the shard ran anyway: nothing to do
  EXPECT_EQ(store_.sent.size(), 1u);
}

TEST_F(StoreLinkTest, ASmallOutputsShardRunsAtOnceAndItsValueIsPutWhole) {
  MakeLink({});
  auto item = MakeItem(MakeEntry(1, 0, 1));
  auto ahead = link_->ReserveOutput({5, 0, 42, DType::kF32, {2}, 1}, false, item);
  ASSERT_THAT(ahead, IsOk());
  EXPECT_TRUE(*ahead);
  EXPECT_EQ(item->reservations_missing, 0u) << "the shard need not wait";
  EXPECT_TRUE(store_.sent.empty()) << "no reservation round trip";
  EXPECT_EQ(link_->ahead_bytes(), 8u);

  link_->WriteOutput(5, 0, Tensor::F32({2}, {1.5f, 2.5f}));
  ASSERT_EQ(store_.sent.size(), 1u);
  const auto put = SentAs<proto::PutObject>(0);
  EXPECT_EQ(put.object_id, 5u);
  EXPECT_EQ(put.owner_client, 42u);
  EXPECT_EQ(put.shape, (Shape{2}));
  EXPECT_EQ(put.device, 1) << "into the device's memory, as reserved";
  EXPECT_EQ(store_.values.at(0), Tensor::F32({2}, {1.5f, 2.5f}));
  EXPECT_TRUE(ahead_answers_.empty()) << "not done before the store has it";

  link_->OnReply(Reply(store_.sent[0].id, proto::Ok{}));
  ASSERT_EQ(ahead_answers_.size(), 1u);
  EXPECT_EQ(ahead_answers_[0].first, item);
  EXPECT_THAT(ahead_answers_[0].second, IsOk());
  EXPECT_TRUE(sink_.calls().empty()) << "no grant to a stream that did not wait for it";
  EXPECT_EQ(link_->ahead_bytes(), 0u);
  EXPECT_EQ(link_->pending_writes(), 0u);
  EXPECT_EQ(link_->pending_requests(), 0u);
}

TEST_F(StoreLinkTest, AFailedShardThatRanAheadSealsItsOutputWithTheError) {
  MakeLink({});
  auto item = MakeItem(MakeEntry(1, 0, 1));
  ASSERT_TRUE(*link_->ReserveOutput({5, 0, 42, DType::kF32, {2}, 0}, false, item));
  link_->WriteOutput(5, 0, Result<Tensor>(Internal("kernel broke")));
  ASSERT_EQ(store_.sent.size(), 1u);
  EXPECT_EQ(SentAs<proto::CreateObject>(0).shape, (Shape{2}));
  link_->OnReply(Reply(store_.sent[0].id, proto::CreateObjectReply{0, 8}));
  ASSERT_EQ(store_.sent.size(), 2u);
  EXPECT_EQ(SentAs<proto::SealObject>(1).error, "kernel broke");
  ASSERT_EQ(ahead_answers_.size(), 1u);
  EXPECT_THAT(ahead_answers_[0].second, IsOk()) << "its output is in the store, sealed failed";
  EXPECT_EQ(link_->ahead_bytes(), 0u);
}

TEST_F(StoreLinkTest, AnOutputOverTheLimitOrBeyondTheBudgetWaitsForItsSpace) {
  MakeLink({.output_bytes = 8, .budget_bytes = 12});
  auto first = MakeItem(MakeEntry(1, 0, 1));
  auto big = MakeItem(MakeEntry(1, 1, 1));
  auto second = MakeItem(MakeEntry(1, 2, 1));
  EXPECT_TRUE(*link_->ReserveOutput({5, 0, 42, DType::kF32, {2}, 0}, false, first));
  EXPECT_FALSE(*link_->ReserveOutput({6, 0, 42, DType::kF32, {3}, 0}, false, big));
  EXPECT_FALSE(*link_->ReserveOutput({7, 0, 42, DType::kF32, {2}, 0}, false, second))
      << "8 more bytes would pass the budget of 12";
  EXPECT_EQ(big->reservations_missing, 1u);
  EXPECT_EQ(second->reservations_missing, 1u);
  EXPECT_EQ(link_->ahead_bytes(), 8u);

  link_->WriteOutput(5, 0, Tensor::F32({2}, {1, 2}));
  ASSERT_EQ(store_.sent.size(), 3u);
  link_->OnReply(Reply(store_.sent[2].id, proto::Ok{}));
  EXPECT_EQ(link_->ahead_bytes(), 0u);
  auto third = MakeItem(MakeEntry(1, 3, 1));
  EXPECT_TRUE(*link_->ReserveOutput({8, 0, 42, DType::kF32, {2}, 0}, false, third))
      << "the store took the put: its budget is back";
}

TEST_F(StoreLinkTest, ARefusedOrLostOutputOfAShardThatRanAheadIsReportedForIt) {
  MakeLink({});
  auto refused = MakeItem(MakeEntry(1, 0, 1));
  auto lost = MakeItem(MakeEntry(1, 1, 1));
  ASSERT_TRUE(*link_->ReserveOutput({5, 0, 42, DType::kF32, {2}, 0}, false, refused));
  ASSERT_TRUE(*link_->ReserveOutput({6, 0, 42, DType::kF32, {2}, 0}, false, lost));
  link_->WriteOutput(5, 0, Tensor::F32({2}, {1, 2}));
  link_->OnReply(Reply(store_.sent[0].id, proto::ToError(OutOfMemory("device 0 is full"))));
  link_->Detach(Unavailable("the store restarted"));  // before `lost` ran

  ASSERT_EQ(ahead_answers_.size(), 2u);
  EXPECT_EQ(ahead_answers_[0].first, refused);
  EXPECT_EQ(ahead_answers_[0].second.code(), Code::kOutOfMemory);
  EXPECT_NE(ahead_answers_[0].second.ToString().find("put output"), std::string::npos);
  EXPECT_EQ(ahead_answers_[1].first, lost);
  EXPECT_EQ(ahead_answers_[1].second.code(), Code::kUnavailable);
  EXPECT_TRUE(sink_.calls().empty()) << "neither waits in its stream: nothing to fail there";
  EXPECT_EQ(link_->ahead_bytes(), 0u);
  ASSERT_EQ(errors_.size(), 1u) << "the refusal is reported too";

  link_->WriteOutput(6, 0, Tensor::F32({2}, {3, 4}));  // it ran anyway: nothing to send
  EXPECT_EQ(store_.sent.size(), 1u);
}

TEST_F(StoreLinkTest, ADataDependentOutputIsReservedOnceItsShapeIsKnown) {
  auto item = MakeItem(MakeEntry(1, 0, 1));
  ASSERT_THAT(link_->ReserveOutput({6, 0, 42, DType::kF32, {kDynamicDim}, 0}, true, item), IsOk());
  EXPECT_TRUE(store_.sent.empty());
  EXPECT_EQ(item->reservations_missing, 0u) << "a deferred output does not hold the shard";

  link_->WriteOutput(6, 0, Tensor::F32({3}, {1, 2, 3}));
  ASSERT_EQ(store_.sent.size(), 1u);
  EXPECT_EQ(SentAs<proto::CreateObject>(0).shape, (Shape{3}));
  link_->OnReply(Reply(store_.sent[0].id, proto::CreateObjectReply{256, 12}));
  EXPECT_EQ(ArenaFloat(264), 3.0f);
  ASSERT_EQ(store_.sent.size(), 2u);
  EXPECT_EQ(SentAs<proto::SealObject>(1).object_id, 6u);
  EXPECT_TRUE(sink_.calls().empty()) << "nobody waited for a deferred reservation";
}

TEST_F(StoreLinkTest, AFailedDataDependentOutputIsSealedEmptyWithTheError) {
  auto item = MakeItem(MakeEntry(1, 0, 1));
  ASSERT_THAT(link_->ReserveOutput({6, 0, 42, DType::kF32, {kDynamicDim, 4}, 0}, true, item),
              IsOk());
  link_->WriteOutput(6, 0, Result<Tensor>(Internal("filter broke")));
  ASSERT_EQ(store_.sent.size(), 1u);
  EXPECT_EQ(SentAs<proto::CreateObject>(0).shape, (Shape{0, 4}));
  link_->OnReply(Reply(store_.sent[0].id, proto::CreateObjectReply{0, 0}));
  ASSERT_EQ(store_.sent.size(), 2u);
  EXPECT_EQ(SentAs<proto::SealObject>(1).error, "filter broke");
}

TEST_F(StoreLinkTest, AReaderAfterADeferredValueButBeforeItsSpaceGetsTheValueAtOnce) {
  auto item = MakeItem(MakeEntry(1, 0, 1));
  ASSERT_THAT(link_->ReserveOutput({6, 0, 42, DType::kF32, {kDynamicDim}, 0}, true, item), IsOk());
  link_->WriteOutput(6, 0, Tensor::F32({2}, {5, 6}));  // its space asked for, not granted yet
  proto::Entry e = MakeEntry(2, 0, 1);
  e.inputs = {{proto::InputSource::kStore, 6, 0}};
  auto reader = MakeItem(e);
  link_->ReadInput(reader, 0);
  auto calls = sink_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].kind, Call::kDeliver);
  EXPECT_EQ(calls[0].item, reader);
  EXPECT_EQ(store_.sent.size(), 1u) << "no read from the store";
}

TEST_F(StoreLinkTest, AnArgumentIsReadFromTheArenaWhenTheStoreAnswers) {
  proto::Entry e = MakeEntry(1, 0, 1);
  e.inputs = {{proto::InputSource::kTuple, 0, 0}, {proto::InputSource::kStore, 9, 2}};
  auto reader = MakeItem(e);
  const float values[] = {7.0f, 8.0f};
  std::memcpy(arena_->data() + 512, values, sizeof(values));

  link_->ReadInput(reader, 1);
  ASSERT_EQ(store_.sent.size(), 1u);
  const auto get = SentAs<proto::GetObject>(0);
  EXPECT_EQ(get.object_id, 9u);
  EXPECT_EQ(get.shard, 2u);
  EXPECT_FALSE(get.inline_data) << "the bytes come through the arena";
  EXPECT_GT(get.timeout_ms, 0u);
  EXPECT_FALSE(get.pin) << "no arena is mapped read-only before Attach: the bytes are copied";

  link_->OnReply(Reply(store_.sent[0].id, proto::GetObjectReply{DType::kF32, {2}, 512, 8}));
  const auto calls = sink_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].kind, Call::kDeliver);
  EXPECT_EQ(calls[0].input, 1u);
  EXPECT_EQ(*calls[0].value, Tensor::F32({2}, {7, 8}));
}

// Whether `fd` is readable now.
bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

TEST_F(StoreLinkTest, APinnedArgumentIsReadInPlaceAndItsLeaseGivenBackWhenItsLastCopyGoes) {
  link_->Attach(0x5eed);
  const float values[] = {7.0f, 8.0f};
  std::memcpy(arena_->data() + 512, values, sizeof(values));
  auto reader = ReaderOf(9);
  ASSERT_EQ(store_.sent.size(), 1u);
  EXPECT_TRUE(SentAs<proto::GetObject>(0).pin);
  link_->OnReply(
      Reply(store_.sent[0].id, proto::GetObjectReply{DType::kF32, {2}, 512, 8, 0x5eed, 7, 3}));
  ASSERT_EQ(sink_.calls().size(), 1u);
  std::optional<Tensor> view = sink_.TakeValue(0);
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(*view, Tensor::F32({2}, {7, 8}));
  EXPECT_FALSE(view->writable());
  EXPECT_EQ(view->content_id(), (ContentId{0x5eed, 3}));
  // In place: what the arena holds is what the view reads (a copy would still say 7, 8).
  const float later[] = {1.5f, 2.5f};
  std::memcpy(arena_->data() + 512, later, sizeof(later));
  EXPECT_EQ(*view, Tensor::F32({2}, {1.5, 2.5}));
  // A copy owns its bytes, may be written and is known by no id.
  Tensor copy = *view;
  EXPECT_TRUE(copy.writable());
  EXPECT_FALSE(copy.content_id().known());

  // The lease is held while the view lives, then given back once, from the thread that
  // dropped it, waking the loop.
  EXPECT_FALSE(Readable(link_->unpin_fd()));
  link_->SendUnpins();
  EXPECT_EQ(store_.sent.size(), 1u) << "nothing to give back while the view lives";
  std::thread([v = std::move(view)]() mutable { v.reset(); }).join();
  EXPECT_TRUE(Readable(link_->unpin_fd()));
  link_->SendUnpins();
  EXPECT_FALSE(Readable(link_->unpin_fd()));
  ASSERT_EQ(store_.sent.size(), 2u);
  EXPECT_EQ(SentAs<proto::UnpinObjects>(1), (proto::UnpinObjects{0x5eed, {7}}));
  EXPECT_TRUE(errors_.empty());
}

TEST_F(StoreLinkTest, AViewWritesFaultInsteadOfChangingTheStoredObject) {
  link_->Attach(0x5eed);
  ReaderOf(9);
  link_->OnReply(
      Reply(store_.sent[0].id, proto::GetObjectReply{DType::kF32, {2}, 512, 8, 0x5eed, 7, 3}));
  std::optional<Tensor> view = sink_.TakeValue(0);
  ASSERT_TRUE(view.has_value());
  EXPECT_DEATH(
      {
        ExpectedFaultReportsToStderr();
        view->as<float>()[0] = 1.0f;
      },
      "")
      << "the view is mapped read-only";
}

TEST_F(StoreLinkTest, AViewOutlivesAStoreRestartAndItsLeaseIsNotSentToTheNewStore) {
  link_->Attach(1);
  const float values[] = {7.0f, 8.0f};
  std::memcpy(arena_->data() + 64, values, sizeof(values));
  ReaderOf(9);
  link_->OnReply(Reply(store_.sent[0].id, proto::GetObjectReply{DType::kF32, {2}, 64, 8, 1, 4, 2}));
  std::optional<Tensor> view = sink_.TakeValue(0);
  ASSERT_TRUE(view.has_value());
  link_->Detach(Unavailable("the store restarted"));
  link_->Attach(2);
  EXPECT_EQ(*view, Tensor::F32({2}, {7, 8})) << "the view holds the mapping it was made from";
  view.reset();
  link_->SendUnpins();
  EXPECT_EQ(store_.sent.size(), 1u) << "the lease died with store instance 1";
}

TEST_F(StoreLinkTest, ALeaseNobodyWillUseIsGivenBackAtOnce) {
  link_->Attach(1);
  // A pinned read answered by another store process: the shard fails, the lease goes back.
  auto reader = ReaderOf(9);
  link_->OnReply(Reply(store_.sent[0].id, proto::GetObjectReply{DType::kF32, {2}, 64, 8, 2, 5, 1}));
  ASSERT_EQ(sink_.calls().size(), 1u);
  EXPECT_EQ(sink_.calls()[0].kind, Call::kFail);
  ASSERT_EQ(store_.sent.size(), 2u);
  EXPECT_EQ(SentAs<proto::UnpinObjects>(1), (proto::UnpinObjects{2, {5}}));
  // A pinned read answered after its request was given up.
  link_->OnReply(Reply(999, proto::GetObjectReply{DType::kF32, {2}, 64, 8, 1, 6, 1}));
  ASSERT_EQ(store_.sent.size(), 3u);
  EXPECT_EQ(SentAs<proto::UnpinObjects>(2), (proto::UnpinObjects{1, {6}}));
  // A pinned read of bytes outside the arena: the reader fails, and the lease goes back.
  auto outside = ReaderOf(10);
  link_->OnReply(
      Reply(store_.sent[3].id, proto::GetObjectReply{DType::kF32, {2}, 4092, 8, 1, 8, 1}));
  ASSERT_EQ(sink_.calls().size(), 2u);
  EXPECT_EQ(sink_.calls()[1].kind, Call::kFail);
  link_->SendUnpins();
  ASSERT_EQ(store_.sent.size(), 5u);
  EXPECT_EQ(SentAs<proto::UnpinObjects>(4), (proto::UnpinObjects{1, {8}}));
}

TEST_F(StoreLinkTest, AnArgumentTheStoreCannotGiveFailsTheReader) {
  proto::Entry e = MakeEntry(1, 0, 1);
  e.inputs = {{proto::InputSource::kStore, 9, 0}};
  auto reader = MakeItem(e);
  link_->ReadInput(reader, 0);
  link_->OnReply(Reply(store_.sent[0].id, proto::ToError(NotFound("object 9 is gone"))));
  // Bytes outside the arena are refused, not read.
  auto outside = MakeItem(e);
  link_->ReadInput(outside, 0);
  link_->OnReply(Reply(store_.sent[1].id, proto::GetObjectReply{DType::kF32, {2}, 4092, 8}));

  const auto calls = sink_.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].kind, Call::kFail);
  EXPECT_EQ(calls[0].status.code(), Code::kNotFound);
  EXPECT_NE(calls[0].status.ToString().find("read argument"), std::string::npos);
  EXPECT_EQ(calls[1].kind, Call::kFail);
  EXPECT_EQ(calls[1].item, outside);
}

TEST_F(StoreLinkTest, AReaderOfAnOutputWrittenHereGetsItWithoutTheStore) {
  Writer();
  auto reader = ReaderOf(5);
  EXPECT_EQ(store_.sent.size(), 1u) << "no GetObject for an object being written here";

  link_->WriteOutput(5, 0, Tensor::F32({2}, {9, 10}));
  const auto calls = sink_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].kind, Call::kDeliver);
  EXPECT_EQ(calls[0].item, reader);
  EXPECT_EQ(*calls[0].value, Tensor::F32({2}, {9, 10}));
}

TEST_F(StoreLinkTest, AReaderOfAnOutputWrittenHereIsHandedItOnceByWhicheverThreadIsFirst) {
  Writer();
  auto reader = ReaderOf(5);
  readers_.Deliver({5, 0}, Tensor::F32({2}, {9, 10}));  // the writer's device thread
  ASSERT_EQ(sink_.calls().size(), 1u);
  EXPECT_EQ(sink_.calls()[0].item, reader);

  link_->WriteOutput(5, 0, Tensor::F32({2}, {9, 10}));  // the loop, after it
  EXPECT_EQ(sink_.calls().size(), 1u) << "the reader was handed the value twice";
  auto later = ReaderOf(5);  // admitted after both: from the write
  const auto calls = sink_.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].item, later);
  EXPECT_EQ(*calls[1].value, Tensor::F32({2}, {9, 10}));
}

TEST_F(StoreLinkTest, ReadersOfAFailedOutputWrittenHereFailWithItsError) {
  Writer();
  auto reader = ReaderOf(5);
  link_->WriteOutput(5, 0, Internal("kernel broke"));
  const auto calls = sink_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].kind, Call::kFail);
  EXPECT_EQ(calls[0].item, reader);
  EXPECT_NE(calls[0].status.ToString().find("kernel broke"), std::string::npos);
}

TEST_F(StoreLinkTest, RequestsThatCannotBeSentFailAtOnce) {
  store_.refuse = Unavailable("store socket closed");
  auto item = MakeItem(MakeEntry(1, 0, 1));
  Result<bool> reserved = link_->ReserveOutput({5, 0, 42, DType::kF32, {2}, 0}, false, item);
  EXPECT_EQ(reserved.status().code(), Code::kUnavailable);
  EXPECT_EQ(item->reservations_missing, 0u);

  proto::Entry e = MakeEntry(1, 0, 1);
  e.inputs = {{proto::InputSource::kStore, 9, 0}};
  auto reader = MakeItem(e);
  link_->ReadInput(reader, 0);
  const auto calls = sink_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].kind, Call::kFail);
  EXPECT_NE(calls[0].status.ToString().find("read argument"), std::string::npos);
  EXPECT_EQ(link_->pending_requests(), 0u);
}

TEST_F(StoreLinkTest, AReplyToNoPendingRequestIsIgnoredAndASealErrorReported) {
  link_->OnReply(Reply(999, proto::CreateObjectReply{0, 8}));
  EXPECT_TRUE(sink_.calls().empty());
  EXPECT_TRUE(errors_.empty());

  Writer();
  link_->OnReply(Reply(store_.sent[0].id, proto::CreateObjectReply{0, 8}));
  link_->WriteOutput(5, 0, Tensor::F32({2}, {1, 2}));
  link_->OnReply(Reply(store_.sent[1].id, proto::ToError(NotFound("no such object"))));
  ASSERT_EQ(errors_.size(), 1u);
  EXPECT_NE(errors_[0].ToString().find("seal"), std::string::npos);
}

TEST_F(StoreLinkTest, AtMostTheWindowIsUnansweredAndTheRestGoInOrderAsRepliesCome) {
  MakeLink({.output_bytes = 0, .budget_bytes = 0}, /*max_in_flight=*/2);
  for (uint64_t object : {10, 11, 12, 13}) Writer(object);
  ASSERT_EQ(store_.sent.size(), 2u) << "two requests unanswered at most";
  EXPECT_EQ(link_->pending_requests(), 2u);
  EXPECT_EQ(link_->queued_requests(), 2u);

  link_->OnReply(Reply(store_.sent[1].id, proto::CreateObjectReply{64, 8}));
  ASSERT_EQ(store_.sent.size(), 3u) << "a reply lets the next queued request go";
  EXPECT_EQ(SentAs<proto::CreateObject>(2).object_id, 12u);
  link_->OnReply(Reply(store_.sent[0].id, proto::CreateObjectReply{0, 8}));
  ASSERT_EQ(store_.sent.size(), 4u);
  EXPECT_EQ(SentAs<proto::CreateObject>(3).object_id, 13u);
  EXPECT_EQ(link_->queued_requests(), 0u);
  EXPECT_EQ(sink_.calls().size(), 2u) << "the two answered reservations were granted";
}

TEST_F(StoreLinkTest, ASealDoesNotWaitBehindReservationsTheStoreHolds) {
  MakeLink({.output_bytes = 0, .budget_bytes = 0}, /*max_in_flight=*/1);
  Writer(10);
  link_->OnReply(Reply(store_.sent[0].id, proto::CreateObjectReply{0, 8}));
  // The store holds the next reservation until memory is freed; the one after is queued.
  Writer(11);
  Writer(12);
  ASSERT_EQ(store_.sent.size(), 2u);
  EXPECT_EQ(link_->queued_requests(), 1u);

  link_->WriteOutput(10, 0, Tensor::F32({2}, {1, 2}));
  ASSERT_EQ(store_.sent.size(), 3u) << "the finished shard's seal must go at once: its "
                                       "reader may be what frees the memory";
  EXPECT_EQ(SentAs<proto::SealObject>(2).object_id, 10u);
  EXPECT_EQ(ArenaFloat(0), 1.0f);
  link_->OnReply(Reply(store_.sent[2].id, proto::Ok{}));
  EXPECT_EQ(store_.sent.size(), 3u) << "a seal's answer does not open the reservations' lane";
  link_->OnReply(Reply(store_.sent[1].id, proto::CreateObjectReply{64, 8}));
  ASSERT_EQ(store_.sent.size(), 4u);
  EXPECT_EQ(SentAs<proto::CreateObject>(3).object_id, 12u);
  EXPECT_TRUE(errors_.empty());
}

TEST_F(StoreLinkTest, QueuedRequestsFailWhenTheStoreIsLostOrTheyCannotBeSent) {
  MakeLink({.output_bytes = 0, .budget_bytes = 0}, /*max_in_flight=*/1);
  auto first = Writer(10);
  auto second = Writer(11);
  auto third = Writer(12);
  ASSERT_EQ(store_.sent.size(), 1u);

  // The socket refuses what is sent next: the queued reservations fail their shards.
  store_.refuse = Unavailable("store socket closed");
  link_->OnReply(Reply(store_.sent[0].id, proto::CreateObjectReply{0, 8}));
  auto calls = sink_.calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].kind, Call::kReserved);
  EXPECT_EQ(calls[0].item, first);
  for (size_t i : {1, 2}) {
    EXPECT_EQ(calls[i].kind, Call::kFail);
    EXPECT_EQ(calls[i].item, i == 1 ? second : third);
    EXPECT_EQ(calls[i].status.code(), Code::kUnavailable);
  }
  ASSERT_EQ(errors_.size(), 2u);
  EXPECT_NE(errors_[0].ToString().find("reserve output"), std::string::npos);

  store_.refuse = Status::Ok();
  auto fourth = Writer(13);
  auto fifth = Writer(14);
  link_->Detach(Unavailable("the object store was lost"));
  calls = sink_.calls();
  std::vector<std::shared_ptr<WorkItem>> failed;
  for (const auto& call : calls) {
    if (call.kind == Call::kFail && call.status.ToString().find("was lost") != std::string::npos)
      failed.push_back(call.item);
  }
  EXPECT_EQ(failed, (std::vector<std::shared_ptr<WorkItem>>{fourth, fifth}))
      << "the sent and the queued reservation fail with the store";
  EXPECT_EQ(link_->pending_requests() + link_->queued_requests(), 0u);
}

}  // namespace
}  // namespace atl::executor
