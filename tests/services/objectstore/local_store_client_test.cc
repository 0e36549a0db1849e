// LocalStoreClient against the real atoll-objectstore process: bytes go through the store's
// shared-memory region (its arena and a device's pool), the socket carries only requests.
#include "services/objectstore/local_store_client.h"

#include <vector>

#include "tests/services/objectstore/store_process_fixture.h"

namespace atl::testing {
namespace {

using store::LocalStoreClient;

class LocalStoreClientTest : public StoreProcessTest {
 protected:
  void SetUp() override {
    StoreProcessTest::SetUp();
    ASSERT_NO_FATAL_FAILURE(StartStore(/*heartbeat_ms=*/1000, /*device_memory_mb=*/1));
    auto client = LocalStoreClient::Connect(context_, endpoint_, kCallTimeout);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }

  std::unique_ptr<LocalStoreClient> client_;
};

constexpr int32_t kDevice0 = 0;

TEST_F(LocalStoreClientTest, APutIsReadBackThroughTheRegionAndByAnyReader) {
  const std::vector<std::byte> bytes = Bytes({1, 2, 3, 4});
  ASSERT_TRUE(client_->Put(1, 0, /*owner=*/0, DType::kF32, {4}, bytes).ok());

  std::vector<std::byte> out(bytes.size());
  const Status got = client_->Get(1, 0, out, 1000ms);
  ASSERT_TRUE(got.ok()) << got.ToString();
  EXPECT_EQ(out, bytes);
  // What it wrote is the store's object, sealed, for a reader over the socket too.
  auto store = Connect();
  net::Frames data;
  auto reply = Get(*store, 1, 0, &data);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(FrameBytes(data[0]), bytes);
}

TEST_F(LocalStoreClientTest, ACopyMovesAShardIntoADevicesMemoryAndBack) {
  const std::vector<std::byte> bytes = Bytes({5, 6, 7});
  ASSERT_TRUE(client_->Put(1, 0, 0, DType::kF32, {3}, bytes).ok());
  ASSERT_TRUE(client_->Copy(1, 0, /*to=*/2, /*owner=*/0, kDevice0).ok());
  ASSERT_TRUE(client_->Copy(2, 0, /*to=*/3, 0, proto::CreateObject::kHost).ok());
  for (uint64_t object : {2, 3}) {
    std::vector<std::byte> out(bytes.size());
    const Status got = client_->Get(object, 0, out, 1000ms);
    ASSERT_TRUE(got.ok()) << "object " << object << ": " << got.ToString();
    EXPECT_EQ(out, bytes) << "object " << object;
  }
}

TEST_F(LocalStoreClientTest, AReadOfTheWrongSizeOrOfAReleasedObjectFailsNamingIt) {
  ASSERT_TRUE(client_->Put(1, 0, 0, DType::kF32, {2}, Bytes({1, 2})).ok());
  std::vector<std::byte> wrong(4);
  const Status mismatched = client_->Get(1, 0, wrong, 1000ms);
  EXPECT_EQ(mismatched.code(), Code::kInvalidArgument);
  EXPECT_NE(mismatched.message().find("object 1 shard 0 has 8 bytes, not 4"), std::string::npos)
      << mismatched.ToString();

  ASSERT_TRUE(client_->Release(1).ok());
  std::vector<std::byte> out(8);
  const Status gone = client_->Get(1, 0, out, 100ms);
  EXPECT_FALSE(gone.ok());
  EXPECT_NE(gone.message().find("object 1"), std::string::npos) << gone.ToString();
}

TEST_F(LocalStoreClientTest, APutWhoseBytesDoNotMatchItsShapeIsRefusedAndCreatesNothing) {
  const Status put = client_->Put(1, 0, 0, DType::kF32, {4}, Bytes({1, 2}));
  EXPECT_EQ(put.code(), Code::kInvalidArgument) << put.ToString();
  EXPECT_NE(put.message().find("8 bytes for a shard of 16"), std::string::npos) << put.ToString();
  std::vector<std::byte> out(16);
  EXPECT_EQ(client_->Get(1, 0, out, 0ms).code(), Code::kNotFound);
}

}  // namespace
}  // namespace atl::testing
