#include "bench/peers/dask_side.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "launcher/process.h"

namespace atl::bench {
namespace {

using Clock = std::chrono::steady_clock;

// How long the script may take to shut its cluster down once its stdin closes.
constexpr auto kShutdown = std::chrono::seconds(15);

Status WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Unavailable(fmt::format("writing to the Dask side: {}", strerror(errno)));
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<DaskSide>> DaskSide::Start(const std::string& python,
                                                  const std::string& script,
                                                  const std::string& log_path,
                                                  std::chrono::milliseconds startup) {
  // A script that died would otherwise kill this process at the next request (SIGPIPE);
  // with the signal ignored the write fails and says so.
  signal(SIGPIPE, SIG_IGN);
  int requests[2], answers[2];
  if (pipe2(requests, O_CLOEXEC) != 0) return Unavailable(fmt::format("pipe: {}", strerror(errno)));
  if (pipe2(answers, O_CLOEXEC) != 0) {
    const int err = errno;
    close(requests[0]);
    close(requests[1]);
    return Unavailable(fmt::format("pipe: {}", strerror(err)));
  }
  auto pid = proc::Spawn({.argv = {python, script},
                          .log_path = log_path,
                          .stdin_fd = requests[0],
                          .stdout_fd = answers[1]});
  close(requests[0]);
  close(answers[1]);
  if (!pid.ok()) {
    close(requests[1]);
    close(answers[0]);
    return pid.status();
  }
  std::unique_ptr<DaskSide> side(new DaskSide(*pid, requests[1], answers[0], log_path));
  ATOLL_ASSIGN_OR_RETURN(nlohmann::json ready, side->ReadAnswer(startup));
  if (ready.contains("missing")) {
    return FailedPrecondition(
        fmt::format("{} has no Python package '{}' (scripts/setup.sh installs it into .venv)",
                    python, ready["missing"].get<std::string>()));
  }
  if (!ready.contains("ready") || !ready["dask"].is_string()) {
    return Internal("the Dask side started with " + ready.dump());
  }
  side->version_ = ready["dask"].get<std::string>();
  return side;
}

DaskSide::~DaskSide() {
  close(requests_fd_);
  const auto deadline = Clock::now() + kShutdown;
  while (Clock::now() < deadline) {
    auto ended = proc::TryReap(pid_);
    if (!ended.ok() || ended->has_value()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (proc::IsRunning(pid_)) {
    kill(pid_, SIGKILL);
    (void)proc::TryReap(pid_);
  }
  close(answers_fd_);
}

Result<double> DaskSide::Measure(const std::string& workload, int tasks,
                                 std::chrono::milliseconds timeout) {
  ATOLL_RETURN_IF_ERROR(WriteAll(requests_fd_, fmt::format("{} {}\n", workload, tasks)));
  ATOLL_ASSIGN_OR_RETURN(nlohmann::json answer, ReadAnswer(timeout));
  if (answer.contains("tasks_per_s") && answer["tasks_per_s"].is_number()) {
    return answer["tasks_per_s"].get<double>();
  }
  return Internal("the Dask side answered " + answer.dump());
}

Result<nlohmann::json> DaskSide::ReadAnswer(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  size_t end;
  while ((end = buffered_.find('\n')) == std::string::npos) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return DeadlineExceeded(
          fmt::format("the Dask side did not answer in {} ms", timeout.count()));
    }
    pollfd readable{answers_fd_, POLLIN, 0};
    const int ready = poll(&readable, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) return Unavailable(fmt::format("poll: {}", strerror(errno)));
    if (ready <= 0) continue;
    char chunk[4096];
    const ssize_t n = read(answers_fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Unavailable(fmt::format("the Dask side ended; the end of its log ({}):\n{}", log_path_,
                                     proc::TailFile(log_path_, 20)));
    }
    buffered_.append(chunk, static_cast<size_t>(n));
  }
  const std::string line = buffered_.substr(0, end);
  buffered_.erase(0, end + 1);
  auto answer = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!answer.is_object()) return Internal("the Dask side wrote: " + line);
  return answer;
}

}  // namespace atl::bench
