#include "services/simhosts/process_limits.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace atl::simhosts {

Status RaiseOpenFileLimit(uint64_t needed) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return Unavailable(std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno));
  }
  if (limit.rlim_max != RLIM_INFINITY && needed > limit.rlim_max) {
    return FailedPrecondition(fmt::format(
        "these simulated hosts need about {} open files and the hard limit is {} (raise it "
        "with `ulimit -Hn`, or run fewer hosts per process: cluster.sim_hosts_per_process)",
        needed, limit.rlim_max));
  }
  if (limit.rlim_cur == limit.rlim_max) return Status::Ok();
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return Unavailable(std::string("setrlimit(RLIMIT_NOFILE): ") + std::strerror(errno));
  }
  return Status::Ok();
}

Status CheckThreadLimit(uint64_t threads) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NPROC, &limit) != 0) {
    return Unavailable(std::string("getrlimit(RLIMIT_NPROC): ") + std::strerror(errno));
  }
  if (limit.rlim_cur != RLIM_INFINITY && threads > limit.rlim_cur) {
    return FailedPrecondition(fmt::format(
        "these simulated hosts need {} threads and the user may run {} (`ulimit -u`); run "
        "fewer hosts or devices per process (cluster.sim_hosts_per_process)",
        threads, limit.rlim_cur));
  }
  return Status::Ok();
}

}  // namespace atl::simhosts
