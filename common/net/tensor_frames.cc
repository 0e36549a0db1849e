#include "common/net/tensor_frames.h"

#include <algorithm>
#include <memory>
#include <span>

namespace atl::net {

zmq::message_t BorrowedFrame(Tensor tensor) {
  auto* owner = new Tensor(std::move(tensor));
  return zmq::message_t(
      owner->data(), owner->nbytes(), [](void*, void* hint) { delete static_cast<Tensor*>(hint); },
      owner);
}

Result<Tensor> AdoptFrame(DType dtype, Shape shape, zmq::message_t& frame) {
  auto owner = std::make_shared<zmq::message_t>(std::move(frame));
  const std::span<std::byte> bytes(static_cast<std::byte*>(owner->data()), owner->size());
  if (reinterpret_cast<uintptr_t>(bytes.data()) % std::max<size_t>(DTypeSize(dtype), 1) == 0) {
    return Tensor::Adopt(dtype, std::move(shape), bytes, std::move(owner));
  }
  return Tensor::FromBytes(dtype, std::move(shape), {bytes.begin(), bytes.end()});
}

}  // namespace atl::net
