// MSGPACK_DEFINE_TRIMMED: the array stops at the last field that is set, and a value with
// any one field set comes back whole, for every struct packed that way.
#include <gtest/gtest.h>
#include <msgpack.hpp>

#include <tuple>

#include "common/proto/protocol.h"
#include "tests/common/proto/samples.h"

namespace atl::proto {
namespace {

template <typename T>
msgpack::sbuffer Pack(const T& value) {
  msgpack::sbuffer buffer;
  msgpack::pack(buffer, value);
  return buffer;
}

template <typename T>
T Unpack(const msgpack::sbuffer& buffer) {
  T value;
  msgpack::unpack(buffer.data(), buffer.size()).get().convert(value);
  return value;
}

uint32_t ArraySize(const msgpack::sbuffer& buffer) {
  return msgpack::unpack(buffer.data(), buffer.size()).get().via.array.size;
}

// A default value with field `i` (in wire order) taken from `sample`. msgpack::object holds
// every field, trimmed or not, so the field is swapped there.
template <typename T>
T WithOneFieldOf(const T& sample, size_t i) {
  msgpack::zone zone;
  msgpack::object fields(T{}, zone);
  const msgpack::object from(sample, zone);
  fields.via.array.ptr[i] = from.via.array.ptr[i];
  return fields.as<T>();
}

template <typename T>
class TrimmedTest : public ::testing::Test {};

using TrimmedTypes = ::testing::Types<TupleHeader, InputSource, Piece, OutputDest, Entry, GangDone>;
TYPED_TEST_SUITE(TrimmedTest, TrimmedTypes);

TYPED_TEST(TrimmedTest, ADefaultValueIsAnEmptyArray) {
  EXPECT_EQ(ArraySize(Pack(TypeParam{})), 0u);
  EXPECT_EQ(Unpack<TypeParam>(Pack(TypeParam{})), TypeParam{});
}

TYPED_TEST(TrimmedTest, EachFieldAloneEndsTheArrayAndSurvivesTheRoundTrip) {
  const TypeParam sample = samples::Sample<TypeParam>();
  constexpr size_t kFields = std::tuple_size_v<decltype(sample.msgpack_fields())>;
  for (size_t i = 0; i < kFields; ++i) {
    const TypeParam value = WithOneFieldOf(sample, i);
    ASSERT_FALSE(value == TypeParam{}) << "the sample leaves field " << i << " at its default";
    EXPECT_EQ(ArraySize(Pack(value)), i + 1) << "field " << i;
    EXPECT_EQ(Unpack<TypeParam>(Pack(value)), value) << "field " << i;
  }
  EXPECT_EQ(ArraySize(Pack(sample)), kFields);
  EXPECT_EQ(Unpack<TypeParam>(Pack(sample)), sample);
}

TEST(TrimmedTupleTest, APlainTupleLeavesItsUnsetFieldsOut) {
  TupleHeader plain;
  plain.run_id = 3;
  plain.shape = {16};
  plain.packed = true;
  EXPECT_EQ(ArraySize(Pack(plain)), 8u) << "kind through packed";
  EXPECT_EQ(Unpack<TupleHeader>(Pack(plain)), plain);
}

TEST(TrimmedEntryTest, AChainStepLeavesItsErrorAndPeerFieldsOut) {
  // One step of a chain on one host: its input comes from the step before, its output
  // goes to the step after, and nothing failed.
  Entry step;
  step.run_id = 7;
  step.node = 3;
  step.gang_seq = 12;
  step.function_id = 5;
  step.num_shards = 2;
  step.owner_client = 1;
  step.inputs.resize(1);
  step.outputs = {{OutputDest{}}};
  step.outputs[0][0].node = 4;
  EXPECT_EQ(ArraySize(Pack(step)), 11u) << "run_id through outputs";
  EXPECT_EQ(Unpack<Entry>(Pack(step)), step);
}

}  // namespace
}  // namespace atl::proto
