// End-to-end tests of the atoll-objectstore binary: a real process, real sockets on
// loopback, the real shared-memory arena.
#include "tests/services/objectstore/store_process_fixture.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

TEST_F(StoreProcessTest, PutThenGetRoundTrips) {
  StartStore();
  auto store = Connect();
  auto hello = store->Call<proto::StoreHelloReply>(proto::StoreHello{}, kCallTimeout);
  ASSERT_THAT(hello, IsOk());
  EXPECT_EQ(hello->arena_name, arena_);
  EXPECT_EQ(hello->arena_bytes, 4u << 20);

  ASSERT_THAT(Put(*store, 1, 0, {1.5f, 2.5f, -3.0f}), IsOk());
  net::Frames data;
  auto got = Get(*store, 1, 0, &data);
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(got->dtype, DType::kF32);
  EXPECT_EQ(got->shape, (Shape{3}));
  EXPECT_EQ(got->nbytes, 12u);
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(FrameBytes(data[0]), Bytes({1.5f, 2.5f, -3.0f}));

  auto stats = store->Call<proto::StoreStats>(proto::GetStoreStats{}, kCallTimeout);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->objects, 1u);
  EXPECT_EQ(stats->bytes_in_use, 64u);
  EXPECT_EQ(stats->arena_bytes, 4u << 20);
  EXPECT_TRUE(WaitForEvent("object.created", "object", 1, 2s).has_value());
  EXPECT_TRUE(WaitForEvent("object.sealed", "object", 1, 2s).has_value());
}

TEST_F(StoreProcessTest, CreateWriteThroughSharedMemorySealGet) {
  StartStore();
  auto store = Connect();
  auto hello = store->Call<proto::StoreHelloReply>(proto::StoreHello{}, kCallTimeout);
  ASSERT_THAT(hello, IsOk());
  auto region = ShmRegion::Open(hello->arena_name);
  ASSERT_THAT(region, IsOk());
  EXPECT_EQ(region->size(), hello->region_bytes);

  auto created = store->Call<proto::CreateObjectReply>(
      proto::CreateObject{7, 2, 0, DType::kF32, {2, 2}}, kCallTimeout);
  ASSERT_THAT(created, IsOk());
  EXPECT_EQ(created->nbytes, 16u);
  EXPECT_EQ(created->offset % 64, 0u);
  auto slice = region->Slice(created->offset, created->nbytes);
  ASSERT_THAT(slice, IsOk());
  const auto written = Bytes({1, 2, 3, 4});
  std::memcpy(slice->data(), written.data(), written.size());
  ASSERT_THAT(store->Call<proto::Ok>(proto::SealObject{7, 2, 0, ""}, kCallTimeout), IsOk());

  // By offset: no bytes in the reply, they are read from the arena.
  net::Frames data;
  auto where =
      store->Call<proto::GetObjectReply>(proto::GetObject{7, 2, 0, false}, kCallTimeout, {}, &data);
  ASSERT_THAT(where, IsOk());
  EXPECT_TRUE(data.empty());
  EXPECT_EQ(where->offset, created->offset);
  EXPECT_EQ(where->shape, (Shape{2, 2}));
  auto read = region->Slice(where->offset, where->nbytes);
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(std::vector<std::byte>(read->begin(), read->end()), written);
  // Inline: the same bytes as a data frame.
  auto inline_get =
      store->Call<proto::GetObjectReply>(proto::GetObject{7, 2, 0, true}, kCallTimeout, {}, &data);
  ASSERT_THAT(inline_get, IsOk());
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(FrameBytes(data[0]), written);
}

