// The object store's checkpoint requests on the real binary: shards and values written as
// .npy files below its checkpoint root, nothing that looks complete before the index, the
// index written last, files read back into new objects, and every refusal: paths that leave
// the root, other clients' objects, unsealed shards, missing and corrupt files.
#include <sys/stat.h>

#include "common/checkpoint/index.h"
#include "common/checkpoint/npy.h"
#include "common/proto/ids.h"
#include "services/objectstore/checkpoint_dir.h"
#include "tests/services/objectstore/store_process_fixture.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

constexpr uint64_t kClient = 7;
const uint64_t kObject = proto::MakeObjectId(kClient, 1);

class StoreCheckpointTest : public StoreProcessTest {
 protected:
  void SetUp() override {
    StoreProcessTest::SetUp();
    StartStore();
    store_ = Connect();
    ASSERT_THAT(Put(*store_, kObject, kClient, {1, 2, 3, 4, 5, 6}), IsOk());
  }

  Result<proto::SaveShardsReply> Save(const std::string& dir, const std::string& file,
                                      uint64_t object = kObject, uint64_t owner = kClient) {
    return store_->Call<proto::SaveShardsReply>(
        proto::SaveShards{owner, dir, {{object, 0, file}}, {}}, kCallTimeout);
  }

  // The index of a checkpoint holding the f32[6] of kObject as `file`, as Save wrote it.
  static std::string IndexOf(const std::string& file, const proto::FileWritten& written) {
    checkpoint::Index index;
    index.tensors.push_back(
        {"w", DType::kF32, {6}, {1}, {-1}, {{file, {0}, {6}, written.bytes, written.crc32, "h0"}}});
    return checkpoint::IndexToJson(index);
  }

  Status Commit(const std::string& dir, const std::string& index, std::vector<std::string> files) {
    return store_
        ->Call<proto::Ok>(proto::CommitCheckpoint{kClient, dir, index, std::move(files)},
                          kCallTimeout)
        .status();
  }

  // Loads the whole of `file` (f32[6]) as shard 0 of a new object of the client's.
  Status Load(const std::string& dir, const proto::FileWritten& file, uint64_t object) {
    proto::FilePiece piece{file.file, file.bytes, file.crc32, {6}, {0}, {6}, {0}};
    return store_
        ->Call<proto::Ok>(proto::LoadShards{kClient, dir, {{object, 0, DType::kF32, {6}, {piece}}}},
                          kCallTimeout)
        .status();
  }

  std::string PathOf(const std::string& relative) const {
    return checkpoint_root() + "/" + relative;
  }

  uint64_t Objects() {
    auto stats = store_->Call<proto::StoreStats>(proto::GetStoreStats{}, kCallTimeout);
    EXPECT_THAT(stats, IsOk());
    return stats.ok() ? stats->objects : 0;
  }

  std::unique_ptr<net::Requester> store_;
};

std::vector<std::byte> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

