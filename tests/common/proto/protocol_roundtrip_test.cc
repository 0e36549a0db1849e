// Every message of common/protocol.h survives EncodeHeader -> DecodeHeader -> As<T>() with
// every field intact, and every truncation of its header is refused.
#include <cstdint>
#include <set>
#include <string>
#include <typeinfo>

#include <gtest/gtest.h>
#include <msgpack.hpp>

#include "common/proto/codec.h"
#include "common/proto/protocol.h"
#include "tests/common/proto/samples.h"
#include "tests/status_matchers.h"

namespace atl::proto {
namespace {

using samples::Sample;

// Every message struct, i.e. every struct with a kKind.
using AllMessages = ::testing::Types<
    Ok, Error, RegisterExecutor, RegisterExecutorReply, Heartbeat, RegisterScheduler, HelloClient,
    HelloClientReply, Goodbye, HostChanged, CreateSlice, SliceInfo, SliceRemapped, ServiceChanged,
    LookupOwners, Owners, OwnersKnown, DrainHost, DrainHostReply, RegisterFunction,
    RegisterFunctionReply, GetClusterStatus, ClusterStatus, Compile, Dispatch, TupleBatch, RunLoop,
    SubmitProgram, SubmitReply, GangDone, NodeReleased, CancelRun, RunDone, RunFailed, StoreHello,
    StoreHelloReply, CreateObject, CreateObjectReply, SealObject, PutObject, GetObject,
    GetObjectReply, ReleaseObject, GetStoreStats, StoreStats, SaveShards, SaveShardsReply,
    CommitCheckpoint, ReadCheckpointIndex, CheckpointIndexText, LoadShards, UnpinObjects>;

// The structs only found inside messages, and the IR.
using NestedStructs =
    ::testing::Types<DeviceDesc, DeviceInfo, DeviceStatus, HostStatus, IslandStatus, SliceStatus,
                     InputSource, OutputDest, Entry, TupleHeader, PlacedEntry, CrossIslandNode,
                     ShardFile, ValueFile, FileWritten, FilePiece, ShardFromFiles, ir::TensorType,
                     ir::Operand, ir::Op, ir::FunctionDef>;

template <typename... Ts>
std::multiset<uint16_t> KindsOf(::testing::Types<Ts...>) {
  return {static_cast<uint16_t>(Ts::kKind)...};
}

TEST(MessageCoverageTest, EveryKindHasExactlyOneMessageUnderTest) {
  const std::multiset<uint16_t> tested = KindsOf(AllMessages{});
  int known = 0;
  for (uint32_t k = 0; k <= UINT16_MAX; ++k) {
    if (KindName(static_cast<Kind>(k)) == "unknown") continue;
    ++known;
    EXPECT_EQ(tested.count(static_cast<uint16_t>(k)), 1u)
        << "kind " << k << " (" << KindName(static_cast<Kind>(k)) << ")";
  }
  EXPECT_EQ(static_cast<size_t>(known), tested.size());
}

// The msgpack array a struct encodes to (MSGPACK_DEFINE: one element per field).
template <typename T>
msgpack::object Fields(const T& value, msgpack::zone& zone) {
  return msgpack::object(value, zone);
}

// Compares two values field by field, naming the first field that differs.
template <typename T>
void ExpectSameFields(const T& got, const T& want) {
  msgpack::zone zone;
  const msgpack::object g = Fields(got, zone);
  const msgpack::object w = Fields(want, zone);
  ASSERT_EQ(g.type, msgpack::type::ARRAY);
  ASSERT_EQ(w.type, msgpack::type::ARRAY);
  ASSERT_EQ(g.via.array.size, w.via.array.size);
  for (uint32_t i = 0; i < w.via.array.size; ++i) {
    EXPECT_EQ(g.via.array.ptr[i], w.via.array.ptr[i])
        << typeid(T).name() << " field " << i << ": got " << g.via.array.ptr[i] << ", want "
        << w.via.array.ptr[i];
  }
  EXPECT_TRUE(got == want) << typeid(T).name();
}

// Every top-level field of the sample differs from the default, so a round trip that lost
// any of them would be caught.
template <typename T>
void ExpectEveryFieldSet() {
  msgpack::zone zone;
  const msgpack::object defaults = Fields(T{}, zone);
  const msgpack::object sample = Fields(Sample<T>(), zone);
  ASSERT_EQ(sample.type, msgpack::type::ARRAY);
  ASSERT_EQ(defaults.via.array.size, sample.via.array.size);
  for (uint32_t i = 0; i < sample.via.array.size; ++i) {
    EXPECT_FALSE(defaults.via.array.ptr[i] == sample.via.array.ptr[i])
        << typeid(T).name() << " field " << i << " keeps its default " << sample.via.array.ptr[i];
  }
}

template <typename T>
class MessageTest : public ::testing::Test {};
TYPED_TEST_SUITE(MessageTest, AllMessages);

TYPED_TEST(MessageTest, SampleSetsEveryField) { ExpectEveryFieldSet<TypeParam>(); }

TYPED_TEST(MessageTest, RoundTripKeepsEveryField) {
  const TypeParam sample = Sample<TypeParam>();
  constexpr uint64_t kRequestId = 0x8000000000000005ull;
  const zmq::message_t bytes = EncodeHeader(kRequestId, sample);
  auto header = DecodeHeader(bytes.data(), bytes.size());
  ASSERT_THAT(header, IsOk());
  EXPECT_EQ(header->kind(), TypeParam::kKind);
  EXPECT_EQ(header->request_id(), kRequestId);
  auto body = header->template As<TypeParam>();
  ASSERT_THAT(body, IsOk());
  ExpectSameFields(*body, sample);
}

TYPED_TEST(MessageTest, EveryTruncationIsInvalidArgument) {
  const zmq::message_t bytes = EncodeHeader(7, Sample<TypeParam>());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto header = DecodeHeader(bytes.data(), n);
    ASSERT_FALSE(header.ok()) << "prefix of " << n << " of " << bytes.size() << " bytes";
    EXPECT_EQ(header.status().code(), Code::kInvalidArgument) << header.status().ToString();
  }
}

TYPED_TEST(MessageTest, BodyOfAnotherKindIsInvalidArgument) {
  // Decode each message as a Heartbeat, and a Heartbeat as each message.
  const zmq::message_t bytes = EncodeHeader(1, Sample<TypeParam>());
  auto header = DecodeHeader(bytes.data(), bytes.size());
  ASSERT_THAT(header, IsOk());
  const zmq::message_t beat_bytes = EncodeHeader(1, Sample<Heartbeat>());
  auto beat = DecodeHeader(beat_bytes.data(), beat_bytes.size());
  ASSERT_THAT(beat, IsOk());
  if constexpr (TypeParam::kKind != Kind::kHeartbeat) {
    EXPECT_EQ(header->template As<Heartbeat>().status().code(), Code::kInvalidArgument);
    const Status s = beat->template As<TypeParam>().status();
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find(std::string(KindName(TypeParam::kKind))), std::string::npos)
        << s.ToString();
  }
}

