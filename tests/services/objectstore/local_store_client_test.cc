// LocalStoreClient against the real atoll-objectstore process: bytes go through the store's
// shared-memory region (its arena and a device's pool), the socket carries only requests.
#include "services/objectstore/local_store_client.h"

#include <vector>

#include "tests/services/objectstore/store_process_fixture.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using store::LocalStoreClient;

class LocalStoreClientTest : public StoreProcessTest {
 protected:
  void SetUp() override {
    StoreProcessTest::SetUp();
    ASSERT_NO_FATAL_FAILURE(StartStore(/*heartbeat_ms=*/1000, /*device_memory_mb=*/1));
    auto client = LocalStoreClient::Connect(context_, endpoint_, kCallTimeout);
    ASSERT_THAT(client, IsOk());
    client_ = std::move(*client);
  }

  std::unique_ptr<LocalStoreClient> client_;
};

constexpr int32_t kDevice0 = 0;

TEST_F(LocalStoreClientTest, APutIsReadBackThroughTheRegionAndByAnyReader) {
  const std::vector<std::byte> bytes = Bytes({1, 2, 3, 4});
  ASSERT_THAT(client_->Put(1, 0, /*owner=*/0, DType::kF32, {4}, bytes), IsOk());

  std::vector<std::byte> out(bytes.size());
  const Status got = client_->Get(1, 0, out, 1000ms);
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(out, bytes);
  // What it wrote is the store's object, sealed, for a reader over the socket too.
  auto store = Connect();
  net::Frames data;
  auto reply = Get(*store, 1, 0, &data);
  ASSERT_THAT(reply, IsOk());
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(FrameBytes(data[0]), bytes);
}

TEST_F(LocalStoreClientTest, ACopyMovesAShardIntoADevicesMemoryAndBack) {
  const std::vector<std::byte> bytes = Bytes({5, 6, 7});
  ASSERT_THAT(client_->Put(1, 0, 0, DType::kF32, {3}, bytes), IsOk());
  ASSERT_THAT(client_->Copy(1, 0, /*to=*/2, /*owner=*/0, kDevice0), IsOk());
  ASSERT_THAT(client_->Copy(2, 0, /*to=*/3, 0, proto::CreateObject::kHost), IsOk());
  for (uint64_t object : {2, 3}) {
    std::vector<std::byte> out(bytes.size());
    const Status got = client_->Get(object, 0, out, 1000ms);
    ASSERT_THAT(got, IsOk()) << "object " << object;
    EXPECT_EQ(out, bytes) << "object " << object;
  }
}

TEST_F(LocalStoreClientTest, AReadOfTheWrongSizeOrOfAReleasedObjectFailsNamingIt) {
  ASSERT_THAT(client_->Put(1, 0, 0, DType::kF32, {2}, Bytes({1, 2})), IsOk());
  std::vector<std::byte> wrong(4);
  EXPECT_THAT(client_->Get(1, 0, wrong, 1000ms),
              StatusIs(Code::kInvalidArgument, "object 1 shard 0 has 8 bytes, not 4"));

  ASSERT_THAT(client_->Release(1), IsOk());
  std::vector<std::byte> out(8);
  // Waited for, since the store cannot tell a freed object from one not created yet.
  EXPECT_THAT(client_->Get(1, 0, out, 100ms), StatusIs(Code::kDeadlineExceeded, "object 1"));
}

TEST_F(LocalStoreClientTest, APutWhoseBytesDoNotMatchItsShapeIsRefusedAndCreatesNothing) {
  EXPECT_THAT(client_->Put(1, 0, 0, DType::kF32, {4}, Bytes({1, 2})),
              StatusIs(Code::kInvalidArgument, "8 bytes for a shard of 16"));
  std::vector<std::byte> out(16);
  EXPECT_THAT(client_->Get(1, 0, out, 0ms), StatusIs(Code::kNotFound, "object 1"));
}

}  // namespace
}  // namespace atl::testing
