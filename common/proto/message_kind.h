// The envelope's vocabulary: the protocol version, every message kind (one number each,
// from the table message_kinds.def) and the generic replies. See protocol.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "common/ir/ir.h"

namespace atl::proto {

inline constexpr uint32_t kVersion = 1;

enum class Kind : uint16_t {
#define ATOLL_MESSAGE_KIND(name, number) k##name = number,
#include "common/proto/message_kinds.def"
#undef ATOLL_MESSAGE_KIND
};

std::string_view KindName(Kind kind);

// ---------------------------------------------------------------------------------------
// Generic replies.

struct Ok {
  static constexpr Kind kKind = Kind::kOk;
  bool operator==(const Ok&) const = default;
  MSGPACK_DEFINE();
};

struct Error {
  static constexpr Kind kKind = Kind::kError;
  int32_t code = 0;  // atl::Code
  std::string message;
  bool operator==(const Error&) const = default;
  MSGPACK_DEFINE(code, message);
};

}  // namespace atl::proto
