// `atoll trace` as a user runs it: live against the real cluster while `atoll submit` runs
// the Figure 2 job, and from a file of `atoll watch --json` lines.
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/e2e/cluster_fixture.h"
#include "tests/launcher/subprocess.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

const std::string kJob = ATOLL_SOURCE_DIR "/examples/figure2.toml";

// One Figure 2 run: 4 nodes of 2 shards each.
constexpr size_t kShardsPerRun = 8;

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/atoll-trace-test-XXXXXX";
    if (mkdtemp(pattern) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    if (!path_.empty()) std::filesystem::remove_all(path_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

Json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return Json::parse(in, nullptr, /*allow_exceptions=*/false);
}

using TraceE2eTest = ClusterTest;

TEST_F(TraceE2eTest, LiveTraceHasOneSlicePerShardOnItsDevicesTrack) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string out = dir.path() + "/trace.json";
  // Two runs' worth of gangs: the tracer may join in the middle of one run, but then sees
  // the whole of the next.
  Subprocess trace(AtollCommand(
      {"trace", "--count", std::to_string(2 * kShardsPerRun), "--timeout-s", "90", "-o", out}));
  // A subscription takes effect a moment after connecting; keep running the job until the
  // tracer has its events (or the deadline passes).
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  while (!trace.Poll() && std::chrono::steady_clock::now() < deadline) {
    CommandResult r = RunCommand(AtollCommand({"submit", kJob}), 60s);
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  }
  CommandResult t = trace.Wait(10s);
  ASSERT_EQ(t.exit_code, 0) << t.Describe();
  EXPECT_NE(t.out.find("wrote"), std::string::npos) << t.out;

  const Json doc = ReadJson(out);
  ASSERT_FALSE(doc.is_discarded()) << "the trace is not JSON";
  ASSERT_TRUE(doc["traceEvents"].is_array());
  std::map<std::pair<int64_t, int64_t>, std::string> threads;  // (pid, tid) -> name
  std::map<int64_t, std::string> processes;
  std::map<uint64_t, std::set<std::pair<uint64_t, uint64_t>>> shards_of_run;
  std::vector<Json> slices;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      threads[{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()}] = e["args"]["name"];
    } else if (e["ph"] == "M" && e["name"] == "process_name") {
      processes[e["pid"].get<int64_t>()] = e["args"]["name"];
    } else if (e["ph"] == "X") {
      slices.push_back(e);
    }
  }
  ASSERT_GE(slices.size(), 2 * kShardsPerRun) << doc.dump();
  for (const auto& x : slices) {
    EXPECT_GE(x["dur"].get<int64_t>(), 0) << x.dump();
    EXPECT_GE(x["ts"].get<int64_t>(), 0) << x.dump();
    const auto run = x["args"]["run"].get<uint64_t>();
    EXPECT_EQ(x["name"], "run " + std::to_string(run) + " node " +
                             std::to_string(x["args"]["node"].get<uint64_t>()));
    // One slice per (run, node, shard).
    EXPECT_TRUE(shards_of_run[run]
                    .emplace(x["args"]["node"].get<uint64_t>(), x["args"]["shard"].get<uint64_t>())
                    .second)
        << x.dump();
    // On the track of its device, in the process of its host.
    const std::pair<int64_t, int64_t> track{x["pid"].get<int64_t>(), x["tid"].get<int64_t>()};
    ASSERT_TRUE(threads.count(track)) << x.dump();
    EXPECT_EQ(threads[track], "device " + std::to_string(track.second));
    ASSERT_TRUE(processes.count(track.first)) << x.dump();
    EXPECT_EQ(processes[track.first].back() >= '0' && processes[track.first].back() <= '9', true)
        << processes[track.first];  // "island0 / i0h0" or "i0h0"
  }
  size_t complete_runs = 0;
  for (const auto& [run, shards] : shards_of_run) {
    EXPECT_LE(shards.size(), kShardsPerRun) << "run " << run;
    complete_runs += shards.size() == kShardsPerRun ? 1 : 0;
  }
  EXPECT_GE(complete_runs, 1u) << doc.dump();
  // Every thread is a device some slice ran on.
  std::set<std::pair<int64_t, int64_t>> used;
  for (const auto& x : slices) used.emplace(x["pid"].get<int64_t>(), x["tid"].get<int64_t>());
  EXPECT_EQ(used.size(), threads.size());
}

TEST_F(TraceE2eTest, TooFewGangsByTheDeadlineFailsButStillWritesTheTrace) {
  TempDir dir;
  const std::string out = dir.path() + "/trace.json";
  CommandResult r = RunCommand(
      AtollCommand({"trace", "--count", "1000000", "--timeout-s", "0.5", "-o", out}), 30s);
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("atoll: trace:"), std::string::npos) << r.err;
  const Json doc = ReadJson(out);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_TRUE(doc["traceEvents"].is_array());
}

TEST(TraceCliTest, FromFileToStdout) {
  TempDir dir;
  const std::string events = dir.path() + "/events.jsonl";
  std::ofstream(events)
      << R"({"topic":"device.stats","ts_us":1,"src":"executor","device":5,"host":"i1h0","island":"island1","queued":0,"busy_us":0})"
      << "\n"
      << R"({"topic":"gang.done","ts_us":9,"src":"executor","run":4294967297,"node":2,"gang":7,"shard":1,"device":5,"host":"i1h0","client":1,"start_us":100,"end_us":160})"
      << "\n";
  CommandResult r = RunCommand({ATOLL_BIN_DIR "/atoll", "trace", "--from", events}, 30s);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  const Json doc = Json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded()) << r.out;
  bool saw_slice = false, saw_process = false, saw_thread = false;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X") {
      saw_slice = true;
      EXPECT_EQ(e["name"], "run 4294967297 node 2");
      EXPECT_EQ(e["tid"], 5);
      EXPECT_EQ(e["dur"], 60);
    }
    if (e["ph"] == "M" && e["name"] == "process_name") {
      saw_process = e["args"]["name"] == "island1 / i1h0";
    }
    if (e["ph"] == "M" && e["name"] == "thread_name") saw_thread = e["args"]["name"] == "device 5";
  }
  EXPECT_TRUE(saw_slice && saw_process && saw_thread) << r.out;
}

TEST(TraceCliTest, UnreadableOrMalformedInputFails) {
  CommandResult r =
      RunCommand({ATOLL_BIN_DIR "/atoll", "trace", "--from", "/nonexistent/events.jsonl"}, 30s);
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("atoll: trace: cannot read"), std::string::npos) << r.err;

  TempDir dir;
  const std::string events = dir.path() + "/bad.jsonl";
  std::ofstream(events) << "{\"topic\":\"gang.done\",\"run\":1}\n";
  r = RunCommand({ATOLL_BIN_DIR "/atoll", "trace", "--from", events}, 30s);
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("line 1"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace atl::testing
