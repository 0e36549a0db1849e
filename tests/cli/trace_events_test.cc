#include "cli/trace_events.h"

#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include "tests/status_matchers.h"

namespace atl::trace {
namespace {

using Json = nlohmann::ordered_json;

// A gang.done line as `atoll watch --json` prints it.
std::string GangLine(uint64_t run, uint64_t node, uint64_t shard, uint64_t device,
                     const std::string& host, uint64_t client, int64_t start_us, int64_t end_us) {
  Json j;
  j["topic"] = "gang.done";
  j["ts_us"] = end_us + 5;
  j["src"] = "executor/" + host;
  j["run"] = run;
  j["node"] = node;
  j["gang"] = node + 100;
  j["shard"] = shard;
  j["device"] = device;
  j["host"] = host;
  j["client"] = client;
  j["start_us"] = start_us;
  j["end_us"] = end_us;
  return j.dump();
}

std::string StatsLine(uint64_t device, const std::string& host, const std::string& island) {
  return Json({{"topic", "device.stats"},
               {"ts_us", 1},
               {"src", "executor/" + host},
               {"device", device},
               {"host", host},
               {"island", island},
               {"queued", 0},
               {"busy_us", 0}})
      .dump();
}

// Events of one kind ("X", "M", "i") from a trace.
std::vector<Json> Events(const Json& trace, const std::string& ph) {
  std::vector<Json> out;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == ph) out.push_back(e);
  }
  return out;
}

// name -> args.name of every metadata event called `kind`, keyed by (pid, tid).
std::map<std::pair<int64_t, int64_t>, std::string> Names(const Json& trace,
                                                         const std::string& kind) {
  std::map<std::pair<int64_t, int64_t>, std::string> out;
  for (const auto& m : Events(trace, "M")) {
    if (m["name"] == kind) {
      out[{m["pid"].get<int64_t>(), m["tid"].get<int64_t>()}] = m["args"]["name"];
    }
  }
  return out;
}

Json Convert(const std::string& lines) {
  std::istringstream in(lines);
  TraceBuilder builder;
  Status s = AddJsonLines(in, builder);
  EXPECT_THAT(s, IsOk());
  return builder.ToJson();
}

TEST(TraceEventsTest, OneTrackPerDeviceAndOneSlicePerShard) {
  const uint64_t run = (uint64_t{1} << 32) | 1;  // 4294967297
  std::string lines;
  lines += StatsLine(0, "i0h0", "island0") + "\n";
  lines += "{\"topic\": \"program.scheduled\", \"ts_us\": 1, \"src\": \"scheduler\", \"run\": 1}\n";
  lines += GangLine(run, 0, 0, 0, "i0h0", 1, 1000, 1250) + "\n";
  lines += GangLine(run, 0, 1, 1, "i0h0", 1, 1010, 1200) + "\n";
  lines += "\n";  // blank lines are skipped
  lines += GangLine(run, 2, 0, 2, "i0h1", 1, 1300, 1300) + "\n";
  lines += GangLine(run, 2, 1, 3, "i0h1", 1, 1305, 1400) + "\n";
  const Json trace = Convert(lines);

  const auto slices = Events(trace, "X");
  ASSERT_EQ(slices.size(), 4u) << trace.dump(2);
  // Time zero is the earliest start; durations are end - start, in microseconds.
  std::map<std::pair<uint64_t, uint64_t>, Json> by_shard;
  auto at = [&](uint64_t node, uint64_t shard) -> Json& { return by_shard[{node, shard}]; };
  for (const auto& x : slices) {
    by_shard[{x["args"]["node"].get<uint64_t>(), x["args"]["shard"].get<uint64_t>()}] = x;
  }
  EXPECT_EQ(at(0, 0)["ts"], 0);
  EXPECT_EQ(at(0, 0)["dur"], 250);
  EXPECT_EQ(at(0, 1)["ts"], 10);
  EXPECT_EQ(at(0, 1)["dur"], 190);
  EXPECT_EQ(at(2, 0)["dur"], 0);
  EXPECT_EQ(at(2, 1)["ts"], 305);
  EXPECT_EQ(trace["otherData"]["origin_us"], 1000);
  EXPECT_EQ(trace["otherData"]["gangs"], 4);

  // Names, args and colour.
  const Json& first = at(0, 0);
  EXPECT_EQ(first["name"], "run 4294967297 node 0");
  EXPECT_EQ(first["args"],
            Json({{"client", 1}, {"run", run}, {"node", 0}, {"gang", 100}, {"shard", 0}}));
  EXPECT_EQ(first["cname"], std::string(ClientColor(1)));

  // One thread per device (tid = device id), in the process of its host.
  for (const auto& x : slices) {
    const auto device = x["tid"].get<uint64_t>();
    EXPECT_EQ(device, x["args"]["node"] == 0 ? x["args"]["shard"].get<uint64_t>()
                                             : 2 + x["args"]["shard"].get<uint64_t>());
  }
  const auto threads = Names(trace, "thread_name");
  ASSERT_EQ(threads.size(), 4u);
  const auto processes = Names(trace, "process_name");
  ASSERT_EQ(processes.size(), 2u);
  std::set<std::string> process_names;
  for (const auto& [key, name] : processes) process_names.insert(name);
  // i0h0's island came from device.stats; i0h1's is unknown, so its track is the host alone.
  EXPECT_EQ(process_names, (std::set<std::string>{"island0 / i0h0", "i0h1"}));
  for (const auto& x : slices) {
    const std::pair<int64_t, int64_t> track{x["pid"].get<int64_t>(), x["tid"].get<int64_t>()};
    ASSERT_TRUE(threads.count(track)) << x.dump();
    EXPECT_EQ(threads.at(track), "device " + std::to_string(x["tid"].get<int64_t>()));
    EXPECT_TRUE(processes.count({x["pid"].get<int64_t>(), 0})) << x.dump();
  }
  // Hosts with a known island come first.
  EXPECT_EQ(processes.at({1, 0}), "island0 / i0h0");
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
}