TEST_F(StoreProcessTest, GetWaitsUntilAnotherRequestSeals) {
  StartStore();
  // The waiting Get goes out on a raw DEALER so that its reply can be awaited after the seal.
  zmq::socket_t waiter = net::MakeSocket(context_, zmq::socket_type::dealer);
  ASSERT_THAT(net::Connect(waiter, endpoint_), IsOk());
  ASSERT_THAT(net::Send(waiter, nullptr, 1, proto::GetObject{42, 0, 10000, true}), IsOk());
  // Requests on one connection are handled in order: once the stats reply is here, the Get
  // has been seen and is waiting.
  ASSERT_THAT(net::Send(waiter, nullptr, 2, proto::GetStoreStats{}), IsOk());
  auto first = net::RecvFrames(waiter, kCallTimeout);
  ASSERT_TRUE(first.ok() && first->has_value());
  auto stats = proto::ParseIncoming(std::move(**first), false);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->header.request_id(), 2u);
  EXPECT_EQ(stats->header.kind(), proto::Kind::kStoreStats);

  auto producer = Connect();
  ASSERT_THAT(Put(*producer, 42, 0, {9.0f, 8.0f}), IsOk());

  auto answer = net::RecvFrames(waiter, kCallTimeout);
  ASSERT_TRUE(answer.ok() && answer->has_value()) << "the waiting Get was never answered";
  auto in = proto::ParseIncoming(std::move(**answer), false);
  ASSERT_THAT(in, IsOk());
  EXPECT_EQ(in->header.request_id(), 1u);
  ASSERT_EQ(in->header.kind(), proto::Kind::kGetObjectReply);
  auto reply = in->header.As<proto::GetObjectReply>();
  ASSERT_THAT(reply, IsOk());
  EXPECT_EQ(reply->nbytes, 8u);
  ASSERT_EQ(in->data.size(), 1u);
  EXPECT_EQ(FrameBytes(in->data[0]), Bytes({9.0f, 8.0f}));
}

