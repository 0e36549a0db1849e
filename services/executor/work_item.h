// WorkItem: one shard of one gang on one device, from the moment its Dispatch arrives
// until its outputs are sent. Its inputs are futures: they fill in as tuples arrive or
// arguments are read from the object store.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "atoll/tensor.h"
#include "common/ir/ir.h"
#include "common/proto/protocol.h"
#include "services/executor/collective_hub.h"

namespace atl::executor {

// Identifies one input of one shard: (run, node, input, shard).
struct InputKey {
  uint64_t run = 0;
  uint32_t node = 0;
  uint32_t input = 0;
  uint32_t shard = 0;
  auto operator<=>(const InputKey&) const = default;
};

struct WorkItem {
  proto::Entry entry;
  std::shared_ptr<const ir::FunctionDef> function;  // null when the function is unknown
  std::shared_ptr<const GangLayout> layout;         // where the gang's shards run
  std::string scheduler;  // routing id of the scheduler that sent it: it hears when done

  // Guarded by the mutex of the device stream the item is queued on.
  std::vector<std::optional<Tensor>> inputs;
  size_t inputs_missing = 0;
  // Outputs whose device memory the object store has not granted yet: the shard does not
  // run before its outputs have room (backpressure), so the stream waits here, in order.
  // Small outputs are not counted: they are put whole once the shard ran (StoreLink).
  size_t reservations_missing = 0;
  Status failure;  // not OK: run nothing, pass the error on to every consumer
  // Set to stop the item while it runs (its run was cancelled); read by the device thread.
  std::atomic<bool> cancelled{false};

  bool Runnable() const {
    return !failure.ok() || (inputs_missing == 0 && reservations_missing == 0);
  }
};

// Where the inputs, output grants and failures of queued work items go: the device stream
// each item is queued on (DeviceStreams), or a fake in tests. Implementations are
// thread-safe: the loop and device threads call them.
class ItemSink {
 public:
  virtual ~ItemSink() = default;
  // Fills input `input` of `item`; a filled input is not replaced.
  virtual void Deliver(const std::shared_ptr<WorkItem>& item, uint32_t input, Tensor value) = 0;
  // Counts one of `item`'s output reservations as granted.
  virtual void Reserved(const std::shared_ptr<WorkItem>& item) = 0;
  // Marks `item` failed (the first failure wins); it completes with it instead of running.
  virtual void Fail(const std::shared_ptr<WorkItem>& item, Status status) = 0;
};

// What a device stream hands back to the executor's loop once an item ran (or failed).
struct Completion {
  std::shared_ptr<WorkItem> item;
  Result<std::vector<Tensor>> outputs = Status(Code::kInternal, "not run");
  int64_t start_us = 0;
  int64_t end_us = 0;
  bool local_tuples_delivered = false;  // consumers on this host already have the outputs
};

}  // namespace atl::executor
