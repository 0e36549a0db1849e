// How a TupleBatch's tensors travel in its frames: small ones packed into one frame, large
// ones in frames of their own that the receiving tensor adopts; and what the receiver does
// with frames that do not hold what the headers say.
#include "services/executor/tuple_frames.h"

#include <numeric>

#include <gtest/gtest.h>
#include "tests/status_matchers.h"

namespace atl::executor {
namespace {

Tensor Iota(int64_t n) {
  std::vector<int32_t> values(static_cast<size_t>(n));
  std::iota(values.begin(), values.end(), 0);
  return Tensor::I32({n}, values);
}

// A batch of `values` as the sender writes it: its headers, and its frames.
std::pair<proto::TupleBatch, net::Frames> Encode(const std::vector<Result<Tensor>>& values) {
  proto::TupleBatch batch;
  TupleFrames frames;
  for (const auto& value : values) {
    proto::TupleHeader h;
    frames.Add(h, value);
    batch.tuples.push_back(h);
  }
  return {batch, frames.Take()};
}

TEST(TupleFrames, SmallTensorsShareAFrameAndLargeOnesHaveTheirOwn) {
  const Tensor large = Iota(1 << 16);  // 256 KiB
  const std::vector<Result<Tensor>> sent = {Tensor::F32({2}, {1, 2}), large,
                                            InvalidArgument("producer failed"),
                                            Tensor(DType::kF32, {0}), Tensor::I32({1}, {7})};
  auto [batch, frames] = Encode(sent);
  ASSERT_EQ(frames.size(), 2u) << "one packed frame, one for the large tensor";
  EXPECT_EQ(frames[0].size(), 3 * sizeof(float));
  EXPECT_EQ(frames[1].size(), large.nbytes());
  EXPECT_FALSE(batch.tuples[1].packed);

  const void* large_frame = frames[1].data();
  auto values = TupleValues(batch, frames);
  ASSERT_THAT(values, IsOk());
  ASSERT_EQ(values->size(), sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    ASSERT_EQ((*values)[i].ok(), sent[i].ok()) << "tuple " << i;
    if (sent[i].ok()) {
      EXPECT_EQ(*(*values)[i], *sent[i]) << "tuple " << i;
    }
  }
  EXPECT_EQ((*values)[2].status().message(), "producer failed");
  EXPECT_EQ((*values)[1]->data(), large_frame) << "the large tensor was copied out of its frame";
}

TEST(TupleFrames, ABatchWithoutSmallTensorsHasNoPackedFrame) {
  auto [batch, frames] = Encode({Iota(1 << 12), Iota(1 << 13)});
  ASSERT_EQ(frames.size(), 2u);
  auto values = TupleValues(batch, frames);
  ASSERT_THAT(values, IsOk());
  EXPECT_EQ(*(*values)[1], Iota(1 << 13));
}

TEST(TupleFrames, TheFramesMustMatchTheHeaders) {
  auto [batch, frames] = Encode({Tensor::F32({2}, {1, 2}), Iota(1 << 12)});
  frames.pop_back();
  auto missing = TupleValues(batch, frames);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("data frames"), std::string::npos)
      << missing.status().ToString();
}

TEST(TupleFrames, PackedShapesThatDoNotFitThePackedFrameAreRefused) {
  const std::vector<Shape> bad = {
      {3},                                  // 12 bytes of the 8 packed
      {1},                                  // 4 of 8: the rest unaccounted for
      {-1, -2},                             // negative
      {int64_t{1} << 62, int64_t{1} << 62}  // a product that overflows
  };
  for (const Shape& shape : bad) {
    auto [batch, frames] = Encode({Tensor::F32({2}, {1, 2})});
    batch.tuples[0].shape = shape;
    auto values = TupleValues(batch, frames);
    ASSERT_FALSE(values.ok()) << ShapeString(shape);
    EXPECT_EQ(values.status().code(), Code::kInvalidArgument);
  }
}

TEST(TupleFrames, AnUnpackedTensorOfTheWrongSizeFailsAlone) {
  auto [batch, frames] = Encode({Iota(1 << 12), Tensor::F32({1}, {5})});
  batch.tuples[0].shape = {3};
  batch.tuples[0].dtype = static_cast<DType>(200);  // no such dtype: no size, no alignment
  auto values = TupleValues(batch, frames);
  ASSERT_THAT(values, IsOk());
  EXPECT_EQ((*values)[0].status().code(), Code::kInvalidArgument);
  EXPECT_EQ(*(*values)[1], Tensor::F32({1}, {5}));
}

TEST(TensorAdopt, UsesTheOwnersBytesUntilItGoesAwayAndCopiesAreDeep) {
  auto owner = std::make_shared<std::vector<int32_t>>(std::vector<int32_t>{1, 2, 3});
  std::weak_ptr<std::vector<int32_t>> watch = owner;
  const std::span<std::byte> bytes(reinterpret_cast<std::byte*>(owner->data()), 12);
  {
    auto t = Tensor::Adopt(DType::kI32, {3}, bytes, owner);
    owner.reset();
    ASSERT_THAT(t, IsOk());
    EXPECT_EQ(t->data(), bytes.data());
    EXPECT_EQ(*t, Tensor::I32({3}, {1, 2, 3}));
    Tensor copy = *t;
    copy.as<int32_t>()[0] = 9;
    EXPECT_EQ(t->as<int32_t>()[0], 1) << "a copy wrote into the adopted bytes";
    Tensor moved = std::move(*t);
    EXPECT_EQ(moved.as<int32_t>()[2], 3);
    EXPECT_FALSE(watch.expired());
  }
  EXPECT_TRUE(watch.expired()) << "the owner outlived every tensor";
}

TEST(TensorAdopt, RefusesAWrongSizeAMisalignedAddressAndNoOwner) {
  auto owner = std::make_shared<std::vector<int32_t>>(4);
  auto* base = reinterpret_cast<std::byte*>(owner->data());
  EXPECT_FALSE(Tensor::Adopt(DType::kI32, {3}, {base, 16}, owner).ok());
  EXPECT_FALSE(Tensor::Adopt(DType::kI32, {3}, {base + 1, 12}, owner).ok());
  EXPECT_FALSE(Tensor::Adopt(DType::kI32, {3}, {base, 12}, nullptr).ok());
}

}  // namespace
}  // namespace atl::executor
