// The Figure 2 program as a TOML job through `atoll submit`, and its events through
// `atoll watch --json`, against the real services.
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/e2e/cluster_fixture.h"
#include "tests/launcher/subprocess.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

const std::string kJob = ATOLL_SOURCE_DIR "/examples/figure2.toml";

using CliSubmitTest = ClusterTest;

TEST_F(CliSubmitTest, Figure2JobGivesThePapersResult) {
  CommandResult r = RunCommand(AtollCommand({"submit", "--json", kJob}), 60s);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  const auto out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out["results"]["y"]["values"], nlohmann::json::array({2.0, 3.0})) << r.out;
  EXPECT_EQ(out["results"]["z"]["values"], nlohmann::json::array({2.0, 4.0})) << r.out;
  EXPECT_EQ(out["results"]["z"]["shape"], nlohmann::json::array({2})) << r.out;
}

TEST_F(CliSubmitTest, WatchShowsTheProgramsEventsWhileItRuns) {
  // One Figure 2 run schedules its 4 nodes on 1 or 2 islands and runs 8 shards.
  Subprocess watch(AtollCommand({"watch", "--json", "--topic", "program.", "--topic", "gang.",
                                 "--count", "8", "--timeout-s", "60"}));
  // A subscription takes effect a moment after connecting; runs before that go unseen,
  // so keep running the job until the watcher has its events (or the deadline passes).
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!watch.Poll() && std::chrono::steady_clock::now() < deadline) {
    CommandResult r = RunCommand(AtollCommand({"submit", kJob}), 60s);
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    EXPECT_NE(r.out.find("z = f32[2] {2, 4}"), std::string::npos) << r.out;
  }
  CommandResult w = watch.Wait(5s);
  ASSERT_EQ(w.exit_code, 0) << w.Describe();
  std::set<std::string> topics;
  std::istringstream lines(w.out);
  for (std::string line; std::getline(lines, line);) {
    const auto event = nlohmann::json::parse(line);
    topics.insert(event["topic"].get<std::string>());
    if (event["topic"] == "gang.done") {
      EXPECT_TRUE(event.contains("run") && event.contains("device") && event.contains("start_us"))
          << line;
    }
  }
  EXPECT_TRUE(topics.count("program.scheduled")) << w.out;
  EXPECT_TRUE(topics.count("gang.done")) << w.out;
}

}  // namespace
}  // namespace atl::testing
