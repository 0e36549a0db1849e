// libzmq keeps a CURVE handshake's secrets in libsodium's guarded memory: sodium_allocarray
// maps each block with a guard page either side and locks it in RAM, and sodium_free zeroes,
// unlocks and unmaps it. A handshake takes about six blocks on each side, and each block
// takes ten calls that change the address space. Those calls queue on the process's mmap
// lock and flush the TLB of every core the process runs on. In a process with many clients
// connecting at once, they cost more than the handshake's cryptography (issue 48).
//
// This file defines the two functions libzmq calls, sodium_allocarray and sodium_free.
// ELF symbol interposition makes the process's own definition win over libsodium's, as
// jemalloc's malloc wins over libc's. A released block is zeroed and kept for the next
// request of its size, so its guard pages and its lock stay: what sodium_free promises of
// the block's contents still holds, and only the unmapping waits. At most
// kMaxKeptBlocksPerSize of a size are kept; a block released beyond that goes back to
// libsodium.
#pragma once

#include <cstddef>
#include <cstdint>

// libsodium's declarations, which this file's definitions replace.
extern "C" {
void* sodium_allocarray(size_t count, size_t size);
void sodium_free(void* block);
}

namespace atl::net {

inline constexpr size_t kMaxKeptBlocksPerSize = 64;

struct SecureBlockCounts {
  uint64_t allocated = 0;  // blocks libsodium mapped for this process since it started
  uint64_t reused = 0;     // requests served by a block kept from an earlier release
  uint64_t kept = 0;       // blocks kept now, zeroed, waiting to be reused
};

// From now on, blocks released are kept for reuse (until then every call goes to libsodium
// as it is). SetCredentials calls it when a context is given CURVE keys. Thread-safe.
void KeepSecureBlocks();
SecureBlockCounts SecureBlocks();

}  // namespace atl::net
