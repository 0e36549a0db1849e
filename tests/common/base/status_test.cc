// Status and Result: a Result built from an OK Status is an error in every build.
#include "atoll/status.h"

#include <string>

#include <gtest/gtest.h>

namespace atl {
namespace {

// A bug of the kind the check is for: a function that "fails" with OK.
Result<int> ForgetsTheValue() {
  Status nothing_wrong = Status::Ok();
  return nothing_wrong;  // line named in the error
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
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, 3);
}

TEST(StatusTest, AResultFromAnOkStatusIsAnInternalErrorNamingWhereItWasBuilt) {
  const Result<int> broken = ForgetsTheValue();
  EXPECT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), Code::kInternal);  // not OK: no caller reads a value
  const std::string& message = broken.status().message();
  EXPECT_NE(message.find("a Result was built from an OK Status"), std::string::npos) << message;
  EXPECT_NE(message.find("status_test.cc:14)"), std::string::npos) << message;

  // Passed on as any error would be.
  const Result<int> passed = PassesItOn();
  EXPECT_EQ(passed.status().code(), Code::kInternal);
  EXPECT_EQ(passed.status().message(), message);
}

}  // namespace
}  // namespace atl
