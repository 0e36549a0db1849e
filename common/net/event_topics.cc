#include "common/net/event_topics.h"

#include <array>

namespace atl::topics {

namespace {

constexpr std::array kTopics = {
#define ATOLL_EVENT_TOPIC(name, topic, source, fields, meaning) \
  Topic{topic, source, fields, meaning},
#include "common/net/event_topics.def"
#undef ATOLL_EVENT_TOPIC
};

// True when `key` is one of the space-separated `fields`; "*.msgs" matches every key that
// ends ".msgs" (per-kind counters).
bool IsField(std::string_view fields, std::string_view key) {
  for (size_t start = 0; start < fields.size();) {
    const size_t end = std::min(fields.find(' ', start), fields.size());
    const std::string_view field = fields.substr(start, end - start);
    if (field == key) return true;
    if (field.starts_with("*.") && key.ends_with(field.substr(1))) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

std::span<const Topic> AllTopics() { return kTopics; }

const Topic* FindTopic(std::string_view topic) {
  for (const Topic& t : kTopics) {
    if (t.name == topic) return &t;
  }
  return nullptr;
}

Status CheckEventKeys(std::string_view topic, const std::vector<std::string>& keys) {
  const Topic* row = FindTopic(topic);
  if (row == nullptr) {
    return InvalidArgument("event topic '" + std::string(topic) +
                           "' is not in the event schema (common/net/event_topics.def)");
  }
  for (const std::string& key : keys) {
    if (key == "ts_us" || key == "src" || IsField(row->fields, key)) continue;
    return InvalidArgument("event '" + std::string(topic) + "' has field '" + key +
                           "', which its row of common/net/event_topics.def does not list (" +
                           std::string(row->fields) + ")");
  }
  return Status::Ok();
}

}  // namespace atl::topics
