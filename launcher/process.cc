#include "launcher/process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>

namespace atl::proc {

namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// Moves a close-on-exec descriptor above 0..2, so that the child's dup2 onto 0..2 can
// neither clobber it nor be a no-op that leaves close-on-exec set. Returns -1 on failure.
int AboveStdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  const int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  close(fd);
  return high;
}

// Runs in the forked child: only async-signal-safe calls. Never returns.
[[noreturn]] void ExecChild(char* const* argv, char* const* envp, int in_fd, int out_fd, int log_fd,
                            int report_fd, bool detach, pid_t launcher) {
  if (detach) {
    setsid();
  } else {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != launcher) _exit(127);  // the launcher died before prctl took effect
  }
  // Signals the launcher ignored or blocked would stay so across exec; services need the
  // defaults (they exit 0 on SIGTERM/SIGINT).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD}) sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(log_fd, 2) < 0) {
    const int err = errno;
    [[maybe_unused]] auto n = write(report_fd, &err, sizeof err);
    _exit(127);
  }
  // Everything else the launcher had open (a pipe from popen, sockets) must not leak into
  // the service: a leaked pipe end would keep the launcher's reader waiting for EOF. The
  // report pipe is close-on-exec, so keep it open until exec.
  for (int fd = 3; fd < report_fd; ++fd) close(fd);
  if (syscall(SYS_close_range, static_cast<unsigned>(report_fd) + 1, ~0u, 0u) != 0) {
    for (int fd = report_fd + 1; fd < 4096; ++fd) close(fd);
  }
  execve(argv[0], argv, envp);
  const int err = errno;
  [[maybe_unused]] auto n = write(report_fd, &err, sizeof err);
  _exit(127);
}

// The launcher's environment with `overrides` ("NAME=value") in place of its own values.
std::vector<std::string> ChildEnvironment(const std::vector<std::string>& overrides) {
  auto name_of = [](std::string_view entry) { return entry.substr(0, entry.find('=')); };
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry = *e;
    const bool overridden = std::any_of(overrides.begin(), overrides.end(), [&](const auto& o) {
      return name_of(o) == name_of(entry);
    });
    if (!overridden) env.emplace_back(entry);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

}  // namespace

std::string ExitInfo::Describe() const {
  if (!signaled) return "exited with status " + std::to_string(code);
  const char* name = strsignal(code);
  return "was killed by signal " + std::to_string(code) + " (" + (name ? name : "?") + ")";
}

Result<pid_t> Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return InvalidArgument("spawn: empty argv");
  const std::string& program = options.argv[0];
  if (access(program.c_str(), X_OK) != 0) {
    return NotFound(program + " is not an executable file: " + ErrnoText(errno));
  }
  std::vector<char*> argv;
  for (const auto& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // Made before fork: the child may not allocate.
  const std::vector<std::string> env = ChildEnvironment(options.env);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  const int log_fd = AboveStdio(
      open(options.log_path.c_str(),
           O_WRONLY | O_CREAT | O_CLOEXEC | (options.append_log ? O_APPEND : O_TRUNC), 0644));
  if (log_fd < 0) {
    return Unavailable("cannot open log file " + options.log_path + ": " + ErrnoText(errno));
  }
  const int null_fd = AboveStdio(open("/dev/null", O_RDONLY | O_CLOEXEC));
  int report[2] = {-1, -1};
  if (pipe2(report, O_CLOEXEC) == 0) {
    report[0] = AboveStdio(report[0]);
    report[1] = AboveStdio(report[1]);
  }
  if (null_fd < 0 || report[0] < 0 || report[1] < 0) {
    const int err = errno;
    for (int fd : {log_fd, null_fd, report[0], report[1]}) {
      if (fd >= 0) close(fd);
    }
    return Unavailable("spawn " + program + ": " + ErrnoText(err));
  }
  const pid_t launcher = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    ExecChild(argv.data(), envp.data(), options.stdin_fd >= 0 ? options.stdin_fd : null_fd,
              options.stdout_fd >= 0 ? options.stdout_fd : log_fd, log_fd, report[1],
              options.detach, launcher);
  }
  const int fork_errno = errno;
  close(log_fd);
  close(null_fd);
  close(report[1]);
  if (pid < 0) {
    close(report[0]);
    return Unavailable("fork for " + program + ": " + ErrnoText(fork_errno));
  }
  // The report pipe closes at exec (EOF: success) or carries errno (failure).
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(report[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n > 0) {
    waitpid(pid, nullptr, 0);  // it has _exit'ed or is about to
    return Unavailable("cannot exec " + program + ": " + ErrnoText(child_errno));
  }
  return pid;
}

Result<std::optional<ExitInfo>> TryReap(pid_t pid) {
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return std::optional<ExitInfo>{};
  if (r < 0) {
    return Unavailable("waitpid(" + std::to_string(pid) + "): " + ErrnoText(errno));
  }
  ExitInfo info;
  if (WIFSIGNALED(status)) {
    info.signaled = true;
    info.code = WTERMSIG(status);
  } else {
    info.code = WEXITSTATUS(status);
  }
  return std::optional<ExitInfo>(info);
}

bool IsRunning(pid_t pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  // A zombie has ended; only its parent has not reaped it yet. The state is the first
  // field after the parenthesised command name in /proc/PID/stat.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close_paren = line.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= line.size()) return true;
  const char state = line[close_paren + 2];
  return state != 'Z' && state != 'X';
}

bool IsProgram(pid_t pid, std::string_view program) {
  if (!IsRunning(pid)) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string argv0;
  if (!std::getline(in, argv0, '\0')) return false;
  return std::filesystem::path(argv0).filename() == program;
}

std::string TailFile(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(in, line)) {
    tail.push_back(std::move(line));
    if (tail.size() > lines) tail.pop_front();
  }
  std::string out;
  for (const auto& l : tail) out += l + "\n";
  return out;
}

std::string ExecutablePath() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.string();
}

std::string ExecutableDir() {
  const std::string exe = ExecutablePath();
  if (exe.empty()) return ".";
  return std::filesystem::path(exe).parent_path().string();
}

}  // namespace atl::proc
