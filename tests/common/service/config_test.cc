// The cluster configuration: the [dataplane] table, the bounds on waits that end in a
// clear error instead of a hang ([scheduler] cross_island_wait_ms, [executor]
// input_wait_ms and compile_wait_ms, and what held dispatches keep: held_dispatch_bytes),
// the checkpoint root, and the range of every other numeric
// key: defaults, values, and refusals that name the key.
#include <gtest/gtest.h>

#include "common/service/config.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

constexpr char kIsland[] = R"(
[[islands]]
name = "i"
  [[islands.hosts]]
  name = "h"
)";

Result<ClusterConfig> Parse(const std::string& tables) {
  return ParseClusterConfig(tables + kIsland, "test");
}

TEST(DataPlaneConfig, DefaultsBatchPerTurnWithoutAWindow) {
  auto c = Parse("");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->dataplane.batch_window_us, 0u);
  EXPECT_EQ(c->dataplane.batch_bytes, 64u << 10);
}

TEST(DataPlaneConfig, ReadsBatchBytesAndWindow) {
  auto c = Parse("[dataplane]\nbatch_bytes = 4096\nbatch_window_us = 250\n");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->dataplane.batch_bytes, 4096u);
  EXPECT_EQ(c->dataplane.batch_window_us, 250u);
}

TEST(DataPlaneConfig, RefusesValuesOutOfRange) {
  for (const char* bad : {"batch_bytes = 0", "batch_bytes = -1", "batch_bytes = 2147483648",
                          "batch_window_us = -5", "batch_window_us = 1000001"}) {
    auto c = Parse(std::string("[dataplane]\n") + bad + "\n");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << bad;
    const std::string key = std::string(bad).substr(0, std::string(bad).find(' '));
    EXPECT_NE(c.status().message().find("dataplane." + key), std::string::npos)
        << c.status().ToString();
  }
}

TEST(DataPlaneConfig, RefusesAValueOfTheWrongType) {
  auto c = Parse("[dataplane]\nbatch_window_us = \"soon\"\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("batch_window_us"), std::string::npos)
      << c.status().ToString();
}

TEST(WaitBoundsConfig, DefaultsAndValues) {
  auto defaults = Parse("");
  ASSERT_THAT(defaults, IsOk());
  EXPECT_EQ(defaults->cross_island_wait_ms, 60000u);
  EXPECT_EQ(defaults->input_wait_ms, 600000u);
  EXPECT_EQ(defaults->compile_wait_ms, 5000u);
  EXPECT_EQ(defaults->held_dispatch_bytes, 64u << 20);
  auto set = Parse(
      "[scheduler]\ncross_island_wait_ms = 250\n[executor]\ninput_wait_ms = 900\n"
      "compile_wait_ms = 40\nheld_dispatch_bytes = 4096\n");
  ASSERT_THAT(set, IsOk());
  EXPECT_EQ(set->cross_island_wait_ms, 250u);
  EXPECT_EQ(set->input_wait_ms, 900u);
  EXPECT_EQ(set->compile_wait_ms, 40u);
  EXPECT_EQ(set->held_dispatch_bytes, 4096u);
}

TEST(WaitBoundsConfig, RefusesValuesOutOfRangeNamingTheKey) {
  for (const char* bad :
       {"[scheduler]\ncross_island_wait_ms = 0", "[scheduler]\ncross_island_wait_ms = -1",
        "[scheduler]\ncross_island_wait_ms = 3600001", "[executor]\ninput_wait_ms = 0",
        "[executor]\ninput_wait_ms = -7", "[executor]\ninput_wait_ms = 86400001",
        "[executor]\ncompile_wait_ms = 0", "[executor]\ncompile_wait_ms = 600001",
        "[executor]\nheld_dispatch_bytes = 0", "[executor]\nheld_dispatch_bytes = 1073741825"}) {
    auto c = Parse(std::string(bad) + "\n");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << bad;
    const std::string key = std::string(bad).substr(std::string(bad).find('\n') + 1);
    EXPECT_NE(c.status().message().find(key.substr(0, key.find(' '))), std::string::npos)
        << c.status().ToString();
  }
}

// Found by fuzzing (tests/fuzz/config_fuzzer.cc): a config without [[islands]] read a
// destroyed temporary (an AddressSanitizer build stops there). The islands are a starting
// list, which may be empty (they join at run time), as may an island's hosts.
TEST(CheckpointConfig, TheRootIsUnsetByDefaultAndAnAbsolutePath) {
  auto c = Parse("");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->checkpoint_root, "");
  c = Parse("[checkpoints]\nroot = \"/var/lib/atoll/checkpoints\"\n");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->checkpoint_root, "/var/lib/atoll/checkpoints");
  c = Parse("[checkpoints]\nroot = \"checkpoints\"\n");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
  EXPECT_NE(c.status().message().find("checkpoints.root must be an absolute path"),
            std::string::npos)
      << c.status().ToString();
}

