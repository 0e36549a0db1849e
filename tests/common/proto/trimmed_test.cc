// MSGPACK_DEFINE_TRIMMED on TupleHeader: the array stops at the last field that is set, and
// a header with any one field set comes back whole.
#include <gtest/gtest.h>
#include <msgpack.hpp>

#include "common/proto/protocol.h"
#include "tests/common/proto/samples.h"

namespace atl::proto {
namespace {

msgpack::sbuffer Pack(const TupleHeader& h) {
  msgpack::sbuffer buffer;
  msgpack::pack(buffer, h);
  return buffer;
}

TupleHeader Unpack(const msgpack::sbuffer& buffer) {
  TupleHeader h;
  msgpack::unpack(buffer.data(), buffer.size()).get().convert(h);
  return h;
}

uint32_t ArraySize(const msgpack::sbuffer& buffer) {
  return msgpack::unpack(buffer.data(), buffer.size()).get().via.array.size;
}

TEST(TrimmedTest, APlainTupleLeavesItsUnsetFieldsOut) {
  TupleHeader plain;
  plain.run_id = 3;
  plain.shape = {16};
  plain.packed = true;
  EXPECT_EQ(ArraySize(Pack(plain)), 8u) << "kind through packed";
  EXPECT_EQ(ArraySize(Pack(TupleHeader{})), 0u);
  EXPECT_EQ(Unpack(Pack(plain)), plain);
  EXPECT_EQ(Unpack(Pack(TupleHeader{})), TupleHeader{});
}

TEST(TrimmedTest, EachFieldAloneSurvivesTheRoundTrip) {
  const TupleHeader sample = samples::Sample<TupleHeader>();
  // Every field of the sample, each set alone on a default header.
  const auto setters = std::vector<void (*)(TupleHeader&, const TupleHeader&)>{
      [](TupleHeader& h, const TupleHeader& s) { h.kind = s.kind; },
      [](TupleHeader& h, const TupleHeader& s) { h.run_id = s.run_id; },
      [](TupleHeader& h, const TupleHeader& s) { h.node = s.node; },
      [](TupleHeader& h, const TupleHeader& s) { h.input = s.input; },
      [](TupleHeader& h, const TupleHeader& s) { h.shard = s.shard; },
      [](TupleHeader& h, const TupleHeader& s) { h.dtype = s.dtype; },
      [](TupleHeader& h, const TupleHeader& s) { h.shape = s.shape; },
      [](TupleHeader& h, const TupleHeader& s) { h.error_code = s.error_code; },
      [](TupleHeader& h, const TupleHeader& s) { h.error = s.error; },
      [](TupleHeader& h, const TupleHeader& s) { h.dst_begin = s.dst_begin; },
      [](TupleHeader& h, const TupleHeader& s) { h.dst_shape = s.dst_shape; },
      [](TupleHeader& h, const TupleHeader& s) { h.pieces = s.pieces; },
      [](TupleHeader& h, const TupleHeader& s) { h.part = s.part; },
      [](TupleHeader& h, const TupleHeader& s) { h.packed = s.packed; },
  };
  for (size_t i = 0; i < setters.size(); ++i) {
    TupleHeader h;
    setters[i](h, sample);
    ASSERT_FALSE(h == TupleHeader{}) << "setter " << i << " sets nothing";
    EXPECT_EQ(Unpack(Pack(h)), h) << "setter " << i;
  }
  EXPECT_EQ(Unpack(Pack(sample)), sample);
}

}  // namespace
}  // namespace atl::proto
