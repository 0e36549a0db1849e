#include "launcher/virtual_network.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "launcher/process.h"

namespace atl {

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Where `ip netns add` mounts each namespace.
constexpr char kNetnsDir[] = "/run/netns";
constexpr char kPrefix[] = "atoll-";
constexpr char kSwitch[] = "switch";
constexpr size_t kMaxMachines = 200;
constexpr auto kCommandTimeout = 10s;
constexpr auto kKillTimeout = 5s;

std::string ErrnoText() { return std::strerror(errno); }

std::string FindIp() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

// "atoll-<pid>-<name>": this process's namespaces, and how a stale one is told apart.
std::string NetnsName(pid_t pid, const std::string& name) {
  return fmt::format("{}{}-{}", kPrefix, pid, name);
}

// The pid in a namespace name this class made, or 0 for any other name.
pid_t PidOf(const std::string& netns) {
  if (!netns.starts_with(kPrefix)) return 0;
  const size_t start = std::strlen(kPrefix);
  const size_t dash = netns.find('-', start);
  if (dash == std::string::npos || dash == start) return 0;
  pid_t pid = 0;
  for (size_t i = start; i < dash; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(netns[i]))) return 0;
    pid = pid * 10 + (netns[i] - '0');
  }
  return pid;
}

bool PlainName(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
}

// The pids of the processes whose network namespace is `netns` (as `ip netns pids` finds
// them: by the namespace's inode). Zombies have none and are not listed.
std::vector<pid_t> ProcessesIn(const std::string& netns) {
  std::vector<pid_t> pids;
  struct stat ns {};
  if (stat((std::string(kNetnsDir) + "/" + netns).c_str(), &ns) != 0) return pids;
  const std::string want = fmt::format("net:[{}]", ns.st_ino);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    const bool a_pid = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    if (!a_pid) continue;
    char link[64] = {};
    const std::string path = "/proc/" + name + "/ns/net";
    const ssize_t n = readlink(path.c_str(), link, sizeof link - 1);
    if (n > 0 && want == std::string(link, static_cast<size_t>(n))) {
      pids.push_back(static_cast<pid_t>(std::stol(name)));
    }
  }
  return pids;
}

// SIGKILLs every process in `netns` until none is left (a supervisor killed late may have
// started another), bounded.
void KillProcessesIn(const std::string& netns) {
  const auto deadline = std::chrono::steady_clock::now() + kKillTimeout;
  for (;;) {
    const std::vector<pid_t> pids = ProcessesIn(netns);
    if (pids.empty()) return;
    if (std::chrono::steady_clock::now() > deadline) {
      spdlog::warn("virtual network: {} processes still run in {} after SIGKILL", pids.size(),
                   netns);
      return;
    }
    for (pid_t pid : pids) kill(pid, SIGKILL);
    std::this_thread::sleep_for(10ms);
  }
}

}  // namespace

Status VirtualNetwork::Ip(const std::vector<std::string>& args) const {
  char log[] = "/tmp/atoll-ip-XXXXXX";
  const int fd = mkstemp(log);
  if (fd < 0) return Unavailable(std::string("mkstemp: ") + ErrnoText());
  close(fd);
  std::vector<std::string> argv = {ip_};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string command = fmt::format("{}", fmt::join(argv, " "));
  auto finish = [&](Status status) {
    if (!status.ok()) status = status.WithContext(command);
    unlink(log);
    return status;
  };
  auto pid = proc::Spawn({.argv = argv, .log_path = log});
  if (!pid.ok()) return finish(pid.status());
  const auto deadline = std::chrono::steady_clock::now() + kCommandTimeout;
  for (;;) {
    auto ended = proc::TryReap(*pid);
    if (!ended.ok()) return finish(ended.status());
    if (ended->has_value()) {
      if ((*ended)->clean()) return finish(Status::Ok());
      return finish(
          Unavailable(fmt::format("{}: {}", (*ended)->Describe(), proc::TailFile(log, 5))));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(*pid, SIGKILL);
      // Reaped once it is gone (at once, unless stuck in the kernel: then left to init).
      for (int i = 0; i < 1000; ++i) {
        auto reaped = proc::TryReap(*pid);
        if (!reaped.ok() || reaped->has_value()) break;
        std::this_thread::sleep_for(1ms);
      }
      return finish(DeadlineExceeded(
          fmt::format("did not end within {} s", std::chrono::seconds(kCommandTimeout).count())));
    }
    std::this_thread::sleep_for(1ms);
  }
}