TEST_F(StoreProcessTest, APutIntoAFullDeviceWaitsForRoomWithItsBytes) {
  StartStore(1000, /*device_memory_mb=*/1);
  auto store = Connect();
  // 768 KiB of the device's 1 MiB, reserved and sealed.
  const int64_t big = 192 * 1024;
  auto created = store->Call<proto::CreateObjectReply>(
      proto::CreateObject{1, 0, 0, DType::kF32, {big}, 0}, kCallTimeout);
  ASSERT_THAT(created, IsOk());
  ASSERT_THAT(store->Call<proto::Ok>(proto::SealObject{1, 0, 0, ""}, kCallTimeout), IsOk());

  // 512 KiB more does not fit now: the put is not answered, and waits.
  std::vector<float> values(128 * 1024, 0.5f);
  values.back() = 7.0f;
  zmq::socket_t producer = net::MakeSocket(context_, zmq::socket_type::dealer);
  ASSERT_THAT(net::Connect(producer, endpoint_), IsOk());
  proto::PutObject put{2, 0, 0, DType::kF32, {static_cast<int64_t>(values.size())}, 0};
  ASSERT_THAT(net::Send(producer, nullptr, 1, put, DataFrame(Bytes(values))), IsOk());
  auto waiting = WaitForEvent("object.waiting", "object", 2, 5s);
  ASSERT_TRUE(waiting.has_value()) << "the put did not wait for room";
  auto early = net::RecvFrames(producer, 0ms);
  ASSERT_THAT(early, IsOk());
  EXPECT_FALSE(early->has_value()) << "answered before it had room";

  // A put whose bytes do not match its shape is refused at once.
  proto::PutObject wrong{3, 0, 0, DType::kF32, {4}, 0};
  auto refused = store->Call<proto::Ok>(wrong, kCallTimeout, DataFrame(Bytes({1, 2})));
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);

  // A reader that gives up meanwhile is told why the shard is not sealed.
  auto late = Get(*store, 2, 150);
  EXPECT_EQ(late.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(late.status().message().find("waits for room in device 0 (786432 of 1048576 bytes"),
            std::string::npos)
      << late.status().message();
  // One for a shard whose producer has not asked yet hears that the device is full.
  auto unknown = Get(*store, 99, 150);
  EXPECT_EQ(unknown.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(unknown.status().message().find("device 0 has no room now (786432 of 1048576 bytes"),
            std::string::npos)
      << unknown.status().message();

  ASSERT_THAT(store->Call<proto::Ok>(proto::ReleaseObject{1}, kCallTimeout), IsOk());
  auto answer = net::RecvFrames(producer, kCallTimeout);
  ASSERT_TRUE(answer.ok() && answer->has_value()) << "the put was never answered";
  auto in = proto::ParseIncoming(std::move(**answer), false);
  ASSERT_THAT(in, IsOk());
  EXPECT_EQ(in->header.kind(), proto::Kind::kOk);
  net::Frames data;
  auto got = Get(*store, 2, 0, &data);
  ASSERT_THAT(got, IsOk());
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(FrameBytes(data[0]), Bytes(values));
}

TEST_F(StoreProcessTest, WaitingGetTimesOutWithDeadlineExceeded) {
  StartStore();
  auto store = Connect();
  const auto start = Clock::now();
  auto got = Get(*store, 77, 150);
  const auto waited = Clock::now() - start;
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(got.status().message().find("object 77 shard 0"), std::string::npos)
      << got.status().message();
  EXPECT_NE(got.status().message().find("150 ms"), std::string::npos) << got.status().message();
  EXPECT_EQ(got.status().message().find("room"), std::string::npos) << got.status().message();
  EXPECT_GE(waited, 150ms);
  EXPECT_LT(waited, 3s);
}

TEST_F(StoreProcessTest, ImmediateGetOfMissingOrUnsealedShardIsNotFound) {
  StartStore();
  auto store = Connect();
  auto unknown = Get(*store, 5, 0);
  EXPECT_EQ(unknown.status().code(), Code::kNotFound);
  EXPECT_NE(unknown.status().message().find("object 5 shard 0 is unknown"), std::string::npos)
      << unknown.status().message();
  ASSERT_THAT(store->Call<proto::CreateObjectReply>(proto::CreateObject{5, 0, 0, DType::kI32, {3}},
                                                    kCallTimeout),
              IsOk());
  auto unsealed = Get(*store, 5, 0);
  EXPECT_EQ(unsealed.status().code(), Code::kNotFound);
  EXPECT_NE(unsealed.status().message().find("not ready"), std::string::npos)
      << unsealed.status().message();
}

TEST_F(StoreProcessTest, ProducerErrorReachesWaitingAndLaterReaders) {
  StartStore();
  auto store = Connect();
  ASSERT_THAT(store->Call<proto::CreateObjectReply>(proto::CreateObject{6, 0, 0, DType::kF32, {1}},
                                                    kCallTimeout),
              IsOk());
  const auto code = static_cast<int32_t>(Code::kInternal);
  ASSERT_THAT(
      store->Call<proto::Ok>(proto::SealObject{6, 0, code, "kernel exploded"}, kCallTimeout),
      IsOk());
  auto got = Get(*store, 6, 1000);
  EXPECT_EQ(got.status().code(), Code::kInternal);
  EXPECT_EQ(got.status().message(), "kernel exploded");
}

TEST_F(StoreProcessTest, ReleaseFreesAndUnknownReleaseIsNotFound) {
  StartStore();
  auto store = Connect();
  auto unknown = store->Call<proto::Ok>(proto::ReleaseObject{12345}, kCallTimeout);
  EXPECT_EQ(unknown.status().code(), Code::kNotFound);
  EXPECT_NE(unknown.status().message().find("object 12345"), std::string::npos);

  ASSERT_THAT(Put(*store, 3, 0, {1.0f}), IsOk());
  ASSERT_THAT(store->Call<proto::Ok>(proto::ReleaseObject{3}, kCallTimeout), IsOk());
  EXPECT_EQ(Get(*store, 3, 0).status().code(), Code::kNotFound);
  auto stats = store->Call<proto::StoreStats>(proto::GetStoreStats{}, kCallTimeout);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->objects, 0u);
  EXPECT_EQ(stats->bytes_in_use, 0u);
}

