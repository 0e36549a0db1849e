// Every message body: a header that decodes is converted with Header::As<T> for the struct
// of its kind (from the kind table, message_kinds.def). A body that converts must encode to
// bytes that decode and convert again to the same encoding: what a service accepted, it can
// also pass on.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/proto/codec.h"
#include "common/proto/message_types.h"

namespace atl::proto {
namespace {

template <typename T>
void ConvertBody(const Header& header) {
  auto body = header.As<T>();
  if (!body.ok()) {
    if (body.status().code() != Code::kInvalidArgument) std::abort();
    return;
  }
  const zmq::message_t once = EncodeHeader(header.request_id(), *body);
  auto again = DecodeHeader(once.data(), once.size());
  if (!again.ok()) std::abort();
  auto body_again = again->As<T>();
  if (!body_again.ok()) std::abort();
  const zmq::message_t twice = EncodeHeader(again->request_id(), *body_again);
  if (once.size() != twice.size() || std::memcmp(once.data(), twice.data(), once.size()) != 0) {
    std::abort();
  }
}

}  // namespace
}  // namespace atl::proto

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace atl::proto;
  auto header = DecodeHeader(data, size);
  if (!header.ok()) return 0;
  const bool known =
      VisitMessageType(header->kind(), [&]<typename T>() { ConvertBody<T>(*header); });
  if (!known) std::abort();  // DecodeHeader let through a kind the table lacks
  return 0;
}
