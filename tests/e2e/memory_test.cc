// Device memory as a budget: a computation whose outputs do not fit waits until memory is
// freed, and one that can never fit fails at once. On devices of 4 MiB
// (tests/e2e/small_memory.toml).
#include <optional>

#include <nlohmann/json.hpp>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/doubling_program.h"
#include "tests/e2e/event_recorder.h"
#include "tests/launcher/subprocess.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

using MemoryTest = SmallMemoryClusterTest;

// A one-device program doubling f32[n]; its output lives in the device's memory.
Result<Program> OneDeviceDoubling(Client& client, int64_t n) {
  ATOLL_ASSIGN_OR_RETURN(Slice slice, client.CreateSlice(1));
  return Doubling(client, slice, n);
}

TEST_F(MemoryTest, ComputationWaitsForDeviceMemoryUntilBuffersAreReleased) {
  constexpr int64_t kElems = 768 * 1024;  // 3 MiB: one result fits a 4 MiB device, two do not
  auto client = Connect("memory");
  ASSERT_NE(client, nullptr);
  auto program = OneDeviceDoubling(*client, kElems);
  ASSERT_THAT(program, IsOk());
  EventRecorder events(EventsEndpoint());

  // The first program's result stays in device memory for as long as its Run lives.
  std::optional<atl::Run> first = client->Submit(*program, {Filled(kElems, 1)}).value();
  auto first_out = first->Wait(30s);
  ASSERT_THAT(first_out, IsOk());
  const uint64_t first_id = first->id();

  auto second = client->Submit(*program, {Filled(kElems, 3)});
  ASSERT_THAT(second, IsOk());
  auto waiting = events.WaitFor(
      "object.waiting",
      [&](const Event& e) { return e.fields["owner"].get<uint64_t>() == client->id(); }, 10s);
  ASSERT_TRUE(waiting.has_value()) << "the second program's output never waited for memory";
  EXPECT_EQ(waiting->fields["nbytes"].get<uint64_t>(), uint64_t{kElems} * 4);
  EXPECT_EQ(waiting->fields["device_bytes"].get<uint64_t>(), uint64_t{4} << 20);
  // A wait that gives up meanwhile says for how long it waited, and why.
  auto early = second->Wait(300ms);
  EXPECT_EQ(early.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(early.status().message().find("not ready within the wait's 300 ms"), std::string::npos)
      << early.status().message();
  EXPECT_NE(early.status().message().find("waits for room in device 0"), std::string::npos)
      << early.status().message();

  // Releasing the first program's result frees the memory; only then does the second run.
  first.reset();
  auto freed = events.WaitFor(
      "object.freed", [](const Event& e) { return e.fields["reason"] == "released"; }, 10s);
  ASSERT_TRUE(freed.has_value()) << "run " << first_id << "'s result was never freed";
  auto ran = events.WaitFor(
      "gang.done", [&](const Event& e) { return e.fields["run"].get<uint64_t>() == second->id(); },
      10s);
  ASSERT_TRUE(ran.has_value()) << "the second program never ran";
  EXPECT_GE(ran->fields["start_us"].get<int64_t>(), freed->fields["ts_us"].get<int64_t>());
  auto out = second->Wait(30s);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->at(0), Filled(kElems, 6));
}

TEST_F(MemoryTest, OutputThatCanNeverFitFailsAtOnceNamingTheDevice) {
  constexpr int64_t kElems = 2 * 1024 * 1024;  // 8 MiB on a 4 MiB device
  auto client = Connect("oversized");
  ASSERT_NE(client, nullptr);
  auto program = OneDeviceDoubling(*client, kElems);
  ASSERT_THAT(program, IsOk());
  auto run = client->Submit(*program, {Filled(kElems, 1)});
  ASSERT_THAT(run, IsOk());
  const auto start = std::chrono::steady_clock::now();
  auto out = run->Wait(30s);
  ASSERT_FALSE(out.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "it waited instead of failing";
  EXPECT_EQ(out.status().code(), Code::kOutOfMemory) << out.status().ToString();
  EXPECT_NE(out.status().message().find("device 0 of host h"), std::string::npos)
      << out.status().ToString();
  EXPECT_NE(out.status().message().find("can never fit"), std::string::npos)
      << out.status().ToString();
}

TEST_F(MemoryTest, StatusShowsDeviceMemoryInUseAndObjectsPerOwner) {
  constexpr int64_t kElems = 256 * 1024;  // 1 MiB
  auto client = Connect("status");
  ASSERT_NE(client, nullptr);
  auto program = OneDeviceDoubling(*client, kElems);
  ASSERT_THAT(program, IsOk());
  auto run = client->Submit(*program, {Filled(kElems, 1)});
  ASSERT_THAT(run, IsOk());
  ASSERT_THAT(run->Wait(30s), IsOk());

  // Held by `run`: the result on its device (1 MiB) and the argument in the arena.
  CommandResult r = RunCommand(AtollCommand({"status", "--json"}), 30s);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  const auto status = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(status.is_discarded()) << r.out;
  uint64_t device_bytes = 0, owned = 0;
  for (const auto& island : status.at("islands")) {
    for (const auto& host : island.at("hosts")) {
      for (const auto& d : host.at("devices")) {
        device_bytes += d.at("memory_in_use_bytes").get<uint64_t>();
      }
      const auto& owners = host.at("store").at("objects_per_owner");
      const std::string me = std::to_string(client->id());
      if (owners.contains(me)) owned += owners.at(me).get<uint64_t>();
    }
  }
  EXPECT_EQ(device_bytes, uint64_t{kElems} * 4) << r.out;
  EXPECT_EQ(owned, 2u) << r.out;  // the argument and the result

  r = RunCommand(AtollCommand({"status"}), 30s);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("1 MiB in use of      4 MiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("client " + std::to_string(client->id()) + ": 2"), std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace atl::testing
