#include "common/net/tensor_frames.h"

#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>
#include "tests/status_matchers.h"

namespace atl::net {
namespace {

TEST(BorrowedFrame, SendsTheTensorsOwnBytesAndFreesThemWithTheFrame) {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4});
  std::weak_ptr<std::vector<float>> watch = owner;
  auto* bytes = reinterpret_cast<std::byte*>(owner->data());
  auto tensor = Tensor::Adopt(DType::kF32, {4}, {bytes, 16}, std::move(owner));
  ASSERT_THAT(tensor, IsOk());
  {
    zmq::message_t frame = BorrowedFrame(std::move(*tensor));
    EXPECT_EQ(frame.data(), bytes) << "the frame copied the bytes";
    EXPECT_EQ(frame.size(), 16u);
    EXPECT_FALSE(watch.expired()) << "the bytes went before the frame";
  }
  EXPECT_TRUE(watch.expired()) << "the frame did not free the tensor";
}

TEST(AdoptFrame, KeepsAReceivedFrameAsTheTensorsBytes) {
  const std::vector<float> values(1024, 2.5f);
  zmq::message_t frame(values.data(), values.size() * sizeof(float));
  const void* bytes = frame.data();
  auto tensor = AdoptFrame(DType::kF32, {1024}, frame);
  ASSERT_THAT(tensor, IsOk());
  EXPECT_EQ(tensor->data(), bytes) << "the frame's bytes were copied";
  EXPECT_EQ(*tensor, Tensor::F32({1024}, values));
}

TEST(AdoptFrame, CopiesBytesAtAnAddressTheDtypeCannotUse) {
  std::vector<std::byte> buffer(sizeof(float) * 2 + 1);
  const float values[2] = {7, 8};
  std::memcpy(buffer.data() + 1, values, sizeof(values));
  zmq::message_t frame(buffer.data() + 1, sizeof(values), nullptr, nullptr);  // not copied
  auto tensor = AdoptFrame(DType::kF32, {2}, frame);
  ASSERT_THAT(tensor, IsOk());
  EXPECT_NE(tensor->data(), buffer.data() + 1);
  EXPECT_EQ(*tensor, Tensor::F32({2}, {7, 8}));
}

TEST(AdoptFrame, RefusesAFrameOfTheWrongSize) {
  zmq::message_t frame(12);
  auto tensor = AdoptFrame(DType::kF32, {4}, frame);
  EXPECT_EQ(tensor.status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace atl::net
