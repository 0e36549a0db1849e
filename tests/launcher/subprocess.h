// Test helper: runs a program with its stdout and stderr captured, every wait bounded.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace atl::testing {

struct CommandResult {
  int exit_code = -1;      // exit status; 128 + signal when killed by a signal
  bool timed_out = false;  // it was killed because it ran past the timeout
  std::string out;
  std::string err;
  // For assertion messages: the exit code and both streams.
  std::string Describe() const;
};

class Subprocess {
 public:
  // Starts argv (argv[0] is a path). On failure exit_code is 127 at Wait().
  explicit Subprocess(const std::vector<std::string>& argv);
  ~Subprocess();  // kills it if it still runs
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  // Reads what is available (waiting up to `wait`) and reaps the process if it ended.
  // Returns true once it has ended and both streams are closed.
  bool Poll(std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  // Waits for the end up to `timeout`; past it, SIGKILLs the process and sets timed_out.
  CommandResult Wait(std::chrono::milliseconds timeout);
  // What it has written to stdout so far (as read by Poll).
  const std::string& out() const { return result_.out; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  bool exited_ = false;
  CommandResult result_;
};

// Runs argv to completion (bounded by `timeout`).
CommandResult RunCommand(const std::vector<std::string>& argv,
                         std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace atl::testing
