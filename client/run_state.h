// RunState: what a submitted run leaves with the client: where its results will be, the
// objects it must release, the schedulers it was sent to, and the earlier runs whose
// results it returns as its own (kept alive as long as it is). The earlier runs it only
// reads are kept by the client's ReadsLedger until its gangs are done. Shared by the Run
// handle and the Futures of its results.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "atoll/client.h"
#include "client/lowering.h"
#include "client/service_losses.h"

namespace atl {

struct RunState {
  Client::Impl* client = nullptr;
  uint64_t id = 0;
  std::vector<ResultPlan> results;
  std::vector<Tensor> arg_values;                   // for results that are arguments
  std::vector<OwnedObject> objects;                 // released once, then emptied
  std::vector<std::shared_ptr<RunState>> borrowed;  // runs whose futures it returns as is
  std::set<std::string> schedulers;                 // where its gangs are: cancels go there
  bool cancelled = false;
  // The services the run needs, its inputs' producers' included: the loss of any of them
  // (declared by the RM after the run was submitted) fails the run, naming the service.
  ServicesNeeded needs;
  size_t losses_seen = 0;  // ServiceLosses::seen() when it was submitted

  // Releases `objects` in their stores (posted, no round trip); a second call does nothing.
  void ReleaseObjects();
  ~RunState();  // releases `objects` if Cancel did not
};

// Waits (at most `timeout`) until every shard of results `which` of `run` is sealed, without
// reading their bytes: Run::Wait's watch for refusals and losses, for a caller that has the
// stores use the shards themselves (Client::Save). The error of a failed shard, naming it.
Status AwaitSealed(const RunState& run, const std::vector<size_t>& which,
                   std::chrono::milliseconds timeout);

}  // namespace atl
