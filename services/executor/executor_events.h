// What the executor tells the event stream, one function per topic: each builds the topic
// and its fields from the executor's state, and the shell (ExecutorService) publishes it.
// Kept apart so that what an event carries is read, and tested, in one place:
//   dispatch.held      a dispatch waits for a function still to be compiled here
//   dispatch.admitted  the host-side work for a dispatch's entries is done
//   gang.done          a shard finished; gang.cancelled when its run was cancelled, and
//   error.gang         when it failed (or waited too long for an input)
//   device.stats       per device, each heartbeat: queued shards, cumulative busy time
//   dataplane.stats    each heartbeat: tuples, batches and bytes sent and received
//
// Pure: no socket, no clock. Runs on the executor's loop.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/net/event_fields.h"
#include "common/proto/protocol.h"
#include "services/executor/tuple_outbox.h"
#include "services/executor/work_item.h"

namespace atl::executor {

struct ExecutorEvent {
  std::string_view topic;
  EventFields fields;
};

// What the data plane received since start.
struct ReceivedTuples {
  uint64_t tuples = 0;
  uint64_t batches = 0;
  uint64_t bytes = 0;
  int64_t last_us = 0;  // wall clock of the latest batch

  void AddBatch(uint64_t batch_tuples, uint64_t batch_bytes, int64_t now_us);
};

// `behind`: dispatches held before it.
ExecutorEvent DispatchHeld(const proto::Dispatch& dispatch, const std::string& host,
                           uint64_t behind);
// Built before the entries are admitted (admission takes them out of `dispatch`).
ExecutorEvent DispatchAdmitted(const proto::Dispatch& dispatch, const std::string& host);
// A shard finished: gang.done, gang.cancelled (Cancelled: asked for, not a fault) or
// error.gang. `device_ids`: the cluster-wide id of each local device.
ExecutorEvent ShardFinished(const Completion& done, const std::string& host,
                            std::span<const uint32_t> device_ids);
// A shard failed because input `key.input` did not come within `input_wait_ms`.
ExecutorEvent InputLate(const InputKey& key, const std::string& host, uint32_t input_wait_ms);
ExecutorEvent DeviceStats(uint32_t device_id, const std::string& host, const std::string& island,
                          uint64_t queued, uint64_t busy_us);
// `held`: batches the outbox holds for peers not ready yet.
ExecutorEvent DataPlaneStats(const std::string& host, const TupleOutbox::Stats& sent,
                             const ReceivedTuples& received, uint64_t held);

}  // namespace atl::executor
