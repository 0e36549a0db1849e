// Client::Impl's traffic: what the schedulers, the RM and the peers' connections bring,
// moved into the client's pure parts (Submissions, ServiceLosses, ReadsLedger).
#include "client/client_impl.h"

#include <algorithm>

#include <fmt/format.h>

namespace atl {

void Client::Impl::DrainAcks(std::chrono::milliseconds timeout, size_t keep) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  submissions.ForEachScheduler([&](const std::string& endpoint) {
    while (true) {
      const auto left = submissions.Unanswered(endpoint) <= keep
                            ? std::chrono::milliseconds(0)
                            : std::max(std::chrono::milliseconds(0),
                                       std::chrono::duration_cast<std::chrono::milliseconds>(
                                           deadline - std::chrono::steady_clock::now()));
      auto frames = net::RecvFrames(peers.at(endpoint)->socket(), left);
      if (!frames.ok() || !frames->has_value()) break;
      auto in = proto::ParseIncoming(std::move(**frames), /*routed=*/false);
      if (!in.ok()) continue;
      const Submissions::Heard heard = submissions.Take(endpoint, in->header);
      // What Done returns is dropped here.
      if (heard.ends_reads) (void)reads.Done(endpoint, heard.run);
    }
  });
}

Result<net::Requester*> Client::Impl::Peer(const std::string& endpoint) {
  auto it = peers.find(endpoint);
  if (it == peers.end()) {
    auto r = std::make_unique<net::Requester>(context, endpoint);
    ATOLL_RETURN_IF_ERROR(r->Connect(/*watch_handshakes=*/true));
    it = peers.emplace(endpoint, std::move(r)).first;
  }
  return it->second.get();
}

Result<net::Requester*> Client::Impl::Watcher(const std::string& endpoint) {
  watchers.insert(endpoint);
  return Peer(endpoint);
}

void Client::Impl::ApplyNotices() {
  WatchConnections();
  for (auto& notice : rm->TakeNotices()) {
    if (notice.header.kind() == proto::Kind::kServiceChanged) {
      auto changed = notice.header.As<proto::ServiceChanged>();
      if (!changed.ok()) continue;
      if (const Loss* lost = losses.Notice(*changed)) ReleaseReadsOf(*lost);
      continue;
    }
    if (notice.header.kind() != proto::Kind::kSliceRemapped) continue;
    auto remapped = notice.header.As<proto::SliceRemapped>();
    if (!remapped.ok() || !slices.count(remapped->slice.slice_id)) continue;
    const proto::SliceInfo& info = remapped->slice;
    slices[info.slice_id] = info;
    auto& fns = functions[info.slice_id];
    std::erase_if(fns, [](const auto& f) { return f.expired(); });
    for (const auto& f : fns) f.lock()->slice = info;
  }
}

Status Client::Impl::AwaitUp(uint64_t run, const ServicesNeeded& needs) {
  if (losses.CheckUp(run, needs).ok()) return Status::Ok();
  zmq::pollitem_t rm_readable{rm->socket().handle(), 0, ZMQ_POLLIN, 0};
  (void)zmq::poll(&rm_readable, 1, losses.notice_period);
  ApplyNotices();
  return losses.CheckUp(run, needs);
}

void Client::Impl::ReleaseReadsOf(const Loss& loss) {
  if (loss.role == proto::Heartbeat::kScheduler) (void)reads.Lost(loss.endpoint);
}

void Client::Impl::WatchConnections() {
  submissions.ForEachScheduler([&](const std::string& endpoint) {
    if (!losses.Dropped(endpoint, peers.at(endpoint)->ConnectionDrops())) return;
    std::string scheduler = "the island scheduler at " + endpoint;
    for (const auto& [slice_id, slice] : slices) {
      if (slice.scheduler_endpoint == endpoint) {
        scheduler = fmt::format("the scheduler of island {} ({})", slice.island, endpoint);
        break;
      }
    }
    ReleaseReadsOf(losses.Lose(
        ServiceLosses::DroppedConnection(proto::Heartbeat::kScheduler, "", endpoint, scheduler)));
  });
  if (!losses.StoresDue(std::chrono::steady_clock::now())) return;
  std::set<std::string> looked;  // a host's devices share its store
  for (const auto& [slice_id, slice] : slices) {
    for (const auto& device : slice.devices) {
      const std::string& store = device.store_endpoint;
      if (!peers.count(store) || !looked.insert(store).second ||
          !losses.Dropped(store, peers.at(store)->ConnectionDrops())) {
        continue;
      }
      losses.Lose(ServiceLosses::DroppedConnection(
          proto::Heartbeat::kStore, device.host, store,
          fmt::format("the object store of host {} ({})", device.host, store)));
    }
  }
}

}  // namespace atl
