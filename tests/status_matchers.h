// gMock matchers for Status and Result<T>, so that a test says what it expects and a failure
// says what came instead:
//   ASSERT_THAT(slice, IsOk());  // "... which is NotFound: island 'x' has no live devices"
//   EXPECT_THAT(run.Wait(1s), StatusIs(Code::kDeadlineExceeded, "not ready within"));
// in place of ASSERT_TRUE(x.ok()) << x.status().ToString(). A Status or a Result prints as
// its status ("OK", or "Code: message") wherever gtest prints a value.
#pragma once

#include <ostream>
#include <string>

#include <gmock/gmock.h>

#include "atoll/status.h"

namespace atl {

inline const Status& StatusOf(const Status& status) { return status; }
template <typename T>
const Status& StatusOf(const Result<T>& result) {
  return result.status();
}

// How gtest prints them (found by argument-dependent lookup).
inline void PrintTo(const Status& status, std::ostream* os) { *os << status.ToString(); }
template <typename T>
void PrintTo(const Result<T>& result, std::ostream* os) {
  *os << result.status().ToString();
}

// A Status, or a Result holding a value.
MATCHER(IsOk, negation ? "is an error" : "is OK") {
  const Status& status = StatusOf(arg);
  if (!status.ok()) *result_listener << "which is " << status.ToString();
  return status.ok();
}

// A Status, or a Result holding an error, of `code` whose message contains `part`.
MATCHER_P2(StatusIs, code, part,
           std::string(negation ? "is not" : "is") + " an error of code " +
               std::string(CodeName(code)) + " whose message contains \"" + std::string(part) +
               "\"") {
  const Status& status = StatusOf(arg);
  *result_listener << "which is " << status.ToString();
  return status.code() == code && status.message().find(part) != std::string::npos;
}

}  // namespace atl
