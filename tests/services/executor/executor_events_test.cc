// What the executor's events carry (executor_events.h): the topic and the fields each reader
// (atoll top, the dashboard, metrics, trace) relies on.
#include "services/executor/executor_events.h"

#include <memory>
#include <vector>

#include <gtest/gtest.h>

namespace atl::executor {
namespace {

// The value of field `name`; fails the test when the event has none.
EventValue Field(const ExecutorEvent& event, const std::string& name) {
  for (const auto& [key, value] : event.fields) {
    if (key == name) return value;
  }
  ADD_FAILURE() << event.topic << " has no field " << name;
  return EventValue{};
}

std::vector<std::string> Keys(const ExecutorEvent& event) {
  std::vector<std::string> keys;
  for (const auto& field : event.fields) keys.push_back(field.first);
  return keys;
}

Completion Finished(Result<std::vector<Tensor>> outputs) {
  auto item = std::make_shared<WorkItem>();
  item->entry.run_id = 9;
  item->entry.node = 2;
  item->entry.gang_seq = 40;
  item->entry.shard = 3;
  item->entry.device = 1;  // local index: the event names the cluster-wide id
  item->entry.owner_client = 5;
  return Completion{item, std::move(outputs), /*start_us=*/100, /*end_us=*/250};
}

TEST(ExecutorEventsTest, AShardThatRanIsGangDoneOnItsClusterWideDevice) {
  const std::vector<uint32_t> device_ids{10, 11};
  const ExecutorEvent event =
      ShardFinished(Finished(std::vector<Tensor>{}), "h0", std::span(device_ids));
  EXPECT_EQ(event.topic, "gang.done");
  EXPECT_EQ(Keys(event), (std::vector<std::string>{"run", "node", "gang", "shard", "device", "host",
                                                   "client", "start_us", "end_us"}));
  EXPECT_EQ(Field(event, "device"), EventValue{uint64_t{11}});
  EXPECT_EQ(Field(event, "gang"), EventValue{uint64_t{40}});
  EXPECT_EQ(Field(event, "client"), EventValue{uint64_t{5}});
  EXPECT_EQ(Field(event, "end_us"), EventValue{int64_t{250}});
}

TEST(ExecutorEventsTest, ACancelledShardIsNotAFaultAndAFailedOneIs) {
  const std::vector<uint32_t> device_ids{10, 11};
  const ExecutorEvent cancelled =
      ShardFinished(Finished(Cancelled("run 9 was cancelled")), "h0", device_ids);
  EXPECT_EQ(cancelled.topic, "gang.cancelled");
  EXPECT_EQ(Field(cancelled, "why"), EventValue{std::string("Cancelled: run 9 was cancelled")});

  const ExecutorEvent failed =
      ShardFinished(Finished(Internal("kernel crashed")), "h0", device_ids);
  EXPECT_EQ(failed.topic, "error.gang");
  EXPECT_EQ(Keys(failed), (std::vector<std::string>{"run", "node", "shard", "host", "error"}));
  EXPECT_NE(std::get<std::string>(Field(failed, "error")).find("kernel crashed"),
            std::string::npos);
}

TEST(ExecutorEventsTest, ALateInputIsAnErrorNamingTheInputAndTheWait) {
  const ExecutorEvent event = InputLate(InputKey{9, 2, 1, 3}, "h0", 500);
  EXPECT_EQ(event.topic, "error.gang");
  EXPECT_EQ(Field(event, "shard"), EventValue{uint64_t{3}});
  EXPECT_EQ(Field(event, "error"), EventValue{std::string("waited over 500 ms for input 1")});
}

TEST(ExecutorEventsTest, ADispatchNamesItsRunEntriesAndGangs) {
  proto::Dispatch dispatch;
  dispatch.entries.resize(3);
  for (size_t i = 0; i < 3; ++i) {
    dispatch.entries[i].run_id = 4;
    dispatch.entries[i].gang_seq = 20 + i;
  }
  const ExecutorEvent admitted = DispatchAdmitted(dispatch, "h0");
  EXPECT_EQ(admitted.topic, "dispatch.admitted");
  EXPECT_EQ(Field(admitted, "run"), EventValue{uint64_t{4}});
  EXPECT_EQ(Field(admitted, "entries"), EventValue{uint64_t{3}});
  EXPECT_EQ(Field(admitted, "first_gang"), EventValue{uint64_t{20}});
  EXPECT_EQ(Field(admitted, "last_gang"), EventValue{uint64_t{22}});

  const ExecutorEvent held = DispatchHeld(dispatch, "h0", 2);
  EXPECT_EQ(held.topic, "dispatch.held");
  EXPECT_EQ(Field(held, "behind"), EventValue{uint64_t{2}});
}

TEST(ExecutorEventsTest, DataPlaneStatsCountBothWays) {
  ReceivedTuples received;
  received.AddBatch(3, 300, 1000);
  received.AddBatch(2, 50, 2000);
  const ExecutorEvent event =
      DataPlaneStats("h0", TupleOutbox::Stats{7, 2, 700}, received, /*held=*/1);
  EXPECT_EQ(event.topic, "dataplane.stats");
  EXPECT_EQ(Field(event, "tuples_out"), EventValue{uint64_t{7}});
  EXPECT_EQ(Field(event, "tuples_in"), EventValue{uint64_t{5}});
  EXPECT_EQ(Field(event, "batches_in"), EventValue{uint64_t{2}});
  EXPECT_EQ(Field(event, "bytes_in"), EventValue{uint64_t{350}});
  EXPECT_EQ(Field(event, "last_in_us"), EventValue{int64_t{2000}});
  EXPECT_EQ(Field(event, "batches_held"), EventValue{uint64_t{1}});

  const ExecutorEvent device = DeviceStats(11, "h0", "island0", 4, 123);
  EXPECT_EQ(device.topic, "device.stats");
  EXPECT_EQ(Keys(device),
            (std::vector<std::string>{"device", "host", "island", "queued", "busy_us"}));
}

}  // namespace
}  // namespace atl::executor
