// Encoding and decoding of message headers (see protocol.h for the wire layout). Decoding
// never throws: malformed, truncated or mistyped bytes come back as InvalidArgument.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <msgpack.hpp>
#include <zmq.hpp>

#include "atoll/status.h"
#include "common/proto/peer.h"
#include "common/proto/protocol.h"

namespace atl::proto {

template <typename T>
zmq::message_t EncodeHeader(uint64_t request_id, const T& body) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  packer.pack_array(4);
  packer.pack(kVersion);
  packer.pack(static_cast<uint16_t>(T::kKind));
  packer.pack(request_id);
  packer.pack(body);
  return zmq::message_t(buffer.data(), buffer.size());
}

// A decoded header whose body is converted on demand, once the kind is known.
class Header {
 public:
  Kind kind() const { return kind_; }
  uint64_t request_id() const { return request_id_; }

  template <typename T>
  Result<T> As() const {
    if (kind_ != T::kKind) {
      return InvalidArgument(std::string("expected a ") + std::string(KindName(T::kKind)) +
                             " message, got " + std::string(KindName(kind_)));
    }
    try {
      T value;
      body_->convert(value);
      return value;
    } catch (const std::exception& e) {
      return InvalidArgument(std::string("malformed ") + std::string(KindName(kind_)) +
                             " body: " + e.what());
    }
  }

 private:
  friend Result<Header> DecodeHeader(const void* data, size_t size);

  Kind kind_ = Kind::kOk;
  uint64_t request_id_ = 0;
  std::shared_ptr<msgpack::object_handle> handle_;
  const msgpack::object* body_ = nullptr;
};

Result<Header> DecodeHeader(const void* data, size_t size);

// Limits for unpacking `size` bytes of untrusted msgpack: no declared length beyond what
// the bytes could hold (every element takes at least one byte), nesting at most 32 deep.
// Without them a 5-byte header declaring 2^31 elements asks for tens of GiB, and deep
// nesting overflows the stack.
msgpack::unpack_limit UntrustedLimit(size_t size);

// A message as received: routing id (on ROUTER sockets), decoded header, data frames.
struct Incoming {
  std::optional<zmq::message_t> routing_id;
  Header header;
  std::vector<zmq::message_t> data;
  Peer sender;  // who sent it, as authenticated by the receiving process
};

// Splits received frames into an Incoming; `routed` says the first frame is a routing id.
Result<Incoming> ParseIncoming(std::vector<zmq::message_t> frames, bool routed);

Error ToError(const Status& status);
Status FromError(const Error& error);

}  // namespace atl::proto