TEST_F(StoreProcessTest, APinnedReadKeepsItsBlockFromOtherObjectsUntilItsLeaseIsDropped) {
  StartStore();
  auto store = Connect();
  auto pinned_read = [&](uint64_t object) {
    return store->Call<proto::GetObjectReply>(proto::GetObject{object, 0, 0, false, true},
                                              kCallTimeout);
  };
  auto offset_of = [&](uint64_t object) -> uint64_t {
    auto got = Get(*store, object, 0);
    EXPECT_THAT(got, IsOk());
    return got.ok() ? got->offset : ~uint64_t{0};
  };
  ASSERT_THAT(Put(*store, 1, 0, {1.0f, 2.0f}), IsOk());
  auto first = pinned_read(1);
  ASSERT_THAT(first, IsOk());
  EXPECT_NE(first->lease, 0u);
  EXPECT_NE(first->version, 0u);

  // Released while pinned: its block is given to no other object.
  ASSERT_THAT(store->Call<proto::Ok>(proto::ReleaseObject{1}, kCallTimeout), IsOk());
  ASSERT_THAT(Put(*store, 2, 0, {3.0f, 4.0f}), IsOk());
  EXPECT_NE(offset_of(2), first->offset);
  auto second = pinned_read(2);
  ASSERT_THAT(second, IsOk());
  EXPECT_NE(second->lease, first->lease);
  EXPECT_NE(second->version, first->version) << "other bytes, another version";
  auto unpinned = Get(*store, 2, 0);  // a read that does not pin gets no lease
  ASSERT_THAT(unpinned, IsOk());
  EXPECT_EQ(unpinned->lease, 0u);
  EXPECT_EQ(unpinned->version, second->version);

  // A lease dropped for another store instance is not this one's; the block stays pinned.
  ASSERT_THAT(net::Send(store->socket(), nullptr, 1,
                        proto::UnpinObjects{first->instance + 1, {first->lease}}),
              IsOk());
  ASSERT_THAT(Put(*store, 3, 0, {5.0f, 6.0f}), IsOk());
  EXPECT_NE(offset_of(3), first->offset);
  // Dropped: the freed object's block is free again (the store serves requests in order).
  ASSERT_THAT(
      net::Send(store->socket(), nullptr, 2, proto::UnpinObjects{first->instance, {first->lease}}),
      IsOk());
  ASSERT_THAT(Put(*store, 4, 0, {7.0f, 8.0f}), IsOk());
  EXPECT_EQ(offset_of(4), first->offset);
  auto stats = store->Call<proto::StoreStats>(proto::GetStoreStats{}, kCallTimeout);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->objects, 3u);
  EXPECT_EQ(stats->bytes_in_use, 3 * 64u) << "object 1's block was freed at its last lease";
}

TEST_F(StoreProcessTest, ReleaseCancelsGetsWaitingOnTheObject) {
  StartStore();
  auto store = Connect();
  ASSERT_THAT(store->Call<proto::CreateObjectReply>(proto::CreateObject{8, 0, 0, DType::kF32, {1}},
                                                    kCallTimeout),
              IsOk());
  zmq::socket_t waiter = net::MakeSocket(context_, zmq::socket_type::dealer);
  ASSERT_THAT(net::Connect(waiter, endpoint_), IsOk());
  ASSERT_THAT(net::Send(waiter, nullptr, 1, proto::GetObject{8, 0, 10000, true}), IsOk());
  ASSERT_THAT(net::Send(waiter, nullptr, 2, proto::GetStoreStats{}), IsOk());
  auto stats = net::RecvFrames(waiter, kCallTimeout);  // the Get is waiting now
  ASSERT_TRUE(stats.ok() && stats->has_value());

  ASSERT_THAT(store->Call<proto::Ok>(proto::ReleaseObject{8}, kCallTimeout), IsOk());
  auto answer = net::RecvFrames(waiter, kCallTimeout);
  ASSERT_TRUE(answer.ok() && answer->has_value()) << "the waiting Get was never answered";
  auto in = proto::ParseIncoming(std::move(**answer), false);
  ASSERT_THAT(in, IsOk());
  EXPECT_EQ(in->header.request_id(), 1u);
  ASSERT_EQ(in->header.kind(), proto::Kind::kError);
  auto err = in->header.As<proto::Error>();
  ASSERT_THAT(err, IsOk());
  EXPECT_EQ(err->code, static_cast<int32_t>(Code::kCancelled));
  EXPECT_NE(err->message.find("object 8 shard 0 was released"), std::string::npos) << err->message;
  // Its writer may still be writing it: it is freed once sealed, not before.
  auto held = store->Call<proto::StoreStats>(proto::GetStoreStats{}, kCallTimeout);
  ASSERT_THAT(held, IsOk());
  EXPECT_EQ(held->objects, 1u);
  ASSERT_THAT(store->Call<proto::Ok>(proto::SealObject{8, 0, 0, ""}, kCallTimeout), IsOk());
  EXPECT_TRUE(WaitForEvent("object.freed", "object", 8, 2s).has_value());
}

