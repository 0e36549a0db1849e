// Client::Submit: plan, then send. The plan lowers the program onto the slices' devices and
// works out what the run holds (its results, the objects it owns, the earlier runs it
// reads) and which services it needs, sending nothing; then, once the services it needs
// are up, the arguments are put into the stores and the submissions streamed to the
// island schedulers.
#include <map>
#include <set>

#include <fmt/format.h>

#include "atoll/client.h"
#include "client/client_impl.h"
#include "client/internal.h"
#include "client/lowering.h"
#include "client/peers.h"
#include "client/run_state.h"
#include "client/store_calls.h"
#include "common/net/tensor_frames.h"
#include "common/net/transport.h"

namespace atl {

namespace {

// An argument as the plan reads it: a value, or result `index` of an earlier run.
struct PlanInput {
  const Tensor* value = nullptr;
  std::shared_ptr<RunState> run;
  size_t index = 0;
};

// A run planned: nothing sent yet.
struct SubmitPlan {
  std::shared_ptr<RunState> run;
  LoweredRun lowered;                         // its puts and submissions are what is sent
  std::vector<ReadsLedger::KeepAlive> reads;  // the earlier runs it reads
  // What must be up for it to be accepted: its own schedulers, stores and hosts. Those of
  // its inputs' producers it needs too (run->needs), but their loss fails it later instead.
  ServicesNeeded own_needs;
};

// The shards of `results` worth reading ahead: those of the results the run makes (not its
// arguments, nor earlier runs' futures) of at most ReadAhead::kMaxResultBytes.
std::vector<ReadAhead::Shard> ReadAheadShards(const std::vector<ResultPlan>& results) {
  std::vector<ReadAhead::Shard> shards;
  for (const ResultPlan& r : results) {
    if (r.arg_index >= 0 || r.borrowed_arg >= 0) continue;
    const auto bytes = static_cast<uint64_t>(NumElements(r.type.shape)) * DTypeSize(r.type.dtype);
    if (bytes > ReadAhead::kMaxResultBytes) continue;
    for (const ResultShard& s : r.shards) shards.push_back({s.store, s.object_id, s.shard, bytes});
  }
  return shards;
}

// OK when argument `i` is a value or a future of a run that may still be read.
Status CheckInput(const PlanInput& input, size_t i) {
  if (input.value != nullptr) return Status::Ok();
  if (!input.run || input.index >= input.run->results.size()) {
    return InvalidArgument(fmt::format("argument {} is an empty Future", i));
  }
  if (input.run->cancelled) {
    return Cancelled(
        fmt::format("argument {} is a future of run {}, which was cancelled", i, input.run->id));
  }
  return Status::Ok();
}

Result<SubmitPlan> PlanSubmit(Client::Impl& client, const Program::Impl& program,
                              const std::vector<PlanInput>& args, const SubmitOptions& options) {
  SubmitPlan plan;
  plan.run = std::make_shared<RunState>();
  RunState& run = *plan.run;
  run.client = &client;
  run.id = client.NextRunId();
  std::vector<LoweringArg> lowering_args;
  for (size_t i = 0; i < args.size(); ++i) {
    ATOLL_RETURN_IF_ERROR(CheckInput(args[i], i));
    if (args[i].value != nullptr) {
      lowering_args.push_back({args[i].value, nullptr});
      continue;
    }
    lowering_args.push_back({nullptr, &args[i].run->results[args[i].index]});
    plan.reads.push_back(args[i].run);
  }
  ATOLL_ASSIGN_OR_RETURN(
      plan.lowered, Lower(program, lowering_args, client.id, run.id, options, client.options.weight,
                          [&client] { return client.NextObjectId(); }));
  LoweredRun& lowered = plan.lowered;
  AddPeers(lowered.per_scheduler);
  // Results that are argument values are answered from the client's own copy, kept for
  // those arguments only.
  run.arg_values.resize(args.size());
  for (const auto& r : lowered.results) {
    if (r.arg_index >= 0 && args[r.arg_index].value != nullptr) {
      run.arg_values[r.arg_index] = *args[r.arg_index].value;
    }
  }
  run.objects = OwnedObjects(lowered);
  for (const auto& r : lowered.results) {
    if (r.borrowed_arg >= 0) {
      run.borrowed.push_back(args[r.borrowed_arg].run);
    }
  }
  run.results = std::move(lowered.results);
  for (const auto& [endpoint, submit] : lowered.per_scheduler) run.schedulers.insert(endpoint);
  plan.own_needs.schedulers = run.schedulers;
  for (const auto& owned : run.objects) plan.own_needs.stores.insert(owned.store);
  for (const auto& call : program.calls) {
    for (const auto& device : call.fn->slice.devices) plan.own_needs.hosts.insert(device.host);
  }
  // What its inputs' producers need, it needs too, until they are done.
  run.needs = plan.own_needs;
  for (const PlanInput& input : args) {
    if (input.value != nullptr) continue;
    run.needs.Add(input.run->needs);
    for (const auto& shard : input.run->results[input.index].shards) {
      run.needs.stores.insert(shard.store);
    }
  }
  return plan;
}

// Puts the arguments, then streams the submissions: the scheduler's answer is read later
// (DrainAcks), so back-to-back calls cost no round trip each. At most
// Submissions::kMaxUnanswered go unanswered: the scheduler's answers queue in its ROUTER,
// which would lose those past its high-water mark.
Status SendSubmit(Client::Impl& client, SubmitPlan& plan) {
  RunState& run = *plan.run;
  client.read_ahead.Add(run.id, ReadAheadShards(run.results));
  run.losses_seen = client.losses.seen();  // a loss from now on fails it (LossFor)
  const auto timeout = client.options.request_timeout;
  // Every put goes out before any answer is awaited: ten arguments cost one round trip to
  // their store, not ten.
  std::map<net::Requester*, std::set<uint64_t>> puts;
  for (auto& put : plan.lowered.puts) {
    ATOLL_ASSIGN_OR_RETURN(net::Requester * store, client.Watcher(put.store));
    const proto::PutObject request{put.object_id, put.shard, client.id, put.value.dtype(),
                                   put.value.shape()};
    net::Frames data;
    data.push_back(net::BorrowedFrame(std::move(put.value)));
    ATOLL_ASSIGN_OR_RETURN(const uint64_t id, store->Send(request, std::move(data)));
    puts[store].insert(id);
  }
  const Deadline deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& [store, ids] : puts) {
    ATOLL_RETURN_IF_ERROR(AwaitOks(*store, std::move(ids), deadline).WithContext("put argument"));
  }
  constexpr size_t kMax = Submissions::kMaxUnanswered;
  for (const auto& [endpoint, submit] : plan.lowered.per_scheduler) {
    if (client.submissions.Unanswered(endpoint) >= kMax) {
      client.DrainAcks(timeout, kMax - 1);
      if (client.submissions.Unanswered(endpoint) >= kMax) {
        return DeadlineExceeded(
            fmt::format("island scheduler {} answered none of the last {} submissions within {} ms",
                        endpoint, kMax, timeout.count()));
      }
    }
    ATOLL_ASSIGN_OR_RETURN(net::Requester * scheduler, client.Watcher(endpoint));
    ATOLL_ASSIGN_OR_RETURN(uint64_t request, scheduler->Send(submit));
    client.submissions.Sent(endpoint, request, run.id);
  }
  client.reads.Hold(run.id, run.schedulers, std::move(plan.reads));
  for (const auto& r : run.results) {
    for (const auto& s : r.shards) (void)client.Watcher(s.store);
  }
  client.DrainAcks(std::chrono::milliseconds(0));
  return Status::Ok();
}

}  // namespace

Result<Run> Client::Submit(const Program& program, const std::vector<Input>& args,
                           const SubmitOptions& options) {
  if (!program.impl_) return InvalidArgument("submit of an empty Program");
  impl_->ApplyNotices();
  std::vector<PlanInput> inputs;  // a Future's run is the Client's to read
  for (const Input& a : args) {
    const Future* f = a.future();
    inputs.push_back(f ? PlanInput{nullptr, f->run_, f->index_} : PlanInput{a.value(), {}, 0});
  }
  ATOLL_ASSIGN_OR_RETURN(SubmitPlan plan, PlanSubmit(*impl_, *program.impl_, inputs, options));
  ATOLL_RETURN_IF_ERROR(impl_->AwaitUp(plan.run->id, plan.own_needs));
  ATOLL_RETURN_IF_ERROR(SendSubmit(*impl_, plan));
  return Run(std::move(plan.run));
}

}  // namespace atl
