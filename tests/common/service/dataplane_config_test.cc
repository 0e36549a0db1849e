// The [dataplane] table of the cluster configuration: defaults, values, and refusals that
// name the key.
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

Result<ClusterConfig> Parse(const std::string& dataplane) {
  return ParseClusterConfig(dataplane + kIsland, "test");
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

}  // namespace
}  // namespace atl
