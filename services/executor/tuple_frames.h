// How the tensors of a TupleBatch travel in its data frames (see TupleBatch in protocol.h).
// A tensor smaller than kPackBytes is packed, back to back with the batch's other small
// ones, into the batch's first data frame: a batch of small tuples costs ZeroMQ one frame
// for their data, not one each. A larger tensor is a frame of its own, never copied: the
// sender's frame borrows the tensor's bytes and the receiver's tensor adopts the frame.
#pragma once

#include <cstddef>
#include <vector>

#include "atoll/tensor.h"
#include "common/net/transport.h"
#include "common/proto/protocol.h"

namespace atl::executor {

// Below this a tensor is packed: one small copy costs less than a frame of its own, or than
// keeping the tensor alive on the heap until ZeroMQ's I/O thread lets go of it.
inline constexpr size_t kPackBytes = 8 << 10;

// The data frames of one batch, built tuple by tuple, in the order of its headers.
class TupleFrames {
 public:
  // Takes the tuple's bytes (none for an error) and says in `h` what they are: dtype and
  // shape, or the error, and whether they are packed. Returns the tensor's bytes.
  size_t Add(proto::TupleHeader& h, Result<Tensor> value);
  // The frames, in wire order; leaves this empty (keeping its buffer) for the next batch.
  net::Frames Take();

 private:
  std::vector<std::byte> packed_;
  bool any_packed_ = false;  // packed tuples may all be empty, so a size would not tell
  net::Frames own_;          // the unpacked tensors, in order
};

// The values of the batch's tuples, in order: a tensor, or the error its producer sent.
// Takes over the frames of unpacked tensors. Fails, returning no value, when the frames do
// not hold what the headers say.
Result<std::vector<Result<Tensor>>> TupleValues(const proto::TupleBatch& batch,
                                                net::Frames& frames);

}  // namespace atl::executor
