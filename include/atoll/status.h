// Status and Result<T>: how every fallible atoll call reports failure. No exceptions cross
// an atoll API; a failure carries a domain code and a human message naming what failed.
#pragma once

#include <cassert>  // for the files that use assert and include only this
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace atl {

// Codes travel between processes as their numbers: append new ones, never renumber
// (proto::FromError turns a number past the last into Internal).
enum class Code : int {
  kOk = 0,
  kInvalidArgument = 1,     // the request itself is wrong (shape, type, malformed bytes)
  kNotFound = 2,            // it names an id (slice, function, object, run) nobody knows
  kOutOfMemory = 3,         // the request can never fit in the memory it targets
  kUnavailable = 4,         // a peer is down or unreachable; retrying may help
  kDeadlineExceeded = 5,    // a bounded wait ran out
  kCancelled = 6,           // the work was cancelled or its owner went away
  kFailedPrecondition = 7,  // the system is not in a state that allows the request
  kInternal = 8,            // a bug: an invariant did not hold
  kPermissionDenied = 9,    // the sender may not do this (not its object, not a member)
  kResourceExhausted = 10,  // over a quota (the message names it, its limit and the use)
  kLastCode = kResourceExhausted,
};

std::string_view CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "NotFound: slice 7 is unknown", or "OK".
  std::string ToString() const;
  // Prefixes the message with context, keeping the code: "submit: NotFound: ...".
  Status WithContext(std::string_view context) const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
inline Status OutOfMemory(std::string m) { return {Code::kOutOfMemory, std::move(m)}; }
inline Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {Code::kDeadlineExceeded, std::move(m)}; }
inline Status Cancelled(std::string m) { return {Code::kCancelled, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {Code::kFailedPrecondition, std::move(m)};
}
inline Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {Code::kPermissionDenied, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {Code::kResourceExhausted, std::move(m)}; }

// What a Result built from an OK Status holds instead, in every build: such a Result would
// have neither a value nor an error (ok() false, status() OK), a bug in the code that built
// it, so it is an Internal error naming where that code is.
Status OkStatusInResult(const char* file, int line);

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  // `file` and `line`: the code that built it (a `return status;`), named if `status` is OK.
  // (__builtin_FILE and __builtin_LINE rather than std::source_location, which clang 14 with
  // libstdc++ 12, the fuzzing build's compiler, does not have.)
  Result(Status status,  // NOLINT: implicit by design
         const char* file = __builtin_FILE(), int line = __builtin_LINE())
      : v_(status.ok() ? OkStatusInResult(file, line) : std::move(status)) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace atl

#define ATOLL_CONCAT_INNER(a, b) a##b
#define ATOLL_CONCAT(a, b) ATOLL_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when `expr` is not OK.
#define ATOLL_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::atl::Status atoll_status_ = (expr);          \
    if (!atoll_status_.ok()) return atoll_status_; \
  } while (0)

// `ATOLL_ASSIGN_OR_RETURN(auto x, MakeX());` binds the value or returns the error.
#define ATOLL_ASSIGN_OR_RETURN(lhs, expr)                  \
  auto ATOLL_CONCAT(atoll_result_, __LINE__) = (expr);     \
  if (!ATOLL_CONCAT(atoll_result_, __LINE__).ok())         \
    return ATOLL_CONCAT(atoll_result_, __LINE__).status(); \
  lhs = std::move(ATOLL_CONCAT(atoll_result_, __LINE__)).value()
