// bench/client's clients_connected series: how many new clients per second a cluster takes
// in, each connecting, creating a one-device slice, registering a function and running it
// once, `clients` at once from as many threads, on a CURVE cluster and on a plain-text one
// of the same topology, measured in turn in the same run (issue 48: CURVE at >= half the
// plain rate). Derived: clients_connected_curve_over_plain_clients_<K>.
#pragma once

#include <string>
#include <vector>

#include "atoll/status.h"
#include "bench/common/bench_result.h"

namespace atl::bench {

struct ConnectSweep {
  std::vector<int> clients;  // clients per sample
  int runs = 0;              // samples per (clients, security)
};

// Starts both clusters under `dir`, measures, stops them.
Status MeasureConnectRate(const ConnectSweep& sweep, const std::string& dir, BenchResult& result);

}  // namespace atl::bench