TEST(ClusterConfigTest, NoIslandsIsAnEmptyStartingList) {
  for (const char* text : {"", "[cluster]\nheartbeat_ms = 50\n"}) {
    auto c = ParseClusterConfig(text, "test");
    ASSERT_THAT(c, IsOk()) << text << ": " << c.status().ToString();
    EXPECT_TRUE(c->islands.empty()) << text;
  }
  auto c = ParseClusterConfig("[[islands]]\nname = \"i\"\n", "test");
  ASSERT_THAT(c, IsOk());
  ASSERT_EQ(c->islands.size(), 1u);
  EXPECT_TRUE(c->islands[0].hosts.empty());
}

TEST(ClusterConfigTest, TextThatIsNotUtf8IsInvalidArgument) {
  auto c = ParseClusterConfig(std::string(kIsland) + "  kind = 'c\xffpu'\n", "test");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
  EXPECT_NE(c.status().message().find("not UTF-8"), std::string::npos) << c.status().ToString();
}

// Every numeric key, out of its range each way it can be: negative (which an unsigned field
// would have wrapped to a huge number), zero where zero means nothing, absurdly large. The
// error names the key, the value and the range.
struct OutOfRange {
  std::string toml;  // the table and key = value
  std::string message;
};

class ConfigRangeTest : public ::testing::TestWithParam<OutOfRange> {};

TEST_P(ConfigRangeTest, IsRefusedNamingTheKeyTheValueAndTheRange) {
  const OutOfRange& bad = GetParam();
  const bool in_host = bad.toml.rfind("  ", 0) == 0;  // a key of the host table
  auto c = ParseClusterConfig(in_host ? "[[islands]]\nname = \"i\"\n  [[islands.hosts]]\n  "
                                        "name = \"h\"\n" +
                                            bad.toml + "\n"
                                      : bad.toml + "\n" + kIsland,
                              "test");
  ASSERT_FALSE(c.ok()) << bad.toml;
  EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << bad.toml;
  EXPECT_EQ(c.status().message(), bad.message) << bad.toml;
}

INSTANTIATE_TEST_SUITE_P(
    EveryNumericKey, ConfigRangeTest,
    ::testing::Values(
        OutOfRange{"[cluster]\nheartbeat_ms = 0",
                   "cluster.heartbeat_ms must be in 1..600000, not 0"},
        OutOfRange{"[cluster]\nheartbeat_ms = -500",
                   "cluster.heartbeat_ms must be in 1..600000, not -500"},
        OutOfRange{"[cluster]\nheartbeat_ms = 4294967796",
                   "cluster.heartbeat_ms must be in 1..600000, not 4294967796"},
        OutOfRange{"[cluster]\nliveness = 0", "cluster.liveness must be in 1..1000, not 0"},
        OutOfRange{"[cluster]\nliveness = -1", "cluster.liveness must be in 1..1000, not -1"},
        OutOfRange{"[scheduler]\nwindow = -1", "scheduler.window must be in 0..1048576, not -1"},
        OutOfRange{"[scheduler]\nwindow = 1048577",
                   "scheduler.window must be in 0..1048576, not 1048577"},
        OutOfRange{"  devices = 0", "host h: devices must be in 1..65536, not 0"},
        OutOfRange{"  devices = -2", "host h: devices must be in 1..65536, not -2"},
        OutOfRange{"  devices = 4294967297", "host h: devices must be in 1..65536, not 4294967297"},
        OutOfRange{"  device_memory_mb = 0",
                   "host h: device_memory_mb must be in 1..1048576, not 0"},
        OutOfRange{"  device_memory_mb = -256",
                   "host h: device_memory_mb must be in 1..1048576, not -256"},
        // 2^44 MiB would be 2^64 bytes: shifted into bytes it wraps to 0.
        OutOfRange{"  device_memory_mb = 17592186044416",
                   "host h: device_memory_mb must be in 1..1048576, not 17592186044416"},
        OutOfRange{"  arena_mb = -1", "host h: arena_mb must be in 1..1048576, not -1"},
        OutOfRange{"  arena_mb = 1048577", "host h: arena_mb must be in 1..1048576, not 1048577"},
        OutOfRange{"  matmul_threads = -1", "host h: matmul_threads must be in 0..1024, not -1"},
        OutOfRange{"  matmul_threads = 1025",
                   "host h: matmul_threads must be in 0..1024, not 1025"}));

