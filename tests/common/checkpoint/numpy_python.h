// Running Debian's python3 with numpy from a test: the checkpoint format is checked against
// numpy itself.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/launcher/subprocess.h"

namespace atl::testing {

inline constexpr const char* kSystemPython = "/usr/bin/python3";
inline constexpr const char* kReadCheckpointScript =
    ATOLL_SOURCE_DIR "/tests/common/checkpoint/read_checkpoint.py";

// True when /usr/bin/python3 imports numpy (scripts/setup.sh installs python3-numpy).
inline bool HaveNumpy() { return RunCommand({kSystemPython, "-c", "import numpy"}).exit_code == 0; }

// Runs `code` with `args` (sys.argv[1:]); its stdout, or a failed expectation and "".
inline std::string RunPython(const std::string& code, std::vector<std::string> args = {}) {
  std::vector<std::string> argv = {kSystemPython, "-c", code};
  argv.insert(argv.end(), args.begin(), args.end());
  const CommandResult done = RunCommand(argv);
  EXPECT_EQ(done.exit_code, 0) << done.Describe();
  return done.exit_code == 0 ? done.out : "";
}

}  // namespace atl::testing
