// Helpers shared by the cluster tests: temporary directories, a bin dir of fake services,
// the real binaries, and finding leaked processes.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace atl::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The cluster config the launcher tests start (2 islands of 2 hosts, fast heartbeats).
inline const std::string kTestConfig = ATOLL_SOURCE_DIR "/config/test.toml";

// The whole of the file at `path`; "" when it cannot be read.
std::string ReadFile(const std::string& path);

inline const std::vector<std::string> kServicePrograms = {"atoll-rm", "atoll-objectstore",
                                                          "atoll-executor", "atoll-scheduler"};

// Fills `dir` with atoll-rm, atoll-objectstore, atoll-executor and atoll-scheduler, each a
// symlink to the fake service (fake_service.cc). Returns `dir`.
std::string MakeFakeBinDir(const std::string& dir);

// The service programs missing from `bin_dir`, space separated; "" when all are there.
std::string MissingServices(const std::string& bin_dir);

// Pids of the running processes whose argv[0] lies in `dir` (leak detection: every fake bin
// dir is unique to its test).
std::vector<pid_t> ProcessesStartedFrom(const std::string& dir);

// Polls `condition` every 10 ms for up to `timeout_ms`; returns its last value.
template <typename F>
bool WaitFor(F condition, int timeout_ms);

}  // namespace atl::testing

#include <chrono>
#include <thread>

template <typename F>
bool atl::testing::WaitFor(F condition, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return condition();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}