TEST_F(StoreCheckpointTest, ShardsAndValuesAreWrittenAsNpyAndTheCheckpointIsWholeOnlyAtCommit) {
  const std::vector<std::byte> step = {std::byte{9}, std::byte{0}, std::byte{0}, std::byte{0}};
  auto saved = store_->Call<proto::SaveShardsReply>(
      proto::SaveShards{
          kClient, "runs/a", {{kObject, 0, "w.0.t1.npy"}}, {{"step.0.t1.npy", DType::kI32, {}}}},
      kCallTimeout, DataFrame(step));
  ASSERT_THAT(saved, IsOk());
  ASSERT_EQ(saved->files.size(), 2u);
  EXPECT_EQ(saved->files[0].file, "w.0.t1.npy");
  EXPECT_TRUE(WaitForEvent("checkpoint.written", "owner", kClient, 2s).has_value());

  const auto w = checkpoint::ParseNpy(ReadFile(PathOf("runs/a/w.0.t1.npy")));
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ(*w, Tensor::F32({6}, {1, 2, 3, 4, 5, 6}));
  const auto s = checkpoint::ParseNpy(ReadFile(PathOf("runs/a/step.0.t1.npy")));
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(*s, Tensor::I32({}, {9}));
  EXPECT_EQ(saved->files[0].bytes, ReadFile(PathOf("runs/a/w.0.t1.npy")).size());

  // Written but not committed: no index, so no checkpoint.
  auto index = store_->Call<proto::CheckpointIndexText>(
      proto::ReadCheckpointIndex{kClient, "runs/a"}, kCallTimeout);
  EXPECT_EQ(index.status().code(), Code::kNotFound) << index.status().ToString();
  EXPECT_NE(index.status().message().find("no complete checkpoint"), std::string::npos);

  const std::string text = IndexOf("w.0.t1.npy", saved->files[0]);
  ASSERT_THAT(Commit("runs/a", text, {"w.0.t1.npy", "step.0.t1.npy"}), IsOk());
  index = store_->Call<proto::CheckpointIndexText>(proto::ReadCheckpointIndex{kClient, "runs/a"},
                                                   kCallTimeout);
  ASSERT_THAT(index, IsOk());
  EXPECT_EQ(index->index, text);

  // Read back into a new object of the client's.
  const uint64_t loaded = proto::MakeObjectId(kClient, 2);
  ASSERT_THAT(Load("runs/a", saved->files[0], loaded), IsOk());
  net::Frames data;
  auto got = Get(*store_, loaded, 0, &data);
  ASSERT_THAT(got, IsOk());
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(FrameBytes(data[0]), Bytes({1, 2, 3, 4, 5, 6}));
}

TEST_F(StoreCheckpointTest, PathsThatLeaveTheRootAreRefusedAndWriteNothing) {
  const std::string outside = dir_ + "/outside";
  std::filesystem::create_directories(outside);
  std::filesystem::create_directories(checkpoint_root());
  std::filesystem::create_directory_symlink(outside, PathOf("link"));
  const struct {
    std::string dir;
    Code code;
  } cases[] = {
      {"", Code::kInvalidArgument},
      {"/tmp/x", Code::kInvalidArgument},
      {outside, Code::kInvalidArgument},
      {".", Code::kInvalidArgument},
      {"..", Code::kPermissionDenied},
      {"../outside", Code::kPermissionDenied},
      {"a/../../outside", Code::kPermissionDenied},
      {"link", Code::kPermissionDenied},
      {"link/deeper", Code::kPermissionDenied},
  };
  for (const auto& c : cases) {
    auto saved = Save(c.dir, "w.0.t1.npy");
    EXPECT_EQ(saved.status().code(), c.code) << "'" << c.dir << "': " << saved.status().ToString();
    auto read = store_->Call<proto::CheckpointIndexText>(proto::ReadCheckpointIndex{kClient, c.dir},
                                                         kCallTimeout);
    EXPECT_FALSE(read.ok()) << "'" << c.dir << "'";
  }
  // A file name is a name, not a path.
  for (const std::string file : {"../w.npy", "a/w.npy", ".hidden.npy", "", "index.json"}) {
    auto saved = Save("ok", file);
    EXPECT_EQ(saved.status().code(), Code::kInvalidArgument) << file;
  }
  // A link inside a checkpoint is not followed either.
  auto saved = Save("good", "w.0.t1.npy");
  ASSERT_THAT(saved, IsOk());
  std::filesystem::rename(PathOf("good/w.0.t1.npy"), outside + "/w.npy");
  std::filesystem::create_symlink(outside + "/w.npy", PathOf("good/w.0.t1.npy"));
  EXPECT_EQ(Load("good", saved->files[0], proto::MakeObjectId(kClient, 3)).code(),
            Code::kPermissionDenied);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(outside), {}), 1)
      << "only the file this test moved there";
}

