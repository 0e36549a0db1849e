// The schema of the cluster's event stream, from one table (event_topics.def): each topic's
// name as a constant (topics::kHostLost is "host.lost") for the services that publish it and
// the tools that read it (`atoll top`, the dashboard, metrics, traces), and each topic's
// publisher, fields and meaning, for the checks that hold publishers to it and for
// docs/events.md, which documents it (`atoll watch --json` prints these events).
//
// Example:
//   events_.Publish(topics::kStoreStats, {{"host", host}, {"objects", n}, ...});
//   if (event.topic == topics::kHostLost) ...
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "atoll/status.h"

namespace atl::topics {

#define ATOLL_EVENT_TOPIC(name, topic, source, fields, meaning) \
  inline constexpr std::string_view k##name = topic;
#include "common/net/event_topics.def"
#undef ATOLL_EVENT_TOPIC

struct Topic {
  std::string_view name;     // "host.lost"
  std::string_view source;   // who publishes it: "rm", "scheduler", "executor", ...
  std::string_view fields;   // the keys its events may carry, space-separated
  std::string_view meaning;  // one line, for docs/events.md
};

// Every topic, in table order.
std::span<const Topic> AllTopics();
// The row of `topic`; null when the table has none.
const Topic* FindTopic(std::string_view topic);
// OK when `topic` is in the table and each of `keys` is one of its fields (or ts_us, src);
// InvalidArgument naming the topic and the first key that is not, otherwise.
Status CheckEventKeys(std::string_view topic, const std::vector<std::string>& keys);

}  // namespace atl::topics