TEST(ConfigRangeTest, TheLimitsThemselvesAreAccepted) {
  auto c = ParseClusterConfig(
      "[cluster]\nheartbeat_ms = 600000\nliveness = 1\n[scheduler]\nwindow = 1048576\n"
      "[[islands]]\nname = \"i\"\n  [[islands.hosts]]\n  name = \"h\"\n  devices = 65536\n"
      "  device_memory_mb = 1048576\n  arena_mb = 1\n  matmul_threads = 1024\n",
      "test");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->heartbeat_ms, 600000u);
  EXPECT_EQ(c->liveness, 1u);
  EXPECT_EQ(c->scheduler_window, 1048576u);
  const HostConfig& h = c->islands[0].hosts[0];
  EXPECT_EQ(h.devices, 65536u);
  EXPECT_EQ(h.device_memory_bytes, uint64_t{1} << 40);
  EXPECT_EQ(h.arena_bytes, uint64_t{1} << 20);
  EXPECT_EQ(h.matmul_threads, 1024u);
}

TEST(ConfigRangeTest, MatmulThreadsLeftOutIsZeroAnEvenShareOfTheCores) {
  auto c = Parse("");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->islands[0].hosts[0].matmul_threads, 0u);
}

TEST(ConfigRangeTest, TheShippedConfigurationsParse) {
  for (const char* path :
       {ATOLL_SOURCE_DIR "/config/local.toml", ATOLL_SOURCE_DIR "/config/test.toml"}) {
    auto c = LoadClusterConfig(path);
    EXPECT_THAT(c, IsOk()) << path << ": " << c.status().ToString();
  }
}

TEST(QuotaConfig, EveryQuotaIsUnlimitedByDefault) {
  auto c = Parse("");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->quotas.slices, 0u);
  EXPECT_EQ(c->quotas.devices, 0u);
  EXPECT_EQ(c->quotas.store_objects, 0u);
  EXPECT_EQ(c->quotas.store_bytes, 0u);
  EXPECT_EQ(c->quotas.runs_in_flight, 0u);
}

TEST(QuotaConfig, ReadsEveryQuota) {
  auto c = Parse(
      "[quotas]\nslices = 2\ndevices = 4\nstore_objects = 100\nstore_bytes = 1048576\n"
      "runs_in_flight = 8\n");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->quotas.slices, 2u);
  EXPECT_EQ(c->quotas.devices, 4u);
  EXPECT_EQ(c->quotas.store_objects, 100u);
  EXPECT_EQ(c->quotas.store_bytes, 1048576u);
  EXPECT_EQ(c->quotas.runs_in_flight, 8u);
}

TEST(QuotaConfig, RefusesValuesOutOfRangeAndUnknownQuotasNamingThem) {
  for (const char* bad : {"slices = -1", "devices = 4294967297", "store_objects = -3",
                          "store_bytes = 4611686018427387905", "runs_in_flight = -1",
                          "store_byte = 4096", "runs_in_flight = \"many\""}) {
    auto c = Parse(std::string("[quotas]\n") + bad + "\n");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << bad;
    const std::string key = std::string(bad).substr(0, std::string(bad).find(' '));
    EXPECT_NE(c.status().message().find(key), std::string::npos) << c.status().ToString();
  }
}

}  // namespace
}  // namespace atl
