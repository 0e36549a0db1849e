#include "tests/launcher/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace atl::testing {

std::string CommandResult::Describe() const {
  return "exit code " + std::to_string(exit_code) + (timed_out ? " (timed out)" : "") +
         "\n--- stdout ---\n" + out + "--- stderr ---\n" + err;
}

Subprocess::Subprocess(const std::vector<std::string>& argv) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return;
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return;
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_ = fork();
  if (pid_ == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
  if (pid_ < 0) {
    exited_ = true;
    result_.exit_code = 127;
  }
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
  if (err_fd_ >= 0) close(err_fd_);
}

bool Subprocess::Poll(std::chrono::milliseconds wait) {
  pollfd fds[2];
  int n = 0;
  if (out_fd_ >= 0) fds[n++] = {out_fd_, POLLIN, 0};
  if (err_fd_ >= 0) fds[n++] = {err_fd_, POLLIN, 0};
  if (n > 0 && poll(fds, n, static_cast<int>(wait.count())) > 0) {
    for (int i = 0; i < n; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      const ssize_t got = read(fds[i].fd, buf, sizeof buf);
      int& fd = fds[i].fd == out_fd_ ? out_fd_ : err_fd_;
      std::string& sink = fds[i].fd == out_fd_ ? result_.out : result_.err;
      if (got > 0) {
        sink.append(buf, static_cast<size_t>(got));
      } else {
        close(fd);
        fd = -1;
      }
    }
  }
  if (!exited_ && pid_ > 0) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      result_.exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    }
  }
  return exited_ && out_fd_ < 0 && err_fd_ < 0;
}

CommandResult Subprocess::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!Poll(std::chrono::milliseconds(20))) {
    if (std::chrono::steady_clock::now() >= deadline) {
      if (!exited_ && pid_ > 0) {
        kill(pid_, SIGKILL);
        int status = 0;
        waitpid(pid_, &status, 0);
        exited_ = true;
        result_.exit_code = 128 + SIGKILL;
      }
      result_.timed_out = true;
      while (!Poll(std::chrono::milliseconds(20)) && (out_fd_ >= 0 || err_fd_ >= 0)) {
        // Drain what is already buffered; a grandchild holding the pipe keeps it open, so
        // give up on the streams rather than wait for it.
        if (std::chrono::steady_clock::now() >= deadline + std::chrono::seconds(1)) break;
      }
      break;
    }
  }
  return result_;
}

CommandResult RunCommand(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  Subprocess p(argv);
  return p.Wait(timeout);
}

}  // namespace atl::testing
