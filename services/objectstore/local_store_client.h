// LocalStoreClient: puts, gets and moves object shards through a host's object store from a
// process on the same host, copying the bytes through the store's shared-memory region (its
// arena and device pools), never through the socket: the socket carries only the small
// Create / Seal / Get messages. For local clients, benchmarks and tools; a process on
// another machine uses PutObject / GetObject with the bytes inline.
//
// Not thread-safe: one thread uses a client.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include <zmq.hpp>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/base/shm_arena.h"
#include "common/net/transport.h"
#include "common/proto/protocol.h"

namespace atl::store {

class LocalStoreClient {
 public:
  // Connects to the store at `endpoint` and maps its region (bounded by `timeout`).
  [[nodiscard]] static Result<std::unique_ptr<LocalStoreClient>> Connect(
      zmq::context_t& context, const std::string& endpoint, std::chrono::milliseconds timeout);

  // Creates shard `shard` of `object` in `device`'s memory (proto::CreateObject::kHost: the
  // arena), copies `bytes` into it and seals it. InvalidArgument, with nothing created, when
  // `bytes` is not exactly the shard's size.
  [[nodiscard]] Status Put(uint64_t object, uint32_t shard, uint64_t owner, DType dtype,
                           const Shape& shape, std::span<const std::byte> bytes,
                           int32_t device = proto::CreateObject::kHost);
  // Copies the sealed shard into `out` (which must be exactly its size), waiting for the
  // seal at most `timeout`.
  [[nodiscard]] Status Get(uint64_t object, uint32_t shard, std::span<std::byte> out,
                           std::chrono::milliseconds timeout);
  // Copies a sealed shard into a new object `to` in `device`'s memory (kHost: the arena),
  // region to region: a host<->device move on this host.
  [[nodiscard]] Status Copy(uint64_t from, uint32_t shard, uint64_t to, uint64_t owner,
                            int32_t device);
  [[nodiscard]] Status Release(uint64_t object);

 private:
  LocalStoreClient(zmq::context_t& context, const std::string& endpoint);
  // Reserves space, lets `fill` write it through the region, and seals it.
  Status CreateFilled(const proto::CreateObject& create,
                      const std::function<void(std::byte*, uint64_t)>& fill);

  net::Requester store_;
  std::unique_ptr<ShmRegion> region_;
  std::chrono::milliseconds timeout_{5000};
};

}  // namespace atl::store
