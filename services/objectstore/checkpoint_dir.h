// CheckpointDir: a directory below an object store's checkpoint root, held open, through
// which the store reads and writes a checkpoint's files. The store writes as its own user
// on a client's request, so nothing may leave the root: the path is opened one component at
// a time from the root's descriptor, refusing '..' and absolute paths (InvalidArgument) and
// symbolic links (PermissionDenied, also for the files themselves), and every file is named
// relative to the open directory, so that no rename of a parent elsewhere moves the target.
//
// A file is written to a temporary name in the same directory, synced, then renamed over
// its name: a reader sees the whole file or none.
//
// Writes and reads go in chunks of 8 MiB and stop between two (Cancelled; a write leaves no
// temporary) once `stop` is set, so that a store shutting down while it writes a checkpoint
// of gigabytes waits for one chunk, not for the whole file.
#pragma once

#include <atomic>
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "atoll/status.h"

namespace atl::store {

class CheckpointDir {
 public:
  // Opens `relative` (a '/'-separated path; empty and '.' components are skipped) below
  // `root`, making the root and the missing directories when `create`; without it a missing
  // one is NotFound. Messages name the path as given, never the root.
  static Result<CheckpointDir> Open(const std::string& root, std::string_view relative,
                                    bool create);
  CheckpointDir(CheckpointDir&& other) noexcept;
  CheckpointDir& operator=(CheckpointDir&& other) noexcept;
  ~CheckpointDir();

  const std::string& path() const { return path_; }

  struct Written {
    uint64_t bytes = 0;
    uint32_t crc32 = 0;
  };
  // Writes `parts` one after the other as file `name` (CheckFileName), replacing it whole.
  Result<Written> Write(std::string_view name, const std::vector<std::span<const std::byte>>& parts,
                        const std::atomic<bool>* stop = nullptr);
  // The whole of file `name`: NotFound when missing, InvalidArgument when over `max_bytes`.
  Result<std::vector<std::byte>> Read(std::string_view name, uint64_t max_bytes,
                                      const std::atomic<bool>* stop = nullptr) const;
  // Removes the files that look like checkpoint data and are not in `keep`: names ending in
  // ".npy", and temporaries untouched for an hour (a writer killed mid-file; another store
  // sharing the directory may be writing a newer one). Returns how many it removed.
  Result<size_t> RemoveDataExcept(const std::set<std::string>& keep);
  // Makes the directory's entries (the renames) durable.
  Status Sync();

 private:
  CheckpointDir(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

// CRC-32 of `bytes` continuing from `crc` (zlib's, as Python's zlib.crc32).
uint32_t Crc32(std::span<const std::byte> bytes, uint32_t crc = 0);

}  // namespace atl::store
