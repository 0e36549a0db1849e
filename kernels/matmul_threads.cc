#include "kernels/matmul_threads.h"

#include <cblas.h>
#include <sched.h>

#include <algorithm>
#include <memory>
#include <thread>

#include "kernels/thread_team.h"

namespace atl::kernels {

namespace {

thread_local int matmul_threads = 0;
thread_local std::unique_ptr<internal::ThreadTeam> team;

}  // namespace

int AvailableCores() {
  cpu_set_t set;
  // Fails only on a machine of more CPUs than a cpu_set_t holds (1024).
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }
  return std::max(1, CPU_COUNT(&set));
}

int CoresPerDevice(int cores, int devices) { return std::max(1, cores / std::max(1, devices)); }

void SetBlasThreads(int threads) { openblas_set_num_threads(std::max(1, threads)); }

int BlasThreads() { return openblas_get_num_threads(); }

void SetMatmulThreads(int threads) { matmul_threads = std::max(0, threads); }

int MatmulThreads() { return matmul_threads; }

namespace internal {

ThreadTeam& MatmulTeam() {
  const int helpers = std::max(0, matmul_threads - 1);
  if (!team || team->helpers() != helpers) team = std::make_unique<ThreadTeam>(helpers);
  return *team;
}

}  // namespace internal
}  // namespace atl::kernels
