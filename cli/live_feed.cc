#include "cli/live_feed.h"

#include "common/net/event_topics.h"

namespace atl {

namespace {

// The family of `topic`: its name up to and including the first dot ("host." for
// "host.lost"). A subscription to it receives every topic of the family, those added later
// included (ZeroMQ matches subscriptions as prefixes).
constexpr std::string_view FamilyOf(std::string_view topic) {
  return topic.substr(0, topic.find('.') + 1);
}

}  // namespace

LiveFeed::LiveFeed(zmq::context_t& context, const ClusterInfo& info)
    : events_endpoint_(info.events_out),
      sub_(net::MakeSocket(context, zmq::socket_type::sub)),
      rm_(context, info.rm_endpoint) {}

const std::vector<std::string>& LiveFeed::Topics() {
  // Whole families where the view follows every topic of one (hosts, islands, slices).
  static const std::vector<std::string> followed = [] {
    std::vector<std::string> list;
    for (std::string_view topic :
         {FamilyOf(topics::kDeviceRegistered), FamilyOf(topics::kHostLost),
          FamilyOf(topics::kIslandJoined), topics::kStoreStats, topics::kSchedulerStats,
          topics::kNetStats, FamilyOf(topics::kSliceCreated), FamilyOf(topics::kClientConnected),
          FamilyOf(topics::kProgramScheduled), topics::kDataplaneStats, topics::kGangDone,
          topics::kErrorGang}) {
      list.emplace_back(topic);
    }
    return list;
  }();
  return followed;
}

Status LiveFeed::Connect() {
  if (events_endpoint_.empty()) {
    return InvalidArgument("no event bus endpoint known for the RM at " + rm_.endpoint() +
                           "; pass --events EP");
  }
  try {
    for (const auto& topic : Topics()) sub_.set(zmq::sockopt::subscribe, topic);
  } catch (const zmq::error_t& e) {
    return Internal(std::string("cannot subscribe: ") + e.what());
  }
  ATOLL_RETURN_IF_ERROR(net::Connect(sub_, events_endpoint_));
  return rm_.Connect();
}

Result<proto::ClusterStatus> LiveFeed::ClusterStatus(std::chrono::milliseconds timeout) {
  return rm_.Call<proto::ClusterStatus>(proto::GetClusterStatus{}, timeout);
}

Result<std::vector<Event>> LiveFeed::Receive(std::chrono::milliseconds wait, size_t max) {
  std::vector<Event> events;
  bool waited = false;
  while (events.size() < max) {
    ATOLL_ASSIGN_OR_RETURN(auto frames,
                           net::RecvFrames(sub_, waited ? std::chrono::milliseconds(0) : wait));
    waited = true;
    if (!frames) break;
    if (frames->size() != 2) {
      ++malformed_;
      continue;
    }
    auto event = DecodeEvent((*frames)[0], (*frames)[1]);
    if (!event.ok()) {
      ++malformed_;
      continue;
    }
    events.push_back(std::move(*event));
  }
  return events;
}

}  // namespace atl
