#include "client/read_ahead.h"

namespace atl {

void ReadAhead::Add(uint64_t run, std::vector<Shard> shards) {
  if (!shards.empty()) unread_[run] = std::move(shards);
}

void ReadAhead::ReadAfter(uint64_t run, uint32_t wait_ms) {
  unread_.erase(run);  // its waiter reads it itself
  for (auto it = unread_.upper_bound(run); it != unread_.end() && runs_.size() < kWindowRuns;) {
    uint64_t bytes = 0;
    for (const Shard& s : it->second) bytes += s.bytes;
    if (bytes_ + bytes > kWindowBytes) break;
    for (const Shard& s : it->second) {
      // A read that cannot be sent is not an error here: its waiter sends it again.
      auto socket = Socket(s.store);
      if (!socket.ok()) continue;
      auto request = (*socket)->Send(proto::GetObject{s.object_id, s.shard, wait_ms, true});
      if (!request.ok()) continue;
      const Key key{s.object_id, s.shard};
      reads_[key] = Read{it->first, *socket, *request, s.bytes, std::nullopt};
      by_request_[{*socket, *request}] = key;
      runs_[it->first].push_back(key);
      bytes_ += s.bytes;
    }
    it = unread_.erase(it);
  }
}

ReadAhead::Lookup ReadAhead::Take(uint64_t object_id, uint32_t shard) {
  auto it = reads_.find({object_id, shard});
  if (it == reads_.end()) return {};
  if (!it->second.reply) return {Lookup::kOpen, std::nullopt};
  Lookup found{Lookup::kAnswered, std::move(it->second.reply)};
  Forget(it);
  return found;
}

void ReadAhead::Collect() {
  for (auto& [store, socket] : sockets_) {
    while (true) {
      auto frames = net::RecvFrames(socket->socket(), std::chrono::milliseconds(0));
      if (!frames.ok() || !*frames) break;
      auto in = proto::ParseIncoming(std::move(**frames), /*routed=*/false);
      if (in.ok()) Answer(socket.get(), std::move(*in));
    }
  }
}

void ReadAhead::AddPollItems(std::vector<zmq::pollitem_t>& items) const {
  // A late reply to a dropped read wakes the poll once; Collect drops it.
  for (const auto& [store, socket] : sockets_) {
    items.push_back({socket->socket().handle(), 0, ZMQ_POLLIN, 0});
  }
}

std::map<std::string, net::Requester*> ReadAhead::Drop(uint64_t run) {
  unread_.erase(run);
  std::map<std::string, net::Requester*> open;
  auto keys = runs_.find(run);
  if (keys == runs_.end()) return open;
  for (const Key& key : std::vector<Key>(keys->second)) {
    auto read = reads_.find(key);
    if (read == reads_.end()) continue;
    if (!read->second.reply) open[read->second.socket->endpoint()] = read->second.socket;
    Forget(read);
  }
  return open;
}

Result<net::Requester*> ReadAhead::Socket(const std::string& store) {
  auto it = sockets_.find(store);
  if (it == sockets_.end()) {
    auto socket = std::make_unique<net::Requester>(context_, store);
    ATOLL_RETURN_IF_ERROR(socket->Connect());
    it = sockets_.emplace(store, std::move(socket)).first;
  }
  return it->second.get();
}

void ReadAhead::Answer(net::Requester* socket, proto::Incoming in) {
  auto open = by_request_.find({socket, in.header.request_id()});
  if (open == by_request_.end()) return;  // its run was dropped
  auto read = reads_.find(open->second);
  by_request_.erase(open);
  if (read == reads_.end()) return;
  if (in.header.kind() == proto::Kind::kError) {
    auto error = in.header.As<proto::Error>();
    if (error.ok() && error->code == static_cast<int32_t>(Code::kDeadlineExceeded)) {
      Forget(read);  // sealed later than it waited: its waiter reads it again
      return;
    }
  }
  read->second.reply = std::move(in);
}

void ReadAhead::Forget(std::map<Key, Read>::iterator read) {
  const Read& r = read->second;
  bytes_ -= r.bytes;
  if (!r.reply) by_request_.erase({r.socket, r.request});
  if (auto keys = runs_.find(r.run); keys != runs_.end()) {
    std::erase(keys->second, read->first);
    if (keys->second.empty()) runs_.erase(keys);
  }
  reads_.erase(read);
}

}  // namespace atl