TEST(TraceEventsTest, ClientsGetDifferentColours) {
  std::string lines = GangLine(1, 0, 0, 0, "h", 1, 10, 20) + "\n" +
                      GangLine(2, 0, 0, 0, "h", 2, 20, 30) + "\n" +
                      GangLine(3, 0, 0, 0, "h", 1, 30, 40) + "\n";
  const auto slices = Events(Convert(lines), "X");
  ASSERT_EQ(slices.size(), 3u);
  // Ordered by time on one track.
  EXPECT_EQ(slices[0]["args"]["run"], 1);
  EXPECT_EQ(slices[1]["args"]["run"], 2);
  EXPECT_EQ(slices[0]["cname"], slices[2]["cname"]);
  EXPECT_NE(slices[0]["cname"], slices[1]["cname"]);
  EXPECT_NE(ClientColor(1), ClientColor(2));
  EXPECT_EQ(ClientColor(3), ClientColor(3));
}

TEST(TraceEventsTest, GangErrorsAreInstantEventsOnTheirHost) {
  std::string lines = GangLine(1, 0, 0, 4, "i1h0", 1, 100, 200) + "\n";
  lines += Json({{"topic", "error.gang"},
                 {"ts_us", 150},
                 {"src", "executor/i1h0"},
                 {"run", 1},
                 {"node", 1},
                 {"shard", 0},
                 {"host", "i1h0"},
                 {"error", "InvalidArgument: x"}})
               .dump() +
           "\n";
  TraceBuilder builder;
  std::istringstream in(lines);
  ASSERT_THAT(AddJsonLines(in, builder), IsOk());
  EXPECT_EQ(builder.gangs(), 1u);
  EXPECT_EQ(builder.errors(), 1u);
  EXPECT_EQ(builder.devices(), 1u);
  const Json trace = builder.ToJson();
  const auto instants = Events(trace, "i");
  ASSERT_EQ(instants.size(), 1u);
  EXPECT_EQ(instants[0]["ts"], 50);
  EXPECT_EQ(instants[0]["s"], "p");
  EXPECT_EQ(instants[0]["pid"], Events(trace, "X")[0]["pid"]);
  EXPECT_EQ(instants[0]["args"]["error"], "InvalidArgument: x");
  EXPECT_EQ(instants[0]["name"], "error: run 1 node 1 shard 0");
}

TEST(TraceEventsTest, EmptyStreamGivesAnEmptyTrace) {
  const Json trace = Convert("");
  EXPECT_TRUE(trace["traceEvents"].is_array());
  EXPECT_TRUE(trace["traceEvents"].empty());
}

TEST(TraceEventsTest, BadLinesAreNamedByNumber) {
  TraceBuilder builder;
  std::istringstream not_json(GangLine(1, 0, 0, 0, "h", 1, 1, 2) + "\n{oops\n");
  Status s = AddJsonLines(not_json, builder);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("line 2"), std::string::npos) << s.ToString();

  std::istringstream no_topic("{\"ts_us\": 1}\n");
  EXPECT_EQ(AddJsonLines(no_topic, builder).code(), Code::kInvalidArgument);

  // A gang.done without its device, or with a string where a number belongs.
  Json missing = Json::parse(GangLine(1, 0, 0, 0, "h", 1, 1, 2));
  missing.erase("device");
  std::istringstream missing_in(missing.dump() + "\n");
  s = AddJsonLines(missing_in, builder);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("device"), std::string::npos) << s.ToString();
  Json wrong = Json::parse(GangLine(1, 0, 0, 0, "h", 1, 1, 2));
  wrong["start_us"] = "soon";
  auto event = ParseJsonLine(wrong.dump());
  ASSERT_THAT(event, IsOk());
  EXPECT_EQ(builder.Add(*event).code(), Code::kInvalidArgument);
  EXPECT_EQ(builder.gangs(), 1u);  // only the good line of the first stream
}

TEST(TraceEventsTest, ParseJsonLineSplitsTopicFromFields) {
  auto event = ParseJsonLine(R"({"topic": "gang.done", "ts_us": 7, "run": 3})");
  ASSERT_THAT(event, IsOk());
  EXPECT_EQ(event->topic, "gang.done");
  EXPECT_FALSE(event->fields.contains("topic"));
  EXPECT_EQ(event->fields["run"], 3);
  EXPECT_FALSE(ParseJsonLine("[1, 2]").ok());
  EXPECT_FALSE(ParseJsonLine(R"({"topic": 5})").ok());
}

}  // namespace
}  // namespace atl::trace
