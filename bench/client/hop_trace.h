// HopTrace: where the microseconds of a computation go, from the timestamps the services
// put on their events (all taken from one machine's wall clock, so the processes agree).
//
// A synchronous round trip (one call, its result read) crosses these hops, each measured
// from the end of the one before:
//   client_submit        the client lowers the call and sends the submission
//   to_scheduler         ZeroMQ to the scheduler, which orders the program, sends the dispatch,
//                        then answers the client (program.scheduled)
//   to_executor          the dispatch on its way to the executor, which admits the shard:
//                        large outputs reserved, inputs resolved, queued (dispatch.admitted)
//   to_device_thread     the device thread wakes and takes the shard (gang.done start_us)
//   compute              the function runs (gang.done end_us)
//   to_executor_loop     the completion wakes the executor's loop, which reports it (gang.done)
//   to_store             the loop sends the output to the store, whole (a small one), or
//                        writes it into its reserved space and seals it; the store seals
//                        it (object.sealed)
//   to_client            the store answers the waiting read; the client decodes the result
// A chained computation (the next call of one program on the same device, dispatched ahead)
// crosses two on its critical path: compute, and to_next_start (the device thread hands the
// output to the next shard, queued on its own stream, and starts it). Off that path, the
// executor's loop reports the shard (report: from its end to gang.done).
//
// A whole chained run (what bench/dispatch's chained rate divides its calls by) crosses:
//   client_submit        the client lowers the program and sends the submission
//   to_scheduler         ZeroMQ to the scheduler, which orders every gang (program.scheduled)
//   to_first_start       the dispatch to the executor, which admits the first shards and
//                        starts one (admitting the rest overlaps the chain)
//   chain                from the first shard's start to the last one's end
//   last_report          the loop reports the last shard (its gang.done)
//   to_store             its output put into the store and sealed (object.sealed)
//   to_client            the store answers the waiting read; the client decodes the result
//
// A stream of one-call programs on one device, each on the previous one's future (what
// bench/dispatch's op-by-op rate divides its calls by), crosses per call, on its critical
// path, compute and to_next_start (from the previous call's end to this one's start: its
// input handed over, the shard started). Beside them, how far ahead of that the call
// was: client_ahead (its submission sent, before the previous call ended) and
// admitted_ahead (its dispatch admitted by the executor, before the previous call ended).
// Negative leads are late: the call waited for them.
//
// Not thread-safe: one thread records and reads.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "atoll/status.h"
#include "common/net/event_reader.h"

namespace atl::bench {

// The hops of a synchronous round trip, of a chained computation and of a chained run, in
// order.
const std::vector<std::string>& RoundTripHops();
const std::vector<std::string>& ChainHops();
const std::vector<std::string>& ChainRunHops();
const std::vector<std::string>& OpByOpHops();

// Microseconds per hop, by hop name.
using Hops = std::map<std::string, double>;

class HopTrace {
 public:
  HopTrace(zmq::context_t& context, std::string events_out);

  // Subscribes, and waits until the subscription is live: `ping` is called (it should make
  // the cluster publish a gang.done) until an event arrives.
  Status Start(const std::function<Status()>& ping);

  // Takes the events published so far (waiting up to `settle` for late ones).
  Status Collect(std::chrono::milliseconds settle);

  // The hops of run `run`, a synchronous round trip whose submission started at `submit_us`,
  // was sent at `sent_us` and whose result was in hand at `done_us` (NowMicros()).
  // NotFound when an event of the run is missing.
  Result<Hops> RoundTrip(uint64_t run, int64_t submit_us, int64_t sent_us, int64_t done_us) const;

  // The median hops per computation of run `run`, a chain of calls on one device.
  Result<Hops> Chain(uint64_t run) const;
  // The hops of that whole run, timed by the client as RoundTrip's.
  Result<Hops> ChainRun(uint64_t run, int64_t submit_us, int64_t sent_us, int64_t done_us) const;

  // The median hops per call of `runs`, one-call programs on one device, each on the one
  // before's output; `sent_us` is when each submission was sent (NowMicros()).
  Result<Hops> OpByOp(const std::vector<uint64_t>& runs, const std::vector<int64_t>& sent_us) const;

  // Forgets the events taken so far.
  void Clear() { events_.clear(); }

 private:
  // The events of run `run` with `topic`, in the order they came.
  std::vector<const Event*> Of(uint64_t run, const std::string& topic) const;
  // The one object sealed from `from_us` to `to_us`: the run's result, read by a client
  // that waits for nothing else.
  Result<const Event*> SealedBetween(uint64_t run, int64_t from_us, int64_t to_us) const;
  // Its gang.done events, in gang order.
  std::vector<const Event*> Gangs(uint64_t run) const;

  zmq::socket_t socket_;
  std::string endpoint_;
  std::vector<Event> events_;
};

}  // namespace atl::bench
