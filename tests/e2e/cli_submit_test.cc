// The Figure 2 program as a TOML job through `atoll submit`, and its events through
// `atoll watch --json`, against the real services; and jobs with mistakes, which fail
// naming the mistake.
#include <fstream>
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

// Figure 2 with `from` replaced by `to`, written to the cluster's state directory as `name`;
// returns its path.
std::string Figure2With(const std::string& name, const std::string& from, const std::string& to) {
  std::ifstream in(kJob);
  std::stringstream text;
  text << in.rdbuf();
  std::string job = text.str();
  const auto at = job.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) job.replace(at, from.size(), to);
  const std::string path = *ClusterTest::state_dir_ + "/" + name;
  std::ofstream(path) << job;
  return path;
}

// A call whose arguments do not fit its function used to end in "internal error: map::at"
// (the failed call left its outputs undefined); it is the call's own error now.
TEST_F(CliSubmitTest, ACallThatDoesNotFitItsFunctionIsNamedWithBothTypes) {
  struct Case {
    std::string name, from, to, error;
  };
  const Case cases[] = {
      {"wrong_shape.toml", "inputs = [{ dtype = \"f32\", shape = [2] }]\nops = [{ op = \"add\"",
       "inputs = [{ dtype = \"f32\", shape = [4] }]\nops = [{ op = \"add\"",
       "call 1 of 'b': argument 0: expected f32[4], got f32[2]"},
      {"wrong_count.toml", "{ fn = \"c\", args = [\"x\"]", "{ fn = \"c\", args = [\"x\", \"v\"]",
       "call 2 of 'c': expected 1 argument, got 2"},
  };
  for (const Case& c : cases) {
    CommandResult r = RunCommand(AtollCommand({"submit", Figure2With(c.name, c.from, c.to)}), 60s);
    EXPECT_EQ(r.exit_code, 1) << c.name << ": " << r.Describe();
    EXPECT_NE(r.err.find(c.error), std::string::npos) << c.name << ": " << r.Describe();
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << c.name << ": " << r.Describe();
  }
}

TEST_F(CliSubmitTest, ANegativeCountIsRefusedNamingItsField) {
  CommandResult r =
      RunCommand(AtollCommand({"submit", Figure2With("negative.toml", "name = \"A\"\ndevices = 2",
                                                     "name = \"A\"\ndevices = -1")}),
                 60s);
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("slice 'A' devices must be in 1..65536, not -1"), std::string::npos)
      << r.Describe();
}

}  // namespace
}  // namespace atl::testing
