#include "services/executor/executor_events.h"

#include <fmt/format.h>

#include "common/net/event_topics.h"

namespace atl::executor {

void ReceivedTuples::AddBatch(uint64_t batch_tuples, uint64_t batch_bytes, int64_t now_us) {
  tuples += batch_tuples;
  batches++;
  bytes += batch_bytes;
  last_us = now_us;
}

ExecutorEvent DispatchHeld(const proto::Dispatch& dispatch, const std::string& host,
                           uint64_t behind) {
  return {topics::kDispatchHeld,
          {{"run", dispatch.entries.front().run_id},
           {"host", host},
           {"entries", uint64_t{dispatch.entries.size()}},
           {"behind", behind}}};
}

ExecutorEvent DispatchAdmitted(const proto::Dispatch& dispatch, const std::string& host) {
  return {topics::kDispatchAdmitted,
          {{"run", dispatch.entries.front().run_id},
           {"host", host},
           {"entries", uint64_t{dispatch.entries.size()}},
           {"first_gang", dispatch.entries.front().gang_seq},
           {"last_gang", dispatch.entries.back().gang_seq}}};
}

ExecutorEvent ShardFinished(const Completion& done, const std::string& host,
                            std::span<const uint32_t> device_ids) {
  const proto::Entry& e = done.item->entry;
  if (done.outputs.ok()) {
    return {topics::kGangDone,
            {{"run", e.run_id},
             {"node", uint64_t{e.node}},
             {"gang", e.gang_seq},
             {"shard", uint64_t{e.shard}},
             {"device", uint64_t{device_ids[e.device]}},
             {"host", host},
             {"client", e.owner_client},
             {"start_us", done.start_us},
             {"end_us", done.end_us}}};
  }
  // A cancelled run (or a client that left) is asked for, not a fault.
  const bool cancelled = done.outputs.status().code() == Code::kCancelled;
  return {cancelled ? topics::kGangCancelled : topics::kErrorGang,
          {{"run", e.run_id},
           {"node", uint64_t{e.node}},
           {"shard", uint64_t{e.shard}},
           {"host", host},
           {cancelled ? "why" : "error", done.outputs.status().ToString()}}};
}

ExecutorEvent InputLate(const InputKey& key, const std::string& host, uint32_t input_wait_ms) {
  return {topics::kErrorGang,
          {{"run", key.run},
           {"node", uint64_t{key.node}},
           {"shard", uint64_t{key.shard}},
           {"host", host},
           {"error", fmt::format("waited over {} ms for input {}", input_wait_ms, key.input)}}};
}

ExecutorEvent DeviceStats(uint32_t device_id, const std::string& host, const std::string& island,
                          uint64_t queued, uint64_t busy_us) {
  return {topics::kDeviceStats,
          {{"device", uint64_t{device_id}},
           {"host", host},
           {"island", island},
           {"queued", queued},
           {"busy_us", busy_us}}};
}

ExecutorEvent DataPlaneStats(const std::string& host, const TupleOutbox::Stats& sent,
                             const ReceivedTuples& received, uint64_t held) {
  return {topics::kDataplaneStats,
          {{"host", host},
           {"tuples_out", sent.tuples},
           {"batches_out", sent.batches},
           {"bytes_out", sent.bytes},
           {"tuples_in", received.tuples},
           {"batches_in", received.batches},
           {"bytes_in", received.bytes},
           {"last_in_us", received.last_us},
           {"batches_held", held}}};
}

}  // namespace atl::executor