TEST_F(StoreProcessTest, AReleaseBeforeTheObjectExistsFreesItOnceSealedWithoutAnError) {
  StartStore();
  auto store = Connect();
  // Client 9's run was cancelled before its output shards 0 and 1 here were made.
  ASSERT_THAT(store->Call<proto::Ok>(proto::ReleaseObject{21, 9, 2}, kCallTimeout), IsOk());
  for (uint32_t shard = 0; shard < 2; ++shard) {
    ASSERT_THAT(store->Call<proto::CreateObjectReply>(
                    proto::CreateObject{21, shard, 9, DType::kF32, {4}}, kCallTimeout),
                IsOk());
  }
  const auto cancelled = static_cast<int32_t>(Code::kCancelled);
  ASSERT_THAT(
      store->Call<proto::Ok>(proto::SealObject{21, 0, cancelled, "run cancelled"}, kCallTimeout),
      IsOk());
  auto stats = store->Call<proto::StoreStats>(proto::GetStoreStats{}, kCallTimeout);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->objects, 1u);  // shard 1 is still being written
  ASSERT_THAT(
      store->Call<proto::Ok>(proto::SealObject{21, 1, cancelled, "run cancelled"}, kCallTimeout),
      IsOk());
  EXPECT_TRUE(WaitForEvent("object.freed", "object", 21, 2s).has_value());
  stats = store->Call<proto::StoreStats>(proto::GetStoreStats{}, kCallTimeout);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->objects, 0u);
  EXPECT_EQ(stats->bytes_in_use, 0u);
  EXPECT_EQ(stats->device_bytes_in_use, std::vector<uint64_t>(stats->device_bytes.size(), 0));
}

TEST_F(StoreProcessTest, OversizedObjectIsOutOfMemoryNamingTheSizes) {
  StartStore();
  auto store = Connect();
  auto created = store->Call<proto::CreateObjectReply>(
      proto::CreateObject{1, 0, 0, DType::kF32, {2, 1 << 20}}, kCallTimeout);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), Code::kOutOfMemory);
  EXPECT_NE(created.status().message().find(std::to_string(8u << 20)), std::string::npos)
      << created.status().message();
  EXPECT_NE(created.status().message().find(std::to_string(4u << 20)), std::string::npos)
      << created.status().message();
}

