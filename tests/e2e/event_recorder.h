// EventRecorder: a subscriber to the cluster's event bus for tests that must see what the
// services did (a gang admitted, a request waiting for memory) rather than guess it from time.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/net/event_reader.h"
#include "common/net/event_topics.h"
#include "common/net/transport.h"
#include "tests/e2e/member_context.h"
#include "tests/status_matchers.h"

namespace atl::testing {

class EventRecorder {
 public:
  explicit EventRecorder(const std::string& endpoint)
      : socket_(net::MakeSocket(context_, zmq::socket_type::sub)) {
    socket_.set(zmq::sockopt::subscribe, "");
    // A test that reads while a load runs must not lose events to a full queue.
    socket_.set(zmq::sockopt::rcvhwm, 0);
    EXPECT_THAT(net::Connect(socket_, endpoint), IsOk());
    // A subscription takes effect a moment after connecting: wait for the first event
    // (executors publish device.stats every heartbeat).
    EXPECT_TRUE(Next(std::chrono::seconds(10)).has_value()) << "no event within 10 s";
  }

  std::optional<Event> Next(std::chrono::milliseconds timeout) {
    auto frames = net::RecvFrames(socket_, timeout);
    if (!frames.ok() || !frames->has_value() || (*frames)->size() != 2) return std::nullopt;
    auto event = DecodeEvent((**frames)[0], (**frames)[1]);
    if (!event.ok()) return std::nullopt;
    // Every event a test sees is held to the event schema (common/net/event_topics.def).
    std::vector<std::string> keys;
    for (const auto& [key, value] : event->fields.items()) keys.push_back(key);
    const Status schema = topics::CheckEventKeys(event->topic, keys);
    EXPECT_THAT(schema, IsOk());
    return *event;
  }

  // The first event on `topic` that `match` accepts, within `timeout`; others are dropped.
  std::optional<Event> WaitFor(const std::string& topic,
                               const std::function<bool(const Event&)>& match,
                               std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      auto e = Next(std::max(left, std::chrono::milliseconds(1)));
      if (e && e->topic == topic && match(*e)) return e;
    }
    return std::nullopt;
  }

  // One line per event, topic and fields: what a failed expectation on `events` shows.
  static std::string Describe(const std::vector<Event>& events) {
    std::string lines;
    for (const Event& e : events) lines += e.topic + " " + e.fields.dump() + "\n";
    return lines;
  }

  // Collects events of `run` until `done` says the set is complete (bounded by 30 s).
  std::vector<Event> Collect(uint64_t run,
                             const std::function<bool(const std::vector<Event>&)>& done) {
    std::vector<Event> got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!done(got) && std::chrono::steady_clock::now() < deadline) {
      auto e = Next(std::chrono::seconds(1));
      if (e && e->fields.contains("run") && e->fields["run"] == run) got.push_back(*e);
    }
    return got;
  }

 private:
  MemberContext context_;
  zmq::socket_t socket_;
};

}  // namespace atl::testing
