// How the matmuls of several threads (an executor's devices) share a host's cores.
//
// OpenBLAS 0.3.21, Debian 12's pthread build, has one thread count for the whole process
// (openblas_set_num_threads; a per-thread count came in 0.3.27), and runs one multithreaded
// level-3 call at a time: a concurrent one waits on a lock, so a device's share of the cores
// cannot be set there. That lock is moreover one per transpose variant, so threaded calls of
// different variants (x w on one device, x^T dy on another) may overlap on shared worker
// state (OpenBLAS issue 5836, fixed after 0.3.21). Single-threaded calls take no lock and
// run side by side. So a process that multiplies on several threads at once sets OpenBLAS
// to one thread (SetBlasThreads(1)) and gives each calling thread its share
// (SetMatmulThreads): kernels::Matmul cuts a large product into that many blocks of rows
// (or columns) and runs them on the thread's own helper threads, each block one
// single-threaded cblas_sgemm.
#pragma once

namespace atl::kernels {

// The cores this process may run on (its CPU affinity), at least 1.
int AvailableCores();

// One device's even share of `cores` among `devices`: max(1, cores / devices).
int CoresPerDevice(int cores, int devices);

// OpenBLAS's threads per call, for the whole process (OpenBLAS caps it at its build's
// maximum). Its default is every core, or $OPENBLAS_NUM_THREADS. Call it while no thread is
// in a matmul.
void SetBlasThreads(int threads);
int BlasThreads();

// The threads the calling thread's matmuls use: itself and up to `threads` - 1 helpers of
// its own, started at its first matmul that is large enough and stopped when the thread
// exits. 0, every thread's default: no blocks, OpenBLAS threads the call (BlasThreads()).
// A negative count is taken as 0.
void SetMatmulThreads(int threads);
int MatmulThreads();

namespace internal {

class ThreadTeam;

// The calling thread's team for its matmuls, of MatmulThreads() - 1 helpers (made or
// resized here). For kernels/matmul.cc.
ThreadTeam& MatmulTeam();

}  // namespace internal
}  // namespace atl::kernels
