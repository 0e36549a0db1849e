// Child processes for the local cluster: starting a program with its output in a log file,
// and checking, signalling and reaping processes. Used by LocalCluster (for its own
// children) and by `atoll down` (for processes another atoll process started, known only by
// pid). Functions are thread-safe; Spawn forks, so the child runs only async-signal-safe
// code before exec.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "atoll/status.h"

namespace atl::proc {

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is the program's path
  // stdout and stderr go to this file (created or truncated); stdin reads /dev/null.
  std::string log_path;
  // A pipe end to be the child's stdin instead of /dev/null, or its stdout instead of the
  // log (stderr stays there): for a child driven over its standard streams. -1: none. The
  // caller keeps them (Spawn closes neither); they should be close-on-exec and above 2.
  int stdin_fd = -1;
  int stdout_fd = -1;
  // true: append to log_path instead (a restarted service keeps its predecessor's log, which
  // says why that one ended).
  bool append_log = false;
  // true: the child starts a new session (setsid), so it outlives the launcher and its
  // terminal (`atoll up`). false: it stays in the launcher's session and receives SIGTERM
  // when the launching THREAD exits (PR_SET_PDEATHSIG), so a test that dies leaks nothing.
  bool detach = false;
  // "NAME=value" entries set in the child's environment, over the launcher's own.
  std::vector<std::string> env = {};
};

// Starts the program; returns once it has exec'd. Fails with NotFound when the program is
// not an executable file, Unavailable when fork or exec fails (with errno's text).
Result<pid_t> Spawn(const SpawnOptions& options);

// How a process ended.
struct ExitInfo {
  bool signaled = false;
  int code = 0;  // exit status, or the signal number when `signaled`
  bool clean() const { return !signaled && code == 0; }
  // "exited with status 3", "was killed by signal 9 (Killed)".
  std::string Describe() const;
};

// Reaps `pid`, a child of this process, if it has ended; empty while it still runs.
// Unavailable if `pid` is not a child of this process (already reaped).
Result<std::optional<ExitInfo>> TryReap(pid_t pid);

// True while a process `pid` exists and is not a zombie. Works for any process.
bool IsRunning(pid_t pid);

// True when `pid` runs and its argv[0] has the file name `program` (e.g. "atoll-rm"): the
// check that keeps `atoll down` from signalling a recycled pid that now belongs to someone
// else.
bool IsProgram(pid_t pid, std::string_view program);

// The last `lines` lines of a text file ("" when it cannot be read).
std::string TailFile(const std::string& path, size_t lines);

// The running executable's path, and the directory that holds it (from /proc/self/exe).
std::string ExecutablePath();
std::string ExecutableDir();

}  // namespace atl::proc
