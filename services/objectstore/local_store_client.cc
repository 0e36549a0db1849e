#include "services/objectstore/local_store_client.h"

#include <cstring>
#include <functional>

#include <fmt/format.h>

#include "services/objectstore/directory.h"

namespace atl::store {

LocalStoreClient::LocalStoreClient(zmq::context_t& context, const std::string& endpoint)
    : store_(context, endpoint) {}

Result<std::unique_ptr<LocalStoreClient>> LocalStoreClient::Connect(
    zmq::context_t& context, const std::string& endpoint, std::chrono::milliseconds timeout) {
  std::unique_ptr<LocalStoreClient> client(new LocalStoreClient(context, endpoint));
  client->timeout_ = timeout;
  ATOLL_RETURN_IF_ERROR(client->store_.Connect());
  ATOLL_ASSIGN_OR_RETURN(auto hello,
                         client->store_.Call<proto::StoreHelloReply>(proto::StoreHello{}, timeout));
  ATOLL_ASSIGN_OR_RETURN(ShmRegion region, ShmRegion::Open(hello.arena_name));
  client->region_ = std::make_unique<ShmRegion>(std::move(region));
  return client;
}

Status LocalStoreClient::CreateFilled(const proto::CreateObject& create,
                                      const std::function<void(std::byte*, uint64_t)>& fill) {
  ATOLL_ASSIGN_OR_RETURN(auto created, store_.Call<proto::CreateObjectReply>(create, timeout_));
  ATOLL_ASSIGN_OR_RETURN(auto span, region_->Slice(created.offset, created.nbytes));
  fill(span.data(), span.size());
  return store_.Call<proto::Ok>(proto::SealObject{create.object_id, create.shard, 0, ""}, timeout_)
      .status();
}

Status LocalStoreClient::Put(uint64_t object, uint32_t shard, uint64_t owner, DType dtype,
                             const Shape& shape, std::span<const std::byte> bytes, int32_t device) {
  // Checked before anything is reserved: a shard filled in part would be sealed as if whole.
  ATOLL_ASSIGN_OR_RETURN(const uint64_t nbytes, Directory::ShardBytes(dtype, shape));
  if (bytes.size() != nbytes) {
    return InvalidArgument(fmt::format("object {} shard {}: {} bytes for a shard of {}", object,
                                       shard, bytes.size(), nbytes));
  }
  return CreateFilled({object, shard, owner, dtype, shape, device}, [&](std::byte* dst, uint64_t) {
    if (nbytes > 0) std::memcpy(dst, bytes.data(), nbytes);  // empty: null
  });
}

Status LocalStoreClient::Get(uint64_t object, uint32_t shard, std::span<std::byte> out,
                             std::chrono::milliseconds timeout) {
  ATOLL_ASSIGN_OR_RETURN(
      auto reply,
      store_.Call<proto::GetObjectReply>(
          proto::GetObject{object, shard, static_cast<uint32_t>(timeout.count()), false},
          timeout + timeout_));
  if (reply.nbytes != out.size()) {
    return InvalidArgument("object " + std::to_string(object) + " shard " + std::to_string(shard) +
                           " has " + std::to_string(reply.nbytes) + " bytes, not " +
                           std::to_string(out.size()));
  }
  ATOLL_ASSIGN_OR_RETURN(auto span, std::as_const(*region_).Slice(reply.offset, reply.nbytes));
  if (!span.empty()) std::memcpy(out.data(), span.data(), span.size());
  return Status::Ok();
}

Status LocalStoreClient::Copy(uint64_t from, uint32_t shard, uint64_t to, uint64_t owner,
                              int32_t device) {
  ATOLL_ASSIGN_OR_RETURN(auto reply, store_.Call<proto::GetObjectReply>(
                                         proto::GetObject{from, shard, 0, false}, timeout_));
  ATOLL_ASSIGN_OR_RETURN(auto source, std::as_const(*region_).Slice(reply.offset, reply.nbytes));
  return CreateFilled({to, shard, owner, reply.dtype, reply.shape, device},
                      [&](std::byte* dst, uint64_t nbytes) {
                        const uint64_t n = std::min<uint64_t>(nbytes, source.size());
                        if (n > 0) std::memcpy(dst, source.data(), n);
                      });
}

Status LocalStoreClient::Release(uint64_t object) {
  return store_.Call<proto::Ok>(proto::ReleaseObject{object}, timeout_).status();
}

}  // namespace atl::store
