#include "common/net/sent_counters.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <string>

namespace atl::net {
namespace {

constexpr size_t kKinds = 256;  // Kind values in use are far below this

struct Counter {
  std::atomic<uint64_t> messages{0};
  std::atomic<uint64_t> bytes{0};
};

std::array<Counter, kKinds>& Counters() {
  static std::array<Counter, kKinds> counters;
  return counters;
}

}  // namespace

void CountSent(proto::Kind kind, uint64_t bytes) {
  size_t index = static_cast<size_t>(kind);
  if (index >= kKinds) index = 0;
  Counter& c = Counters()[index];
  c.messages.fetch_add(1, std::memory_order_relaxed);
  c.bytes.fetch_add(bytes, std::memory_order_relaxed);
}

std::map<proto::Kind, SentCount> SentCounts() {
  std::map<proto::Kind, SentCount> counts;
  for (size_t k = 0; k < kKinds; ++k) {
    const Counter& c = Counters()[k];
    const uint64_t messages = c.messages.load(std::memory_order_relaxed);
    if (messages == 0) continue;
    counts[static_cast<proto::Kind>(k)] = {messages, c.bytes.load(std::memory_order_relaxed)};
  }
  return counts;
}

EventFields SentCountFields() {
  EventFields fields;
  for (const auto& [kind, count] : SentCounts()) {
    const std::string name(proto::KindName(kind));
    fields.emplace_back(name + ".msgs", count.messages);
    fields.emplace_back(name + ".bytes", count.bytes);
  }
  fields.emplace_back("pid", static_cast<uint64_t>(getpid()));
  return fields;
}

}  // namespace atl::net
