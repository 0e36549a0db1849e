#include "common/base/shm_arena.h"

#include <cstring>

#include <gtest/gtest.h>

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
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    EXPECT_TRUE(created->is_creator());
    EXPECT_EQ(created->size(), 1u << 20);
    EXPECT_EQ(ShmRegion::Create(name, 4096).status().code(), Code::kUnavailable);  // O_EXCL

    auto opened = ShmRegion::Open(name);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    EXPECT_FALSE(opened->is_creator());
    EXPECT_EQ(opened->size(), 1u << 20);
    std::memcpy(created->data() + 100, "hello", 5);
    EXPECT_EQ(std::memcmp(opened->data() + 100, "hello", 5), 0);
    auto slice = opened->Slice(100, 5);
    ASSERT_TRUE(slice.ok());
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
  ASSERT_TRUE(region.ok()) << region.status().ToString();
  EXPECT_TRUE(region->Slice(0, 4096).ok());
  EXPECT_TRUE(region->Slice(4096, 0).ok());
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

}  // namespace
}  // namespace atl