TYPED_TEST(MessageTest, BodyThatIsNotAnArrayIsInvalidArgument) {
  // The right kind, but the body is a string rather than the struct's field array.
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  packer.pack_array(4);
  packer.pack(kVersion);
  packer.pack(static_cast<uint16_t>(TypeParam::kKind));
  packer.pack(uint64_t{1});
  packer.pack(std::string("not a body"));
  auto header = DecodeHeader(buffer.data(), buffer.size());
  ASSERT_THAT(header, IsOk());
  EXPECT_EQ(header->template As<TypeParam>().status().code(), Code::kInvalidArgument);
}

template <typename T>
class NestedStructTest : public ::testing::Test {};
TYPED_TEST_SUITE(NestedStructTest, NestedStructs);

TYPED_TEST(NestedStructTest, SampleSetsEveryField) { ExpectEveryFieldSet<TypeParam>(); }

TYPED_TEST(NestedStructTest, RoundTripKeepsEveryField) {
  const TypeParam sample = Sample<TypeParam>();
  msgpack::sbuffer buffer;
  msgpack::pack(buffer, sample);
  TypeParam decoded;
  msgpack::unpack(buffer.data(), buffer.size()).get().convert(decoded);
  ExpectSameFields(decoded, sample);
}

}  // namespace
}  // namespace atl::proto
