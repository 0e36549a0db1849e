// The process limits that many simulated hosts in one process run into: open files (each
// host holds a few dozen sockets, connections and timers) and threads (each host runs a
// loop per service and a thread per device).
#pragma once

#include <cstdint>

#include "atoll/status.h"

namespace atl::simhosts {

// Raises the soft RLIMIT_NOFILE to the hard limit. FailedPrecondition, naming both
// numbers, when `needed` open files exceed even the hard limit.
Status RaiseOpenFileLimit(uint64_t needed);

// FailedPrecondition, naming both numbers, when `threads` more threads would exceed the
// soft RLIMIT_NPROC (which counts every thread of the user's processes).
Status CheckThreadLimit(uint64_t threads);

}  // namespace atl::simhosts