TEST_F(StoreCheckpointTest, AClientSavesOnlyItsOwnSealedObjects) {
  const uint64_t theirs = proto::MakeObjectId(kClient + 1, 1);
  ASSERT_THAT(Put(*store_, theirs, kClient + 1, {1}), IsOk());
  auto saved = Save("mine", "w.0.t1.npy", theirs, kClient);
  EXPECT_EQ(saved.status().code(), Code::kPermissionDenied) << saved.status().ToString();
  EXPECT_NE(saved.status().message().find("own objects"), std::string::npos);
  // Reserved, not written yet: nothing to save.
  const uint64_t unsealed = proto::MakeObjectId(kClient, 5);
  ASSERT_THAT(store_->Call<proto::CreateObjectReply>(
                  proto::CreateObject{unsealed, 0, kClient, DType::kF32, {4}, -1}, kCallTimeout),
              IsOk());
  saved = Save("mine", "u.0.t1.npy", unsealed);
  EXPECT_EQ(saved.status().code(), Code::kFailedPrecondition) << saved.status().ToString();
  saved = Save("mine", "x.0.t1.npy", proto::MakeObjectId(kClient, 99));
  EXPECT_EQ(saved.status().code(), Code::kNotFound) << saved.status().ToString();
}

TEST_F(StoreCheckpointTest, MissingAndCorruptFilesAreRefusedAndALoadThatFailsLeavesNothing) {
  auto saved = Save("c", "w.0.t1.npy");
  ASSERT_THAT(saved, IsOk());
  ASSERT_THAT(Commit("c", IndexOf("w.0.t1.npy", saved->files[0]), {"w.0.t1.npy"}), IsOk());
  const proto::FileWritten good = saved->files[0];
  const uint64_t before = Objects();
  const uint64_t object = proto::MakeObjectId(kClient, 10);

  // A byte of the data flipped: the CRC-32 tells.
  std::vector<std::byte> bytes = ReadFile(PathOf("c/w.0.t1.npy"));
  bytes.back() ^= std::byte{1};
  std::ofstream(PathOf("c/w.0.t1.npy"), std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  Status load = Load("c", good, object);
  EXPECT_EQ(load.code(), Code::kInvalidArgument) << load.ToString();
  EXPECT_NE(load.message().find("corrupt"), std::string::npos) << load.ToString();

  // Truncated, with the index's CRC matching what is there: the header tells.
  bytes.resize(bytes.size() - 4);
  std::ofstream(PathOf("c/w.0.t1.npy"), std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  load = Load("c", {good.file, bytes.size(), store::Crc32(bytes)}, object);
  EXPECT_EQ(load.code(), Code::kInvalidArgument) << load.ToString();
  EXPECT_NE(load.message().find("truncated"), std::string::npos) << load.ToString();

  std::filesystem::remove(PathOf("c/w.0.t1.npy"));
  load = Load("c", good, object);
  EXPECT_EQ(load.code(), Code::kNotFound) << load.ToString();
  load = Load("nothing-here", good, object);
  EXPECT_EQ(load.code(), Code::kNotFound) << load.ToString();
  EXPECT_EQ(Objects(), before);

  // An index that does not parse is never written as one.
  EXPECT_EQ(Commit("c", "{not json", {}).code(), Code::kInvalidArgument);
}

TEST_F(StoreCheckpointTest, SavingOverKeepsTheOldCheckpointWholeUntilTheNewIndex) {
  auto first = Save("over", "w.0.t1.npy");
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(Commit("over", IndexOf("w.0.t1.npy", first->files[0]), {"w.0.t1.npy"}), IsOk());
  auto second = Save("over", "w.0.t2.npy");
  ASSERT_THAT(second, IsOk());
  // Until the new index: the old one, and its files, are there.
  EXPECT_TRUE(std::filesystem::exists(PathOf("over/w.0.t1.npy")));
  ASSERT_THAT(Load("over", first->files[0], proto::MakeObjectId(kClient, 20)), IsOk());
  ASSERT_THAT(Commit("over", IndexOf("w.0.t2.npy", second->files[0]), {"w.0.t2.npy"}), IsOk());
  EXPECT_FALSE(std::filesystem::exists(PathOf("over/w.0.t1.npy")));
  EXPECT_TRUE(std::filesystem::exists(PathOf("over/w.0.t2.npy")));
  EXPECT_TRUE(WaitForEvent("checkpoint.committed", "stale_files_removed", 1, 2s).has_value());
}

}  // namespace
}  // namespace atl::testing
