// The event schema (common/net/event_topics.def): topics unique, every topic and field
// documented in docs/events.md, and the check that holds publishers to the table.
#include "common/net/event_topics.h"

#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include "tests/status_matchers.h"

namespace atl::topics {
namespace {

std::vector<std::string> Split(std::string_view fields) {
  std::vector<std::string> out;
  std::istringstream in{std::string(fields)};
  for (std::string f; in >> f;) out.push_back(f);
  return out;
}

TEST(EventTopicsTest, TopicsAreUniqueAndNamedByTheirConstants) {
  std::set<std::string_view> seen;
  for (const Topic& t : AllTopics()) {
    EXPECT_TRUE(seen.insert(t.name).second) << t.name << " has two rows";
    EXPECT_NE(t.name.find('.'), std::string_view::npos) << t.name << ": topics are area.what";
    EXPECT_FALSE(t.source.empty()) << t.name;
    EXPECT_FALSE(t.meaning.empty()) << t.name;
  }
  EXPECT_EQ(kHostLost, "host.lost");
  ASSERT_NE(FindTopic(kStoreStats), nullptr);
  EXPECT_EQ(FindTopic(kStoreStats)->source, "objectstore");
  EXPECT_EQ(FindTopic("no.such"), nullptr);
}

TEST(EventTopicsTest, EveryTopicAndFieldIsDocumented) {
  std::ifstream in(ATOLL_SOURCE_DIR "/docs/events.md");
  ASSERT_TRUE(in) << "docs/events.md is missing";
  std::ostringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  for (const Topic& t : AllTopics()) {
    const std::string row = "| `" + std::string(t.name) + "` |";
    const size_t at = doc.find(row);
    ASSERT_NE(at, std::string::npos) << "docs/events.md has no row for " << t.name;
    const std::string line = doc.substr(at, doc.find('\n', at) - at);
    for (const std::string& field : Split(t.fields)) {
      EXPECT_NE(line.find("`" + field + "`"), std::string::npos)
          << "docs/events.md's row of " << t.name << " does not list its field " << field;
    }
  }
}

TEST(EventTopicsTest, EventsAreCheckedAgainstTheirRow) {
  EXPECT_THAT(CheckEventKeys(kStoreStats, {"host", "objects", "ts_us", "src"}), IsOk());
  EXPECT_THAT(CheckEventKeys(kNetStats, {"pid", "GetObject.msgs", "GetObject.bytes"}), IsOk());

  const Status unknown = CheckEventKeys("store.nonsense", {"host"});
  EXPECT_EQ(unknown.code(), Code::kInvalidArgument);
  EXPECT_NE(unknown.message().find("'store.nonsense'"), std::string::npos) << unknown.message();

  const Status extra = CheckEventKeys(kHostLost, {"host", "colour"});
  EXPECT_EQ(extra.code(), Code::kInvalidArgument);
  EXPECT_NE(extra.message().find("'colour'"), std::string::npos) << extra.message();
  EXPECT_EQ(CheckEventKeys(kNetStats, {"GetObject.count"}).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace atl::topics
