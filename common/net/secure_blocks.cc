#include "common/net/secure_blocks.h"

#include <dlfcn.h>
#include <string.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <unordered_map>
#include <vector>

#include "common/base/mutex.h"

namespace atl::net {
namespace {

using AllocArray = void* (*)(size_t count, size_t size);
using Free = void (*)(void* block);

// libsodium's own definitions: the next ones after this process's in the lookup order.
template <typename Fn>
Fn Libsodiums(const char* name) {
  auto* fn = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
  if (fn == nullptr) {
    // Only libzmq calls these, and libzmq brings libsodium with it.
    std::fprintf(stderr, "atoll: %s not found in libsodium: %s\n", name, dlerror());
    std::abort();
  }
  return fn;
}

AllocArray LibsodiumAllocArray() {
  // sodium_malloc needs sodium_init's page size and canary: libzmq calls it before its first
  // handshake, but a caller of ours may come first. It may be called again and again.
  static const AllocArray fn = [] {
    if (Libsodiums<int (*)()>("sodium_init")() < 0) {
      std::fprintf(stderr, "atoll: libsodium failed to initialise\n");
      std::abort();
    }
    return Libsodiums<AllocArray>("sodium_allocarray");
  }();
  return fn;
}

Free LibsodiumFree() {
  static const Free fn = Libsodiums<Free>("sodium_free");
  return fn;
}

struct Blocks {
  Mutex mu;
  std::unordered_map<void*, size_t> sizes GUARDED_BY(mu);  // every block mapped while keeping
  std::unordered_map<size_t, std::vector<void*>> kept GUARDED_BY(mu);  // by size, zeroed
  size_t kept_count GUARDED_BY(mu) = 0;
  uint64_t allocated GUARDED_BY(mu) = 0;
  uint64_t reused GUARDED_BY(mu) = 0;
};

std::atomic<bool> keeping{false};

// Never destroyed: libzmq's I/O threads may release blocks while the process exits.
Blocks& TheBlocks() {
  static Blocks* blocks = new Blocks;
  return *blocks;
}

// A block of `bytes` kept from an earlier release, or null.
void* TakeKept(size_t bytes) {
  Blocks& b = TheBlocks();
  MutexLock lock(b.mu);
  auto it = b.kept.find(bytes);
  if (it == b.kept.end() || it->second.empty()) return nullptr;
  void* block = it->second.back();
  it->second.pop_back();
  --b.kept_count;
  ++b.reused;
  return block;
}

// Whether `block` was kept (zeroed) rather than left for libsodium to free.
bool Keep(void* block) {
  Blocks& b = TheBlocks();
  MutexLock lock(b.mu);
  auto it = b.sizes.find(block);
  if (it == b.sizes.end()) return false;  // mapped before keeping began
  std::vector<void*>& kept = b.kept[it->second];
  if (kept.size() >= kMaxKeptBlocksPerSize) {
    b.sizes.erase(it);
    return false;
  }
  explicit_bzero(block, it->second);
  kept.push_back(block);
  ++b.kept_count;
  return true;
}

// Notes a block libsodium mapped while keeping, to keep it when it is released.
void Remember(void* block, size_t bytes) {
  Blocks& b = TheBlocks();
  MutexLock lock(b.mu);
  b.sizes[block] = bytes;
  ++b.allocated;
}

}  // namespace

void KeepSecureBlocks() { keeping.store(true); }

SecureBlockCounts SecureBlocks() {
  Blocks& b = TheBlocks();
  MutexLock lock(b.mu);
  return {b.allocated, b.reused, b.kept_count};
}

}  // namespace atl::net

// The interposed definitions. Exported by name even from a library built with hidden
// visibility (Python's extension module), since interposing is their whole point.
extern "C" __attribute__((visibility("default"))) void* sodium_allocarray(size_t count,
                                                                          size_t size) {
  using namespace atl::net;
  if (!keeping.load()) return LibsodiumAllocArray()(count, size);
  if (count > 0 && size >= std::numeric_limits<size_t>::max() / count) return nullptr;
  const size_t bytes = count * size;
  if (void* block = TakeKept(bytes)) return block;
  void* block = LibsodiumAllocArray()(count, size);
  if (block == nullptr) return nullptr;
  atl::net::Remember(block, bytes);
  return block;
}

extern "C" __attribute__((visibility("default"))) void sodium_free(void* block) {
  if (block != nullptr && atl::net::Keep(block)) return;
  atl::net::LibsodiumFree()(block);
}
