// Status and Result: a Result built from an OK Status is an error in every build.
#include "atoll/status.h"

#include <string>

#include <gtest/gtest.h>

#include "tests/status_matchers.h"

namespace atl {
namespace {

// A bug of the kind the check is for: a function that "fails" with OK.
int forgets_at_line = 0;
Result<int> ForgetsTheValue() {
  Status nothing_wrong = Status::Ok();
  forgets_at_line = __LINE__ + 1;
  return nothing_wrong;  // the line the error names
}

Result<int> PassesItOn() {
  ATOLL_ASSIGN_OR_RETURN(int value, ForgetsTheValue());
  return value + 1;
}

TEST(StatusTest, AResultFromAnErrorHoldsTheError) {
  Result<int> failed = NotFound("slice 7 is unknown");
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), Code::kNotFound);
  EXPECT_EQ(failed.status().ToString(), "NotFound: slice 7 is unknown");
  Result<int> value = 3;
  ASSERT_THAT(value, IsOk());
  EXPECT_EQ(*value, 3);
}

TEST(StatusTest, AResultFromAnOkStatusIsAnInternalErrorNamingWhereItWasBuilt) {
  const Result<int> broken = ForgetsTheValue();
  EXPECT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), Code::kInternal);  // not OK: no caller reads a value
  const std::string& message = broken.status().message();
  EXPECT_NE(message.find("a Result was built from an OK Status"), std::string::npos) << message;
  const std::string at = "status_test.cc:" + std::to_string(forgets_at_line) + ")";
  EXPECT_NE(message.find(at), std::string::npos) << message;

  // Passed on as any error would be.
  const Result<int> passed = PassesItOn();
  EXPECT_EQ(passed.status().code(), Code::kInternal);
  EXPECT_EQ(passed.status().message(), message);
}

TEST(StatusMatchersTest, IsOkAndStatusIsSayWhatCameInstead) {
  EXPECT_THAT(Status::Ok(), IsOk());
  EXPECT_THAT(Result<int>(3), IsOk());
  EXPECT_THAT(NotFound("slice 7 is unknown"), ::testing::Not(IsOk()));
  EXPECT_THAT(Result<int>(NotFound("slice 7 is unknown")), StatusIs(Code::kNotFound, "slice 7"));
  EXPECT_THAT(NotFound("slice 7 is unknown"), ::testing::Not(StatusIs(Code::kNotFound, "slice 8")));
  EXPECT_THAT(NotFound("slice 7 is unknown"), ::testing::Not(StatusIs(Code::kInternal, "slice 7")));

  ::testing::StringMatchResultListener why;
  EXPECT_FALSE(
      ::testing::ExplainMatchResult(IsOk(), Result<int>(Unavailable("host h0 is lost")), &why));
  EXPECT_EQ(why.str(), "which is Unavailable: host h0 is lost");
  EXPECT_EQ(::testing::PrintToString(Result<int>(Cancelled("run 4"))), "Cancelled: run 4");
}

}  // namespace
}  // namespace atl
