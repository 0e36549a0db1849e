// ShmRegion: one POSIX shared-memory object mapped read-write into this process. The object
// store creates the host's arena with Create(); executors and local clients map the same
// bytes with Open(), so moving a shard between them copies nothing through a socket.
//
// Ownership: a region is move-only. Destruction unmaps it; the creator also unlinks the
// name, so the memory goes away once every other mapping is gone. A process that dies
// without running destructors leaves the name in /dev/shm; names carry the creator's pid so
// that a later run never collides with it.
//
// Thread safety: the object itself is not synchronised (create, move and destroy it from
// one thread); the mapped bytes may be read and written from any thread, under whatever
// protocol the users of the region agree on (the store's Create/Seal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "atoll/status.h"

namespace atl {

class ShmRegion {
 public:
  // "/atoll-<tag>-<pid>", with every character of `tag` outside [A-Za-z0-9_.-] replaced by
  // '_': a name that is valid for shm_open and unique to this process and tag.
  static std::string MakeName(std::string_view tag);

  // Creates a new shared-memory object `name` ("/name", no other '/') of `bytes` bytes
  // (> 0), zero-filled, and maps it. Fails with Unavailable when the name already exists
  // (O_EXCL) or the system refuses, InvalidArgument for a bad name or size. The returned
  // region unlinks the name when destroyed.
  [[nodiscard]] static Result<ShmRegion> Create(const std::string& name, uint64_t bytes);

  // Maps an existing shared-memory object read-write, whole. NotFound when no object has
  // that name; Unavailable when it cannot be mapped. Never unlinks the name.
  [[nodiscard]] static Result<ShmRegion> Open(const std::string& name);

  ShmRegion() = default;  // maps nothing: every Slice fails
  ShmRegion(ShmRegion&& other) noexcept;
  ShmRegion& operator=(ShmRegion&& other) noexcept;
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;
  ~ShmRegion();

  const std::string& name() const { return name_; }
  uint64_t size() const { return size_; }
  // True for the region made by Create(): it unlinks the name on destruction.
  bool is_creator() const { return creator_; }

  std::byte* data() { return static_cast<std::byte*>(addr_); }
  const std::byte* data() const { return static_cast<const std::byte*>(addr_); }

  // The bytes [offset, offset + nbytes), or InvalidArgument when they are not all inside
  // the region (overflow-safe). The span is valid while the region lives.
  [[nodiscard]] Result<std::span<std::byte>> Slice(uint64_t offset, uint64_t nbytes);
  [[nodiscard]] Result<std::span<const std::byte>> Slice(uint64_t offset, uint64_t nbytes) const;

 private:
  ShmRegion(std::string name, void* addr, uint64_t size, bool creator)
      : name_(std::move(name)), addr_(addr), size_(size), creator_(creator) {}
  void Reset();

  std::string name_;
  void* addr_ = nullptr;
  uint64_t size_ = 0;
  bool creator_ = false;
};

}  // namespace atl