TEST_F(StoreProcessTest, MalformedRequestsGetErrorRepliesAndServiceGoesOn) {
  StartStore();
  auto store = Connect();

  // Bytes that are not msgpack at all: the request id is unknowable, so the reply uses 0.
  const std::string garbage = "\xc1\xc1 this is not a header";
  proto::Error err = ExpectErrorReply(*store, zmq::message_t(garbage.data(), garbage.size()), 0);
  EXPECT_EQ(err.code, static_cast<int32_t>(Code::kInvalidArgument));

  // A valid header cut in half.
  zmq::message_t whole = proto::EncodeHeader(9, proto::GetObject{1, 0, 0, true});
  err = ExpectErrorReply(*store, zmq::message_t(whole.data(), whole.size() / 2), 0);
  EXPECT_EQ(err.code, static_cast<int32_t>(Code::kInvalidArgument));

  // An empty frame.
  err = ExpectErrorReply(*store, zmq::message_t(), 0);
  EXPECT_EQ(err.code, static_cast<int32_t>(Code::kInvalidArgument));

  // A kind the store does not serve.
  err = ExpectErrorReply(*store, proto::EncodeHeader(10, proto::HelloClient{"x"}), 10);
  EXPECT_EQ(err.code, static_cast<int32_t>(Code::kInvalidArgument));
  EXPECT_NE(err.message.find("HelloClient"), std::string::npos) << err.message;

  // A GetObject whose body is a string instead of an array.
  {
    msgpack::sbuffer buffer;
    msgpack::packer<msgpack::sbuffer> packer(buffer);
    packer.pack_array(4);
    packer.pack(proto::kVersion);
    packer.pack(static_cast<uint16_t>(proto::Kind::kGetObject));
    packer.pack(uint64_t{11});
    packer.pack(std::string("not a body"));
    err = ExpectErrorReply(*store, zmq::message_t(buffer.data(), buffer.size()), 11);
    EXPECT_EQ(err.code, static_cast<int32_t>(Code::kInvalidArgument));
  }

  // A Put whose data does not match its shape, and one without data.
  proto::PutObject put{2, 0, 0, DType::kF32, {4}};
  auto short_put = store->Call<proto::Ok>(put, kCallTimeout, DataFrame(Bytes({1.0f})));
  EXPECT_EQ(short_put.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store->Call<proto::Ok>(put, kCallTimeout).status().code(), Code::kInvalidArgument);
  // A negative dimension and a bad dtype.
  auto negative = store->Call<proto::CreateObjectReply>(
      proto::CreateObject{2, 0, 0, DType::kF32, {-4}}, kCallTimeout);
  EXPECT_EQ(negative.status().code(), Code::kInvalidArgument);
  auto bad_dtype = store->Call<proto::CreateObjectReply>(
      proto::CreateObject{2, 0, 0, static_cast<DType>(200), {4}}, kCallTimeout);
  EXPECT_EQ(bad_dtype.status().code(), Code::kInvalidArgument);
  // A client heartbeat whose id is not a number.
  err = ExpectErrorReply(
      *store, proto::EncodeHeader(12, proto::Heartbeat{proto::Heartbeat::kClient, "x"}), 12);
  EXPECT_EQ(err.code, static_cast<int32_t>(Code::kInvalidArgument));

  // Still serving.
  ASSERT_TRUE(StoreAlive());
  EXPECT_THAT(store->Call<proto::StoreHelloReply>(proto::StoreHello{}, kCallTimeout), IsOk());
  ASSERT_THAT(Put(*store, 2, 0, {1, 2, 3, 4}), IsOk());
  EXPECT_THAT(Get(*store, 2, 0), IsOk());
}

TEST_F(StoreProcessTest, SilentClientLosesItsObjectsWhileAHeartbeatingOneKeepsThem) {
  StartStore(/*heartbeat_ms=*/50);  // silent clients are collected after 200 ms
  auto store = Connect();
  constexpr uint64_t kSilent = 101;
  constexpr uint64_t kAlive = 202;
  const proto::Heartbeat beat{proto::Heartbeat::kClient, std::to_string(kAlive)};
  ASSERT_THAT(store->Post(beat), IsOk());
  ASSERT_THAT(Put(*store, 1, kSilent, {1.0f}), IsOk());
  ASSERT_THAT(Put(*store, 2, kAlive, {2.0f}), IsOk());

  const auto deadline = Clock::now() + 5s;
  bool collected = false;
  while (Clock::now() < deadline) {
    ASSERT_THAT(store->Post(beat), IsOk());
    auto got = Get(*store, 1, 0);
    if (!got.ok()) {
      ASSERT_EQ(got.status().code(), Code::kNotFound) << got.status().ToString();
      collected = true;
      break;
    }
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(collected) << "the silent client's object survived 5 s";
  EXPECT_THAT(Get(*store, 2, 0), IsOk());
  auto stats = store->Call<proto::StoreStats>(proto::GetStoreStats{}, kCallTimeout);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->objects_per_owner, (std::map<uint64_t, uint64_t>{{kAlive, 1}}));
  auto event = WaitForEvent("object.collected", "client", kSilent, 2s);
  ASSERT_TRUE(event.has_value()) << "no object.collected event for client " << kSilent;
  EXPECT_EQ(event->fields["count"], 1);
}

