// Tensors as ZeroMQ frames without copying their bytes: a frame sent from a tensor's own
// memory, and a tensor that keeps a received frame instead of copying it out. A large
// argument or result otherwise costs a fresh allocation (and its page faults) and a copy at
// each end.
#pragma once

#include <zmq.hpp>

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl::net {

// A frame that borrows `tensor`'s bytes: ZeroMQ frees the tensor once it has sent them.
zmq::message_t BorrowedFrame(Tensor tensor);

// The tensor of `dtype` and `shape` in `frame`, which it takes: adopted when the frame's
// address suits the dtype (a frame of ZeroMQ's own allocation does), else copied.
// InvalidArgument when the frame's size does not match.
Result<Tensor> AdoptFrame(DType dtype, Shape shape, zmq::message_t& frame);

}  // namespace atl::net
