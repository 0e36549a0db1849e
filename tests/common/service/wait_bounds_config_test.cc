// The bounds on waits that end in a clear error instead of a hang: the scheduler's
// [scheduler] cross_island_wait_ms and the executor's [executor] input_wait_ms.
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

TEST(WaitBoundsConfig, DefaultsAndValues) {
  auto defaults = ParseClusterConfig(kIsland, "test");
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->cross_island_wait_ms, 60000u);
  EXPECT_EQ(defaults->input_wait_ms, 600000u);
  auto set = ParseClusterConfig(
      std::string("[scheduler]\ncross_island_wait_ms = 250\n[executor]\ninput_wait_ms = 900\n") +
          kIsland,
      "test");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->cross_island_wait_ms, 250u);
  EXPECT_EQ(set->input_wait_ms, 900u);
}

TEST(WaitBoundsConfig, RefusesValuesOutOfRangeNamingTheKey) {
  for (const char* bad :
       {"[scheduler]\ncross_island_wait_ms = 0", "[scheduler]\ncross_island_wait_ms = -1",
        "[scheduler]\ncross_island_wait_ms = 3600001", "[executor]\ninput_wait_ms = 0",
        "[executor]\ninput_wait_ms = -7", "[executor]\ninput_wait_ms = 86400001"}) {
    auto c = ParseClusterConfig(std::string(bad) + "\n" + kIsland, "test");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << bad;
    const std::string key = std::string(bad).substr(std::string(bad).find('\n') + 1);
    EXPECT_NE(c.status().message().find(key.substr(0, key.find(' '))), std::string::npos)
        << c.status().ToString();
  }
}

}  // namespace
}  // namespace atl