Result<std::unique_ptr<VirtualNetwork>> VirtualNetwork::Create(
    const std::vector<std::string>& machines) {
  if (machines.empty() || machines.size() > kMaxMachines) {
    return InvalidArgument(fmt::format("a virtual network has 1 to {} machines, not {}",
                                       kMaxMachines, machines.size()));
  }
  for (size_t i = 0; i < machines.size(); ++i) {
    const std::string& name = machines[i];
    if (!PlainName(name) || name == kSwitch) {
      return InvalidArgument(fmt::format(
          "machine name '{}': letters, digits, '-' and '_' only, and not '{}'", name, kSwitch));
    }
    if (std::find(machines.begin(), machines.begin() + i, name) != machines.begin() + i) {
      return InvalidArgument("machine name '" + name + "' is given twice");
    }
  }
  std::unique_ptr<VirtualNetwork> network(new VirtualNetwork);
  network->ip_ = FindIp();
  if (network->ip_.empty()) {
    return FailedPrecondition("network namespaces cannot be made here: no `ip` (iproute2)");
  }
  network->home_netns_fd_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (network->home_netns_fd_ < 0) {
    return FailedPrecondition("network namespaces cannot be made here: /proc/thread-self/ns/net: " +
                              ErrnoText());
  }
  // What instances killed before their destructor ran left behind.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(kNetnsDir, ec)) {
    const std::string netns = entry.path().filename().string();
    const pid_t owner = PidOf(netns);
    if (owner == 0 || owner == getpid() || proc::IsRunning(owner)) continue;
    KillProcessesIn(netns);
    Status removed = network->Ip({"netns", "delete", netns});
    if (!removed.ok()) spdlog::warn("virtual network: a stale namespace: {}", removed.ToString());
  }
  ATOLL_RETURN_IF_ERROR(network->Build(machines));
  return network;
}

Status VirtualNetwork::Build(const std::vector<std::string>& machines) {
  const std::string sw = NetnsName(getpid(), kSwitch);
  if (Status made = Ip({"netns", "add", sw}); !made.ok()) {
    return FailedPrecondition("network namespaces cannot be made here (they need CAP_NET_ADMIN): " +
                              made.ToString());
  }
  created_.push_back(sw);
  switch_netns_ = sw;
  ATOLL_RETURN_IF_ERROR(Ip({"-n", sw, "link", "add", "br0", "type", "bridge"}));
  ATOLL_RETURN_IF_ERROR(Ip({"-n", sw, "link", "set", "br0", "up"}));
  for (size_t i = 0; i < machines.size(); ++i) {
    Machine m{machines[i], NetnsName(getpid(), machines[i]), fmt::format("10.77.0.{}", i + 1),
              fmt::format("v{}", i)};
    ATOLL_RETURN_IF_ERROR(Ip({"netns", "add", m.netns}));
    created_.push_back(m.netns);
    ATOLL_RETURN_IF_ERROR(Ip({"-n", sw, "link", "add", m.port, "type", "veth", "peer", "name",
                              "eth0", "netns", m.netns}));
    ATOLL_RETURN_IF_ERROR(Ip({"-n", sw, "link", "set", m.port, "master", "br0", "up"}));
    ATOLL_RETURN_IF_ERROR(Ip({"-n", m.netns, "addr", "add", m.address + "/24", "dev", "eth0"}));
    ATOLL_RETURN_IF_ERROR(Ip({"-n", m.netns, "link", "set", "eth0", "up"}));
    ATOLL_RETURN_IF_ERROR(Ip({"-n", m.netns, "link", "set", "lo", "up"}));
    machines_.emplace(m.name, std::move(m));
  }
  return Status::Ok();
}

VirtualNetwork::~VirtualNetwork() {
  if (entered_) {
    Status left = Leave();
    if (!left.ok()) spdlog::warn("virtual network: {}", left.ToString());
  }
  // Machines first, then the switch: a process in any of them is ours.
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) KillProcessesIn(*it);
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
    Status deleted = Ip({"netns", "delete", *it});
    if (!deleted.ok()) spdlog::warn("virtual network: {}", deleted.ToString());
  }
  if (home_netns_fd_ >= 0) close(home_netns_fd_);
}

std::vector<std::string> VirtualNetwork::Inside(const std::string& name,
                                                const std::vector<std::string>& argv) const {
  std::vector<std::string> inside = {ip_, "netns", "exec", machine(name).netns};
  inside.insert(inside.end(), argv.begin(), argv.end());
  return inside;
}

Status VirtualNetwork::SetLink(const std::string& name, bool up) {
  return Ip({"-n", switch_netns_, "link", "set", machine(name).port, up ? "up" : "down"});
}

Status VirtualNetwork::Enter(const std::string& name) {
  const std::string path = std::string(kNetnsDir) + "/" + machine(name).netns;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Unavailable("open " + path + ": " + ErrnoText());
  const int entered = setns(fd, CLONE_NEWNET);
  const std::string why = ErrnoText();
  close(fd);
  if (entered != 0) return Unavailable("setns into " + path + ": " + why);
  entered_ = true;
  return Status::Ok();
}

Status VirtualNetwork::Leave() {
  if (setns(home_netns_fd_, CLONE_NEWNET) != 0) {
    return Unavailable("setns back to this thread's namespace: " + ErrnoText());
  }
  entered_ = false;
  return Status::Ok();
}

}  // namespace atl
