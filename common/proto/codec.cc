#include "common/proto/codec.h"

#include <string>

namespace atl::proto {

Result<Header> DecodeHeader(const void* data, size_t size) {
  Header header;
  try {
    auto handle = std::make_shared<msgpack::object_handle>(msgpack::unpack(
        static_cast<const char*>(data), size, nullptr, nullptr, UntrustedLimit(size)));
    const msgpack::object& root = handle->get();
    if (root.type != msgpack::type::ARRAY || root.via.array.size != 4) {
      return InvalidArgument("message header is not a 4-element msgpack array");
    }
    const msgpack::object* items = root.via.array.ptr;
    const auto version = items[0].as<uint32_t>();
    if (version != kVersion) {
      return InvalidArgument("protocol version " + std::to_string(version) +
                             " is not supported (this side speaks " + std::to_string(kVersion) +
                             ")");
    }
    const auto kind = static_cast<Kind>(items[1].as<uint16_t>());
    if (KindName(kind) == "unknown") {
      return InvalidArgument("unknown message kind " + std::to_string(items[1].as<uint16_t>()));
    }
    header.kind_ = kind;
    header.request_id_ = items[2].as<uint64_t>();
    header.body_ = &items[3];
    header.handle_ = std::move(handle);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("malformed message header: ") + e.what());
  }
  return header;
}

msgpack::unpack_limit UntrustedLimit(size_t size) {
  constexpr size_t kMaxDepth = 32;
  return msgpack::unpack_limit(size, size / 2, size, size, size, kMaxDepth);
}

Result<Incoming> ParseIncoming(std::vector<zmq::message_t> frames, bool routed) {
  Incoming in;
  size_t next = 0;
  if (routed) {
    if (frames.empty()) return InvalidArgument("empty message");
    in.routing_id = std::move(frames[0]);
    next = 1;
  }
  if (frames.size() <= next) return InvalidArgument("message has no header frame");
  ATOLL_ASSIGN_OR_RETURN(in.header, DecodeHeader(frames[next].data(), frames[next].size()));
  in.sender = PeerOf(frames[next]);
  for (size_t i = next + 1; i < frames.size(); ++i) in.data.push_back(std::move(frames[i]));
  return in;
}

Error ToError(const Status& status) {
  return Error{static_cast<int32_t>(status.code()), status.message()};
}

Status FromError(const Error& error) {
  if (error.code <= 0 || error.code > static_cast<int32_t>(Code::kLastCode)) {
    return Internal("peer sent error with unknown code " + std::to_string(error.code) + ": " +
                    error.message);
  }
  return Status(static_cast<Code>(error.code), error.message);
}

std::string_view KindName(Kind kind) {
  switch (kind) {
#define ATOLL_MESSAGE_KIND(name, number) \
  case Kind::k##name:                    \
    return #name;
#include "common/proto/message_kinds.def"
#undef ATOLL_MESSAGE_KIND
  }
  return "unknown";
}

}  // namespace atl::proto
