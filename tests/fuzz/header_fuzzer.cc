// The envelope: any bytes given to DecodeHeader, and any frames given to ParseIncoming (as a
// DEALER and as a ROUTER receives them), come back as a header or InvalidArgument.
#include <cstdint>
#include <cstdlib>

#include "common/proto/codec.h"
#include "tests/fuzz/fuzz_frames.h"

namespace atl::proto {
namespace {

void ExpectRefusedAsInvalid(const Status& status) {
  if (!status.ok() && status.code() != Code::kInvalidArgument) std::abort();
}

}  // namespace
}  // namespace atl::proto

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace atl::proto;
  ExpectRefusedAsInvalid(DecodeHeader(data, size).status());
  for (bool routed : {false, true}) {
    auto in = ParseIncoming(atl::fuzz::SplitFrames(data, size), routed);
    ExpectRefusedAsInvalid(in.status());
  }
  return 0;
}
