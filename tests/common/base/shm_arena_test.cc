#include "common/base/shm_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <gtest/gtest.h>
#include "tests/status_matchers.h"

namespace atl {
namespace {

TEST(ShmRegionTest, MakeNameIsUniquePerProcessAndSafe) {
  const std::string name = ShmRegion::MakeName("host/a b");
  EXPECT_EQ(name.rfind("/atoll-host_a_b-", 0), 0u) << name;
  EXPECT_EQ(name.find('/', 1), std::string::npos);
}

TEST(ShmRegionTest, OpenSeesTheCreatorsBytesAndCreatorUnlinks) {
  const std::string name = ShmRegion::MakeName("shm-test");
  {
    auto created = ShmRegion::Create(name, 1 << 20);
    ASSERT_THAT(created, IsOk());
    EXPECT_TRUE(created->is_creator());
    EXPECT_EQ(created->size(), 1u << 20);
    EXPECT_EQ(ShmRegion::Create(name, 4096).status().code(), Code::kUnavailable);  // O_EXCL

    auto opened = ShmRegion::Open(name);
    ASSERT_THAT(opened, IsOk());
    EXPECT_FALSE(opened->is_creator());
    EXPECT_EQ(opened->size(), 1u << 20);
    std::memcpy(created->data() + 100, "hello", 5);
    EXPECT_EQ(std::memcmp(opened->data() + 100, "hello", 5), 0);
    auto slice = opened->Slice(100, 5);
    ASSERT_THAT(slice, IsOk());
    slice->data()[0] = std::byte{'j'};
    EXPECT_EQ(std::memcmp(created->data() + 100, "jello", 5), 0);

    // Moving keeps one owner of the mapping and of the name.
    ShmRegion moved = std::move(*opened);
    EXPECT_EQ(moved.name(), name);
    EXPECT_EQ(std::memcmp(moved.data() + 100, "jello", 5), 0);
  }
  EXPECT_EQ(ShmRegion::Open(name).status().code(), Code::kNotFound);
}

TEST(ShmRegionTest, SliceChecksBoundsWithoutOverflow) {
  auto region = ShmRegion::Create(ShmRegion::MakeName("shm-slice"), 4096);
  ASSERT_THAT(region, IsOk());
  EXPECT_THAT(region->Slice(0, 4096), IsOk());
  EXPECT_THAT(region->Slice(4096, 0), IsOk());
  EXPECT_EQ(region->Slice(4000, 97).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(region->Slice(4097, 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(region->Slice(8, UINT64_MAX).status().code(), Code::kInvalidArgument);
}

TEST(ShmRegionTest, BadNamesAndSizesAreRejected) {
  EXPECT_EQ(ShmRegion::Create("no-slash", 64).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ShmRegion::Create("/a/b", 64).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ShmRegion::Create(ShmRegion::MakeName("zero"), 0).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(ShmRegion::Open(ShmRegion::MakeName("never-created")).status().code(), Code::kNotFound);
}

// Creates `name` in a child process that then dies without unlinking it, as a store killed
// with SIGKILL does.
void CreateInADyingProcess(const std::string& name) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto region = ShmRegion::Create(name, 1 << 16);
    _exit(region.ok() ? 0 : 1);  // no destructors: the name stays
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_THAT(ShmRegion::Open(name), IsOk()) << name << " was not left behind";
}

TEST(ShmRegionTest, CreateReplacesAnObjectItsDeadCreatorLeftUnderTheSameName) {
  // A container's restarted store: /dev/shm kept, the same pid again, so the same name.
  const std::string name = ShmRegion::MakeName("shm-reuse");
  CreateInADyingProcess(name);
  auto created = ShmRegion::Create(name, 4096);
  ASSERT_THAT(created, IsOk());
  EXPECT_EQ(created->size(), 4096u);
  // A live creator's name is not taken over.
  const Status taken = ShmRegion::Create(name, 4096).status();
  EXPECT_EQ(taken.code(), Code::kUnavailable);
  EXPECT_NE(taken.message().find("in use by a live process"), std::string::npos)
      << taken.ToString();
}

TEST(ShmRegionTest, RemoveAbandonedRemovesOnlyTheTagsObjectsWhoseCreatorsDied) {
  const std::string tag = "shm-abandon-" + std::to_string(getpid());
  const std::string dead = "/atoll-" + tag + "-1";
  const std::string other_tag = "/atoll-" + tag + "-x-1";  // tag "<tag>-x", not "<tag>"
  CreateInADyingProcess(dead);
  CreateInADyingProcess(other_tag);
  auto live = ShmRegion::Create(ShmRegion::MakeName(tag), 4096);
  ASSERT_THAT(live, IsOk());
  // Made but not sized yet, as by a Create still under way in another process.
  const std::string unsized = "/atoll-" + tag + "-2";
  const int fd = shm_open(unsized.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  close(fd);

  EXPECT_EQ(ShmRegion::RemoveAbandoned(tag), std::vector<std::string>{dead});
  EXPECT_EQ(ShmRegion::Open(dead).status().code(), Code::kNotFound);
  EXPECT_THAT(ShmRegion::Open(live->name()), IsOk());
  EXPECT_EQ(ShmRegion::Open(unsized).status().code(), Code::kUnavailable);  // still there, empty
  EXPECT_THAT(ShmRegion::Open(other_tag), IsOk());
  EXPECT_EQ(ShmRegion::RemoveAbandoned(tag + "-x"), std::vector<std::string>{other_tag});
  shm_unlink(unsized.c_str());
}

TEST(ShmRegionTest, FreeBytesSaysWhatIsLeftWhereObjectsLive) {
  auto free = ShmRegion::FreeBytes();
  ASSERT_THAT(free, IsOk());
  EXPECT_GT(*free, 0u);
}

}  // namespace
}  // namespace atl