// A store that did not run for a while (paused, starved of CPU) finds its clients' heartbeats
// still on their way in: it collects nothing until they have had a lapse to arrive.
TEST_F(StoreProcessTest, AStoreThatStalledKeepsTheObjectsOfAClientThatHeartbeatAllAlong) {
  StartStore(/*heartbeat_ms=*/50);  // silent clients are collected after 200 ms
  auto store = Connect();
  constexpr uint64_t kAlive = 202;
  const proto::Heartbeat beat{proto::Heartbeat::kClient, std::to_string(kAlive)};
  ASSERT_THAT(store->Post(beat), IsOk());
  ASSERT_THAT(Put(*store, 2, kAlive, {2.0f}), IsOk());
  // The client heartbeats every 20 ms throughout: 600 ms with the store stopped, 400 after.
  const auto heartbeat_for = [&](std::chrono::milliseconds span) {
    for (const auto end = Clock::now() + span; Clock::now() < end;) {
      ASSERT_THAT(store->Post(beat), IsOk());
      std::this_thread::sleep_for(20ms);
    }
  };
  ASSERT_EQ(kill(pid_, SIGSTOP), 0);
  heartbeat_for(600ms);
  ASSERT_EQ(kill(pid_, SIGCONT), 0);
  heartbeat_for(400ms);
  auto got = Get(*store, 2, 0);
  EXPECT_THAT(got, IsOk()) << "the live client's object was collected: " << got.status().ToString();
  EXPECT_FALSE(WaitForEvent("object.collected", "client", kAlive, 0ms).has_value());
}

TEST_F(StoreProcessTest, GoodbyeFreesOnlyThatClientsObjects) {
  StartStore();
  auto store = Connect();
  ASSERT_THAT(Put(*store, 1, 101, {1.0f}), IsOk());
  ASSERT_THAT(Put(*store, 2, 202, {2.0f}), IsOk());
  ASSERT_THAT(store->Call<proto::Ok>(proto::Goodbye{101}, kCallTimeout), IsOk());
  EXPECT_EQ(Get(*store, 1, 0).status().code(), Code::kNotFound);
  EXPECT_THAT(Get(*store, 2, 0), IsOk());
}

TEST_F(StoreProcessTest, SigtermExitsCleanlyAndUnlinksTheArena) {
  StartStore();
  ASSERT_THAT(ShmRegion::Open(arena_), IsOk());
  const int status = StopStore();
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(ShmRegion::Open(arena_).status().code(), Code::kNotFound);
}

TEST_F(StoreProcessTest, AStoreStartingRemovesTheArenaAKilledStoreOfItsHostLeft) {
  // A host container that died whole: nothing unlinked the arena, and /dev/shm stays.
  StartStore();
  const std::string left = arena_;
  kill(pid_, SIGKILL);
  ASSERT_EQ(waitpid(pid_, nullptr, 0), pid_);
  pid_ = -1;
  ASSERT_THAT(ShmRegion::Open(left), IsOk()) << "the killed store's arena was not left behind";

  std::filesystem::remove(dir_ + "/store.ready");
  StartStore();
  EXPECT_NE(arena_, left);
  EXPECT_EQ(ShmRegion::Open(left).status().code(), Code::kNotFound);
  EXPECT_THAT(ShmRegion::Open(arena_), IsOk());
}

}  // namespace
}  // namespace atl::testing
