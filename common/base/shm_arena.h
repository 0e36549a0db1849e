// ShmRegion: one POSIX shared-memory object mapped read-write into this process. The object
// store creates the host's arena with Create(); executors and local clients map the same
// bytes with Open(), so moving a shard between them copies nothing through a socket.
//
// Ownership: a region is move-only. Destruction unmaps it; the creator also unlinks the
// name, so the memory goes away once every other mapping is gone. A process that dies
// without running destructors leaves the name in /dev/shm. Its memory stays in use until the
// name is removed, and a later process with the same pid cannot create the same name. This
// happens in a container that restarts: /dev/shm survives and pids start again from 1.
// So the creator holds an flock on the object for as long as it lives. The kernel drops
// that lock when the process dies, however it dies, so an unlocked, sized object is known
// to be abandoned. Create() replaces an abandoned object of its name, and RemoveAbandoned()
// clears a tag's leftovers.
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
#include <vector>

#include "atoll/status.h"

namespace atl {

class ShmRegion {
 public:
  // "/atoll-<tag>-<pid>", with every character of `tag` outside [A-Za-z0-9_.-] replaced by
  // '_': a name that is valid for shm_open and unique to this process and tag.
  static std::string MakeName(std::string_view tag);

  // Creates a new shared-memory object `name` ("/name", no other '/') of `bytes` bytes
  // (> 0), zero-filled, and maps it. An abandoned object of that name is removed first.
  // Fails with Unavailable when a live region has the name or the system refuses, and with
  // InvalidArgument for a bad name or size. The returned region unlinks the name when
  // destroyed.
  [[nodiscard]] static Result<ShmRegion> Create(const std::string& name, uint64_t bytes);

  // Removes every abandoned object that MakeName(`tag`) named in another process, and
  // returns their names. Objects of live creators are left alone, and so are objects
  // still being created.
  static std::vector<std::string> RemoveAbandoned(std::string_view tag);

  // The bytes still free where the objects live (/dev/shm). Created objects take their pages
  // only when first written; a write that finds no page free kills its process (SIGBUS).
  static Result<uint64_t> FreeBytes();

  // Maps an existing shared-memory object, whole: read-write, or read-only (a write through
  // it faults). NotFound when no object has that name; Unavailable when it cannot be mapped.
  // Never unlinks the name.
  enum class Access { kReadWrite, kReadOnly };
  [[nodiscard]] static Result<ShmRegion> Open(const std::string& name,
                                              Access access = Access::kReadWrite);

  ShmRegion() = default;  // maps nothing: every Slice fails
  ShmRegion(ShmRegion&& other) noexcept;
  ShmRegion& operator=(ShmRegion&& other) noexcept;
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;
  ~ShmRegion();

  const std::string& name() const { return name_; }
  uint64_t size() const { return size_; }
  // True for the region made by Create(): it unlinks the name on destruction.
  bool is_creator() const { return lock_fd_ >= 0; }

  std::byte* data() { return static_cast<std::byte*>(addr_); }
  const std::byte* data() const { return static_cast<const std::byte*>(addr_); }

  // The bytes [offset, offset + nbytes), or InvalidArgument when they are not all inside
  // the region (overflow-safe). The span is valid while the region lives.
  [[nodiscard]] Result<std::span<std::byte>> Slice(uint64_t offset, uint64_t nbytes);
  [[nodiscard]] Result<std::span<const std::byte>> Slice(uint64_t offset, uint64_t nbytes) const;

 private:
  ShmRegion(std::string name, void* addr, uint64_t size, int lock_fd)
      : name_(std::move(name)), addr_(addr), size_(size), lock_fd_(lock_fd) {}
  void Reset();
  // Unlinks `name` when its object is abandoned (unlocked and sized); true if it did.
  static bool RemoveIfAbandoned(const std::string& name);

  std::string name_;
  void* addr_ = nullptr;
  uint64_t size_ = 0;
  int lock_fd_ = -1;  // the creator's: holds the flock that marks the object as live
};

}  // namespace atl
