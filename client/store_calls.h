// Asking object stores directly, the client's side of requests that are not a run's reads:
// one reply awaited by its request id, and one request to each of several stores at once,
// so that they work in parallel (checkpoints: each store writes or reads its own shards).
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>

#include "client/client_impl.h"

namespace atl {

using Deadline = std::chrono::steady_clock::time_point;

// What is left of `deadline`, at least 1 ms so that a late call still asks once.
std::chrono::milliseconds TimeLeft(Deadline deadline);

// The next reply to one of `requests` sent on `store` (taken out of the set), waiting until
// `deadline`; other replies met are dropped. An Error reply is its error; DeadlineExceeded
// when none came; Unavailable or PermissionDenied when the store is down or refused this
// client (a watched requester).
Result<proto::Incoming> AwaitAnyReply(net::Requester& store, std::set<uint64_t>& requests,
                                      Deadline deadline);

// The reply to `request` sent on `store` (AwaitAnyReply of that one).
Result<proto::Incoming> AwaitReply(net::Requester& store, uint64_t request, Deadline deadline);

// OK once every one of `requests` sent on `store` was answered OK, in whatever order the
// answers come (a put that waits for room is answered after later ones); else the first
// error (AwaitAnyReply's).
Status AwaitOks(net::Requester& store, std::set<uint64_t> requests, Deadline deadline);

// Sends each store (by endpoint) its request, with `data` frames where given, then awaits
// every reply by `deadline`: each store's reply, or its error (an Error reply, or none in
// time), naming the store.
template <typename Reply, typename Request>
std::map<std::string, Result<Reply>> AskStores(Client::Impl& client,
                                               const std::map<std::string, Request>& requests,
                                               Deadline deadline,
                                               std::map<std::string, net::Frames> data = {}) {
  std::map<std::string, Result<Reply>> replies;
  std::map<std::string, std::pair<net::Requester*, uint64_t>> sent;
  for (const auto& [endpoint, request] : requests) {
    auto store = client.Watcher(endpoint);
    auto frames = data.find(endpoint);
    const Result<uint64_t> id =
        store.ok() ? (*store)->Send(
                         request, frames == data.end() ? net::Frames{} : std::move(frames->second))
                   : Result<uint64_t>(store.status());
    if (id.ok()) {
      sent[endpoint] = {*store, *id};
    } else {
      replies.emplace(endpoint, id.status().WithContext("the object store at " + endpoint));
    }
  }
  for (const auto& [endpoint, call] : sent) {
    const auto in = AwaitReply(*call.first, call.second, deadline);
    Result<Reply> reply = in.ok() ? in->header.template As<Reply>() : Result<Reply>(in.status());
    if (!reply.ok()) reply = reply.status().WithContext("the object store at " + endpoint);
    replies.emplace(endpoint, std::move(reply));
  }
  return replies;
}

// The replies of AskStores when every store answered, else the first error.
template <typename Reply>
Result<std::map<std::string, Reply>> AllAnswered(std::map<std::string, Result<Reply>> replies) {
  std::map<std::string, Reply> out;
  for (auto& [endpoint, reply] : replies) {
    if (!reply.ok()) return reply.status();
    out.emplace(endpoint, std::move(reply).value());
  }
  return out;
}

}  // namespace atl
