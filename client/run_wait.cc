// Run::Wait: reading a run's results back. Every shard's read goes out at once, before the
// schedulers have answered the submission: each read waits in its object store until the
// shard is sealed, so a synchronous round trip costs the run itself and one reply per
// shard, not a round trip per step; the later runs' small results are read ahead in the same
// wait (read_ahead.h), so reading a batch of runs one after another costs no round trip each.
// Meanwhile the wait watches for what ends it early: a scheduler's refusal of the
// submission, and the RM's notice that a service the run needs is lost.
#include <algorithm>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "client/client_impl.h"
#include "client/sharding.h"
#include "client/store_calls.h"
#include "common/net/socket_waiter.h"
#include "common/net/tensor_frames.h"

namespace atl {

namespace {

using Clock = std::chrono::steady_clock;

Status LossError(const Loss& loss) { return Unavailable(loss.reason); }

// One result shard being read, or only waited for until it is sealed (`data` false: its
// bytes stay in the store, and `got` is an empty tensor).
struct ShardRead {
  size_t result = 0;
  const ResultShard* where = nullptr;
  net::Requester* store = nullptr;
  bool data = true;
  uint64_t request = 0;  // 0: not sent
  bool ahead = false;    // read ahead (read_ahead.h): its reply comes there
  std::optional<Result<Tensor>> got;
};

// The shard in a store's reply; its data frame becomes the tensor's bytes, uncopied.
Result<Tensor> ShardFromReply(proto::Incoming& in, bool data) {
  if (in.header.kind() == proto::Kind::kError) {
    ATOLL_ASSIGN_OR_RETURN(proto::Error error, in.header.As<proto::Error>());
    return proto::FromError(error);
  }
  ATOLL_ASSIGN_OR_RETURN(auto reply, in.header.As<proto::GetObjectReply>());
  if (!data) return Tensor();
  if (in.data.size() != 1) return Internal("the reply carries no data frame");
  return net::AdoptFrame(reply.dtype, std::move(reply.shape), in.data[0]);
}

// Every shard of results `which` (those that are not the run's own arguments), with its
// store connected.
Result<std::vector<ShardRead>> PlanReads(const RunState& run, const std::vector<size_t>& which,
                                         bool data) {
  std::vector<ShardRead> reads;
  for (size_t r : which) {
    for (const auto& s : run.results[r].shards) {
      ATOLL_ASSIGN_OR_RETURN(net::Requester * store, run.client->Watcher(s.store));
      reads.push_back({r, &s, store, data, 0, false, std::nullopt});
    }
  }
  return reads;
}

// Takes the replies waiting on `store`'s socket; each answers at most one read (a late reply
// to a read abandoned earlier answers none).
Status TakeReplies(net::Requester& store, std::vector<ShardRead>& reads) {
  while (true) {
    ATOLL_ASSIGN_OR_RETURN(auto frames,
                           net::RecvFrames(store.socket(), std::chrono::milliseconds(0)));
    if (!frames) return Status::Ok();
    auto in = proto::ParseIncoming(std::move(*frames), /*routed=*/false);
    if (!in.ok()) continue;
    for (ShardRead& read : reads) {
      if (read.store == &store && read.request == in->header.request_id() && !read.got) {
        read.got = ShardFromReply(*in, read.data);
        break;
      }
    }
  }
}

// Sends `read`, to wait up to `wait_ms` in its store.
Status SendRead(ShardRead& read, uint32_t wait_ms) {
  auto request = read.store->Send(
      proto::GetObject{read.where->object_id, read.where->shard, wait_ms, read.data});
  if (!request.ok()) return request.status().WithContext("read a result");
  read.request = *request;
  read.ahead = false;
  return Status::Ok();
}

// Takes `read`'s reply from the reads ahead, or marks it as coming there; false when it
// must be sent (none was read ahead, or the one read ahead outlived its wait in the store).
bool FromReadAhead(ReadAhead& ahead, ShardRead& read) {
  ReadAhead::Lookup found = ahead.Take(read.where->object_id, read.where->shard);
  read.ahead = found.state == ReadAhead::Lookup::kOpen;
  if (found.state == ReadAhead::Lookup::kAnswered)
    read.got = ShardFromReply(*found.reply, read.data);
  return found.state != ReadAhead::Lookup::kNone;
}

// A service the run needs is lost: a shard sealed already still counts, one that is not
// fails naming the lost service (it will never be sealed, or its store is gone).
void ReadAfterLoss(const RunState& run, const Loss& loss, std::vector<ShardRead>& reads) {
  for (ShardRead& read : reads) {
    if (read.got) continue;
    if (loss.role == proto::Heartbeat::kStore && loss.endpoint == read.where->store) {
      read.got = LossError(loss);
      continue;
    }
    auto request =
        read.store->Send(proto::GetObject{read.where->object_id, read.where->shard, 0, read.data});
    if (!request.ok()) {
      read.got = request.status();
      continue;
    }
    read.request = *request;
    auto in = AwaitReply(*read.store, *request, Clock::now() + run.client->options.request_timeout);
    read.got = in.ok() && in->header.kind() != proto::Kind::kError
                   ? ShardFromReply(*in, read.data)
                   : Result<Tensor>(LossError(loss));
  }
}

// The sockets whose messages a waiting read acts on: the stores of reads still open, the
// schedulers that have not answered the submission, and the RM's (its notices).
std::vector<zmq::pollitem_t> Watched(const RunState& run, const std::vector<ShardRead>& reads) {
  Client::Impl& client = *run.client;
  std::vector<zmq::pollitem_t> items;
  std::set<net::Requester*> stores;
  for (const ShardRead& read : reads) {
    if (!read.got && !read.ahead && stores.insert(read.store).second) {
      items.push_back({read.store->socket().handle(), 0, ZMQ_POLLIN, 0});
    }
  }
  client.read_ahead.AddPollItems(items);
  for (const auto& endpoint : run.schedulers) {
    if (auto it = client.peers.find(endpoint); it != client.peers.end()) {
      items.push_back({it->second->socket().handle(), 0, ZMQ_POLLIN, 0});
    }
  }
  items.push_back({client.rm->socket().handle(), 0, ZMQ_POLLIN, 0});
  return items;
}

// Why the run's missing answers may never come: a scheduler that has not answered the
// submission, or a store that has not answered a read, refused this client's key or, once
// `patience` is over, has no connection up.
Status CheckPeers(const RunState& run, const std::vector<ShardRead>& reads, bool patience_over) {
  Client::Impl& client = *run.client;
  auto check = [&](net::Requester& peer) -> Status {
    Status reachable = peer.Reachable();
    if (reachable.ok() || (reachable.code() == Code::kUnavailable && !patience_over)) {
      return Status::Ok();
    }
    return reachable.WithContext(fmt::format("run {}", run.id));
  };
  if (!client.submissions.Answered(run.id)) {
    for (const auto& endpoint : run.schedulers) {
      if (auto it = client.peers.find(endpoint); it != client.peers.end()) {
        ATOLL_RETURN_IF_ERROR(check(*it->second));
      }
    }
  }
  for (const ShardRead& read : reads) {
    if (!read.got) ATOLL_RETURN_IF_ERROR(check(*read.store));
  }
  return Status::Ok();
}

// Sends every read (or takes its reply from those read ahead) and waits until each has its
// answer and the schedulers accepted the run; with `read_ahead`, later runs' small results
// are read ahead meanwhile. Ends early with a scheduler's refusal, when a service the run needs is
// lost, or when a peer that owes an answer refused this client or (after a request timeout) is not
// connected.
Status AwaitReads(const RunState& run, std::vector<ShardRead>& reads, Deadline deadline,
                  std::chrono::milliseconds timeout, bool read_ahead) {
  Client::Impl& client = *run.client;
  net::SocketWaiter waiter;  // each turn below drains what it polls: it sleeps at once
  // A loss known already: no waiting reads, only the look at what is sealed.
  client.ApplyNotices();
  if (const auto* loss = client.LossFor(run)) {
    ReadAfterLoss(run, *loss, reads);
    return Status::Ok();
  }
  const auto wait_ms = static_cast<uint32_t>(TimeLeft(deadline).count());
  for (ShardRead& read : reads) {
    if (read.data && FromReadAhead(client.read_ahead, read)) continue;
    ATOLL_RETURN_IF_ERROR(SendRead(read, wait_ms));
  }
  if (read_ahead) client.read_ahead.ReadAfter(run.id, wait_ms);
  // The stores answer a read that waited too long themselves; this bound is for a store
  // that never answers.
  const Deadline give_up = deadline + client.options.request_timeout;
  const Deadline patience = Clock::now() + client.options.request_timeout;
  while (true) {
    client.DrainAcks(std::chrono::milliseconds(0));
    const bool answered = std::all_of(reads.begin(), reads.end(), [](auto& r) { return r.got; });
    // A refused or failed run ends the wait, unless what it waited for came already (a
    // result sealed before another shard of the run failed).
    if (const Status* failed = client.submissions.Failure(run.id); failed && !answered) {
      return *failed;
    }
    client.ApplyNotices();
    if (const auto* loss = client.LossFor(run)) {
      ReadAfterLoss(run, *loss, reads);
      return Status::Ok();
    }
    if (answered && client.submissions.Answered(run.id)) return Status::Ok();
    ATOLL_RETURN_IF_ERROR(CheckPeers(run, reads, Clock::now() >= patience));
    if (Clock::now() >= (answered ? deadline : give_up)) break;
    auto items = Watched(run, reads);
    const auto period =
        std::min(TimeLeft(answered ? deadline : give_up), client.losses.notice_period);
    ATOLL_RETURN_IF_ERROR(waiter.Poll(items, period));
    client.read_ahead.Collect();
    for (ShardRead& read : reads) {
      if (read.got) continue;
      if (!read.ahead) {
        ATOLL_RETURN_IF_ERROR(TakeReplies(*read.store, reads));
      } else if (!FromReadAhead(client.read_ahead, read)) {
        ATOLL_RETURN_IF_ERROR(SendRead(read, static_cast<uint32_t>(TimeLeft(deadline).count())));
      }
    }
  }
  if (!client.submissions.Answered(run.id)) {
    return DeadlineExceeded(fmt::format("run {}: no scheduler answered its submission within {} ms",
                                        run.id, timeout.count()));
  }
  for (ShardRead& read : reads) {
    if (!read.got) {
      read.got = DeadlineExceeded(
          fmt::format("no reply from the object store at {}", read.store->endpoint()));
    }
  }
  return Status::Ok();
}

// Sends and awaits the reads of every shard of results `which` of `run`.
Result<std::vector<ShardRead>> ReadShards(const RunState& run, const std::vector<size_t>& which,
                                          std::chrono::milliseconds timeout, bool data) {
  if (run.cancelled) return Cancelled(fmt::format("run {} was cancelled", run.id));
  const Deadline deadline = Clock::now() + timeout;
  ATOLL_ASSIGN_OR_RETURN(std::vector<ShardRead> reads, PlanReads(run, which, data));
  // A caller reading data reads later runs' results next, usually: they are read ahead.
  ATOLL_RETURN_IF_ERROR(AwaitReads(run, reads, deadline, timeout, /*read_ahead=*/data));
  return reads;
}

// A shard's failed read, named. A read that ran out of time says so with the caller's
// timeout: the store's own message names its last read's wait, which may have been only
// what was left of this one (a read ahead sent again near the end).
Status ShardError(const RunState& run, const ShardRead& read, std::chrono::milliseconds timeout) {
  Status error = read.got->status();
  if (error.code() == Code::kDeadlineExceeded) {
    error = DeadlineExceeded(
        fmt::format("not ready within the wait's {} ms: {}", timeout.count(), error.message()));
  }
  return error.WithContext(
      fmt::format("run {} result {} shard {}", run.id, read.result, read.where->shard));
}

// Results `which` of `run`, each assembled from its shards (or the client's own copy of an
// argument the run returns).
Result<std::vector<Tensor>> ReadResults(const RunState& run, const std::vector<size_t>& which,
                                        std::chrono::milliseconds timeout) {
  ATOLL_ASSIGN_OR_RETURN(std::vector<ShardRead> reads, ReadShards(run, which, timeout, true));
  std::vector<Tensor> out;
  for (size_t r : which) {
    const ResultPlan& plan = run.results[r];
    if (plan.arg_index >= 0) {
      out.push_back(run.arg_values[plan.arg_index]);
      continue;
    }
    std::vector<Tensor> shards;
    for (ShardRead& read : reads) {
      if (read.result != r) continue;
      if (!read.got->ok()) return ShardError(run, read, timeout);
      shards.push_back(std::move(*read.got).value());
    }
    ATOLL_ASSIGN_OR_RETURN(Tensor t, Assemble(shards, plan.type, plan.mesh));
    out.push_back(std::move(t));
  }
  run.client->DrainAcks(std::chrono::milliseconds(0));  // RunDone notices that came
  return out;
}

}  // namespace

Status AwaitSealed(const RunState& run, const std::vector<size_t>& which,
                   std::chrono::milliseconds timeout) {
  ATOLL_ASSIGN_OR_RETURN(std::vector<ShardRead> reads, ReadShards(run, which, timeout, false));
  for (const ShardRead& read : reads) {
    if (!read.got->ok()) return ShardError(run, read, timeout);
  }
  run.client->DrainAcks(std::chrono::milliseconds(0));
  return Status::Ok();
}

Result<std::vector<Tensor>> Run::Wait(std::chrono::milliseconds timeout) {
  std::vector<size_t> all(state_->results.size());
  std::iota(all.begin(), all.end(), 0);
  return ReadResults(*state_, all, timeout);
}

Status Run::WaitDone(std::chrono::milliseconds timeout) {
  std::vector<size_t> all(state_->results.size());
  std::iota(all.begin(), all.end(), 0);
  return AwaitSealed(*state_, all, timeout);
}

Result<Tensor> Run::Wait(size_t index, std::chrono::milliseconds timeout) {
  if (index >= state_->results.size()) {
    return InvalidArgument(fmt::format("run {} has {} results, not a result {}", state_->id,
                                       state_->results.size(), index));
  }
  ATOLL_ASSIGN_OR_RETURN(std::vector<Tensor> one, ReadResults(*state_, {index}, timeout));
  return std::move(one[0]);
}

}  // namespace atl
