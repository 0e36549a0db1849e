#include "atoll/status.h"

namespace atl {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "OK";
    case Code::kInvalidArgument:
      return "InvalidArgument";
    case Code::kNotFound:
      return "NotFound";
    case Code::kOutOfMemory:
      return "OutOfMemory";
    case Code::kUnavailable:
      return "Unavailable";
    case Code::kDeadlineExceeded:
      return "DeadlineExceeded";
    case Code::kCancelled:
      return "Cancelled";
    case Code::kFailedPrecondition:
      return "FailedPrecondition";
    case Code::kInternal:
      return "Internal";
    case Code::kPermissionDenied:
      return "PermissionDenied";
    case Code::kResourceExhausted:
      return "ResourceExhausted";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, std::string(context) + ": " + message_);
}

Status OkStatusInResult(const char* file, int line) {
  return Internal(std::string("a Result was built from an OK Status, which is neither a value "
                              "nor an error (at ") +
                  file + ":" + std::to_string(line) + ")");
}

}  // namespace atl
