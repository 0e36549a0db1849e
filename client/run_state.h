// RunState: what a submitted run leaves with the client: where its results will be, the
// objects it must release, and the earlier runs whose results it reads (kept alive until
// it is gone). Shared by the Run handle and the Futures of its results.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "atoll/client.h"
#include "client/lowering.h"

namespace atl {

struct RunState {
  Client::Impl* client = nullptr;
  uint64_t id = 0;
  std::vector<ResultPlan> results;
  std::vector<Tensor> arg_values;  // argument values, for results that are arguments
  std::vector<std::pair<std::string, uint64_t>> objects;  // (store, object) this run owns
  std::vector<std::shared_ptr<RunState>> reads;           // runs whose futures it consumes
  // The services the run needs, its inputs' producers' included: the loss of any of them
  // (declared by the RM after the run was submitted) fails the run, naming the service.
  std::set<std::string> schedulers;  // endpoints
  std::set<std::string> stores;      // endpoints
  std::set<std::string> hosts;       // names: their executors run its shards
  size_t losses_seen = 0;            // Client::Impl::losses known when it was submitted

  ~RunState();  // releases `objects` in their stores
};

}  // namespace atl
