// Running the project's Python (ATOLL_PYTHON, the venv's) with numpy from a test: the checkpoint
// format is checked against numpy itself.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/launcher/subprocess.h"

namespace atl::testing {

inline constexpr const char* kPython = ATOLL_PYTHON;
inline constexpr const char* kReadCheckpointScript =
    ATOLL_SOURCE_DIR "/tests/common/checkpoint/read_checkpoint.py";

// True when that Python imports numpy (scripts/setup.sh installs it into .venv).
inline bool HaveNumpy() { return RunCommand({kPython, "-c", "import numpy"}).exit_code == 0; }

// Runs `code` with `args` (sys.argv[1:]); its stdout, or a failed expectation and "".
inline std::string RunPython(const std::string& code, std::vector<std::string> args = {}) {
  std::vector<std::string> argv = {kPython, "-c", code};
  argv.insert(argv.end(), args.begin(), args.end());
  const CommandResult done = RunCommand(argv);
  EXPECT_EQ(done.exit_code, 0) << done.Describe();
  return done.exit_code == 0 ? done.out : "";
}

}  // namespace atl::testing
