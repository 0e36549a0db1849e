// The cluster configuration: the [dataplane] table, and the bounds on waits that end in a
// clear error instead of a hang ([scheduler] cross_island_wait_ms, [executor]
// input_wait_ms): defaults, values, and refusals that name the key.
#include <gtest/gtest.h>

#include "common/service/config.h"

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
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->dataplane.batch_window_us, 0u);
  EXPECT_EQ(c->dataplane.batch_bytes, 64u << 10);
}

TEST(DataPlaneConfig, ReadsBatchBytesAndWindow) {
  auto c = Parse("[dataplane]\nbatch_bytes = 4096\nbatch_window_us = 250\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
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
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->cross_island_wait_ms, 60000u);
  EXPECT_EQ(defaults->input_wait_ms, 600000u);
  auto set = Parse("[scheduler]\ncross_island_wait_ms = 250\n[executor]\ninput_wait_ms = 900\n");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->cross_island_wait_ms, 250u);
  EXPECT_EQ(set->input_wait_ms, 900u);
}

TEST(WaitBoundsConfig, RefusesValuesOutOfRangeNamingTheKey) {
  for (const char* bad :
       {"[scheduler]\ncross_island_wait_ms = 0", "[scheduler]\ncross_island_wait_ms = -1",
        "[scheduler]\ncross_island_wait_ms = 3600001", "[executor]\ninput_wait_ms = 0",
        "[executor]\ninput_wait_ms = -7", "[executor]\ninput_wait_ms = 86400001"}) {
    auto c = Parse(std::string(bad) + "\n");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << bad;
    const std::string key = std::string(bad).substr(std::string(bad).find('\n') + 1);
    EXPECT_NE(c.status().message().find(key.substr(0, key.find(' '))), std::string::npos)
        << c.status().ToString();
  }
}

// Found by fuzzing (tests/fuzz/config_fuzzer.cc): a config without [[islands]] read a
// destroyed temporary (an AddressSanitizer build stops there).
TEST(ClusterConfigTest, NoIslandsIsInvalidArgument) {
  for (const char* text : {"", "[cluster]\nheartbeat_ms = 50\n", "[[islands]]\nname = \"i\"\n"}) {
    auto c = ParseClusterConfig(text, "test");
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << text;
  }
}

TEST(ClusterConfigTest, TextThatIsNotUtf8IsInvalidArgument) {
  auto c = ParseClusterConfig(std::string(kIsland) + "  kind = 'c\xffpu'\n", "test");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
  EXPECT_NE(c.status().message().find("not UTF-8"), std::string::npos) << c.status().ToString();
}

TEST(ClusterConfigTest, SizesThatOverflowInBytesAreRefused) {
  for (const char* key : {"device_memory_mb", "arena_mb"}) {
    auto c =
        ParseClusterConfig(std::string(kIsland) + "  " + key + " = 9223372036854775807\n", "test");
    ASSERT_FALSE(c.ok()) << key;
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
    EXPECT_NE(c.status().message().find(key), std::string::npos) << c.status().ToString();
  }
}

}  // namespace
}  // namespace atl
