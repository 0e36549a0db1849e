// The envelope's vocabulary: the protocol version, every message kind (one number each,
// grouped by the service that handles it) and the generic replies. See protocol.h.
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
  // Generic replies.
  kOk = 1,
  kError = 2,
  // Resource manager.
  kRegisterExecutor = 10,
  kRegisterExecutorReply = 11,
  kHeartbeat = 12,
  kRegisterScheduler = 13,
  kHelloClient = 14,
  kHelloClientReply = 15,
  kCreateSlice = 16,
  kSliceInfo = 17,
  kRegisterFunction = 18,
  kRegisterFunctionReply = 19,
  kGetClusterStatus = 20,
  kClusterStatus = 21,
  kGoodbye = 22,
  kHostChanged = 23,
  kSliceRemapped = 24,
  kServiceChanged = 25,
  kLookupOwners = 26,
  kOwners = 27,
  // Executor.
  kCompile = 40,
  kDispatch = 41,
  kTupleBatch = 42,
  kRunLoop = 43,
  // Scheduler.
  kSubmitProgram = 60,
  kSubmitReply = 61,
  kGangDone = 62,
  kNodeReleased = 63,
  kCancelRun = 64,
  kRunDone = 65,
  // Object store.
  kStoreHello = 80,
  kStoreHelloReply = 81,
  kCreateObject = 82,
  kCreateObjectReply = 83,
  kSealObject = 84,
  kPutObject = 85,
  kGetObject = 86,
  kGetObjectReply = 87,
  kReleaseObject = 88,
  kGetStoreStats = 89,
  kStoreStats = 90,
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
