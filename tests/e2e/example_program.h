// A training example program run as a user would run it against a test cluster: it prints
// its header, a line per step and a summary (examples/common/training_log.h).
#pragma once

#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "tests/launcher/subprocess.h"

namespace atl::testing {

// Runs `program` (a path) for 3 steps on the cluster at `rm` and checks its output, which
// must hold `header`.
inline void ExpectStepsAndSummary(const std::string& program, const std::string& rm,
                                  const std::string& header) {
  Subprocess example({program, "--rm", rm, "--steps", "3"});
  const CommandResult done = example.Wait(std::chrono::seconds(60));
  ASSERT_EQ(done.exit_code, 0) << done.Describe();
  EXPECT_NE(done.out.find(header), std::string::npos) << done.out;
  for (const char* line :
       {"step   1/3  loss ", "step   3/3  loss ", "examples/s\n", "done: loss "}) {
    EXPECT_NE(done.out.find(line), std::string::npos) << line << " in:\n" << done.out;
  }
}

}  // namespace atl::testing
