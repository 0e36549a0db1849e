#include "services/objectstore/checkpoint_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <utility>

#include <fmt/format.h>

#include "common/checkpoint/index.h"

namespace atl::store {

namespace {

constexpr size_t kMaxPath = 4096;
// Temporaries are hidden names that no checkpoint file can have (CheckFileName refuses a
// leading '.'): ".<name>.tmp-<pid>-<n>".
constexpr std::string_view kTempMarker = ".tmp-";
// How much is written or read between two looks at the stop flag.
constexpr size_t kChunk = size_t{8} << 20;
// A temporary unchanged this long is a killed writer's, never to be renamed.
constexpr std::chrono::seconds kAbandonedTemp{3600};

std::string Errno(int error) { return std::strerror(error); }

bool Stopped(const std::atomic<bool>* stop) { return stop != nullptr && stop->load(); }

// The error for `errno_value` from opening `component` of `path`.
Status OpenError(int errno_value, int parent, const std::string& component, std::string_view path) {
  struct stat st {};
  const bool link =
      fstatat(parent, component.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
  if (errno_value == ELOOP || link) {
    return PermissionDenied(fmt::format(
        "checkpoint path '{}': '{}' is a symbolic link, which checkpoints do not follow", path,
        component));
  }
  switch (errno_value) {
    case ENOENT:
      return NotFound(fmt::format("checkpoint path '{}': no '{}' there", path, component));
    case ENOTDIR:
      return InvalidArgument(
          fmt::format("checkpoint path '{}': '{}' is not a directory", path, component));
    case EACCES:
    case EPERM:
      return PermissionDenied(
          fmt::format("checkpoint path '{}': the object store may not open '{}'", path, component));
    default:
      return Unavailable(
          fmt::format("checkpoint path '{}': '{}': {}", path, component, Errno(errno_value)));
  }
}

// Writes all of `bytes` to `fd`, resuming after short writes and signals.
bool WriteAll(int fd, std::span<const std::byte> bytes) {
  errno = 0;
  while (!bytes.empty()) {
    const ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes = bytes.subspan(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

uint32_t Crc32(std::span<const std::byte> bytes, uint32_t crc) {
  constexpr size_t kZlibChunk = size_t{1} << 30;  // zlib counts in uInt
  uLong value = crc;
  while (!bytes.empty()) {
    const size_t n = std::min(bytes.size(), kZlibChunk);
    value = crc32(value, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(n));
    bytes = bytes.subspan(n);
  }
  return static_cast<uint32_t>(value);
}

Result<CheckpointDir> CheckpointDir::Open(const std::string& root, std::string_view relative,
                                          bool create) {
  if (relative.empty()) {
    return InvalidArgument("a checkpoint path names a directory below the checkpoint root");
  }
  if (relative.size() > kMaxPath || relative.find('\0') != std::string_view::npos) {
    return InvalidArgument("a checkpoint path is at most 4096 bytes, with no NUL");
  }
  if (relative.front() == '/') {
    return InvalidArgument(fmt::format(
        "checkpoint path '{}' is absolute: paths are relative to the checkpoint root", relative));
  }
  std::vector<std::string> components;
  for (size_t start = 0; start <= relative.size();) {
    const size_t end = std::min(relative.find('/', start), relative.size());
    const std::string_view c = relative.substr(start, end - start);
    if (c == "..") {
      return PermissionDenied(fmt::format(
          "checkpoint path '{}' climbs out with '..': paths stay below the checkpoint root",
          relative));
    }
    if (!c.empty() && c != ".") components.emplace_back(c);
    start = end + 1;
  }
  if (components.empty()) {
    return InvalidArgument(fmt::format(
        "checkpoint path '{}' names the checkpoint root itself: name a directory below it",
        relative));
  }
  if (create) {
    std::error_code ec;
    std::filesystem::create_directories(root, ec);
    if (ec) return Unavailable("cannot make the checkpoint root: " + ec.message());
  }
  int fd = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    return e == ENOENT ? NotFound(fmt::format("no checkpoint at '{}': nothing was saved here yet",
                                              relative))
                       : Unavailable("cannot open the checkpoint root: " + Errno(e));
  }
  for (const std::string& c : components) {
    int next = openat(fd, c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT && create) {
      if (mkdirat(fd, c.c_str(), 0755) == 0 || errno == EEXIST) {
        next = openat(fd, c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      }
    }
    if (next < 0) {
      const Status error = OpenError(errno, fd, c, relative);
      close(fd);
      return error;
    }
    close(fd);
    fd = next;
  }
  return CheckpointDir(fd, std::string(relative));
}

CheckpointDir::CheckpointDir(CheckpointDir&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

CheckpointDir& CheckpointDir::operator=(CheckpointDir&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

CheckpointDir::~CheckpointDir() {
  if (fd_ >= 0) close(fd_);
}

Result<CheckpointDir::Written> CheckpointDir::Write(
    std::string_view name, const std::vector<std::span<const std::byte>>& parts,
    const std::atomic<bool>* stop) {
  if (name != checkpoint::kIndexFile) ATOLL_RETURN_IF_ERROR(checkpoint::CheckFileName(name));
  static std::atomic<uint64_t> next_temp{0};
  const std::string temp = fmt::format(".{}{}{}-{}", name, kTempMarker, getpid(), ++next_temp);
  const int fd =
      openat(fd_, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Unavailable(fmt::format("cannot write in checkpoint '{}': {}", path_, Errno(errno)));
  }
  Written written;
  int error = 0;
  for (auto part : parts) {
    while (error == 0 && !part.empty()) {
      if (Stopped(stop)) {
        error = ECANCELED;
        break;
      }
      const auto chunk = part.first(std::min(part.size(), kChunk));
      if (!WriteAll(fd, chunk)) {
        error = errno != 0 ? errno : EIO;
        break;
      }
      written.bytes += chunk.size();
      written.crc32 = Crc32(chunk, written.crc32);
      part = part.subspan(chunk.size());
    }
  }
  if (error == 0 && fsync(fd) != 0) error = errno;
  close(fd);
  if (error == 0 && renameat(fd_, temp.c_str(), fd_, std::string(name).c_str()) != 0) {
    error = errno;
  }
  if (error != 0) {
    unlinkat(fd_, temp.c_str(), 0);
    if (error == ECANCELED) {
      return Cancelled(
          fmt::format("writing '{}' in checkpoint '{}' stopped: the object store "
                      "is shutting down",
                      name, path_));
    }
    return Unavailable(
        fmt::format("cannot write '{}' in checkpoint '{}': {}", name, path_, Errno(error)));
  }
  return written;
}

Result<std::vector<std::byte>> CheckpointDir::Read(std::string_view name, uint64_t max_bytes,
                                                   const std::atomic<bool>* stop) const {
  if (name != checkpoint::kIndexFile) ATOLL_RETURN_IF_ERROR(checkpoint::CheckFileName(name));
  const std::string file(name);
  const int fd = openat(fd_, file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) {
      return NotFound(fmt::format("checkpoint '{}' has no file '{}'", path_, name));
    }
    return OpenError(e, fd_, file, path_ + "/" + file);
  }
  struct stat st {};
  std::vector<std::byte> bytes;
  Status status = Status::Ok();
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    status = InvalidArgument(fmt::format("'{}' in checkpoint '{}' is not a file", name, path_));
  } else if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    status =
        InvalidArgument(fmt::format("'{}' in checkpoint '{}' is {} bytes, over the {} "
                                    "expected",
                                    name, path_, st.st_size, max_bytes));
  } else {
    bytes.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < bytes.size()) {
      if (Stopped(stop)) {
        status =
            Cancelled(fmt::format("reading '{}' in checkpoint '{}' stopped: the object "
                                  "store is shutting down",
                                  name, path_));
        break;
      }
      const ssize_t n = pread(fd, bytes.data() + done, std::min(bytes.size() - done, kChunk), done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        status = Unavailable(fmt::format("cannot read '{}' in checkpoint '{}': {}", name, path_,
                                         n == 0 ? "it shrank" : Errno(errno)));
        break;
      }
      done += static_cast<size_t>(n);
    }
  }
  close(fd);
  if (!status.ok()) return status;
  return bytes;
}

Result<size_t> CheckpointDir::RemoveDataExcept(const std::set<std::string>& keep) {
  const int listing = dup(fd_);
  DIR* dir = listing < 0 ? nullptr : fdopendir(listing);
  if (dir == nullptr) {
    if (listing >= 0) close(listing);
    return Unavailable(fmt::format("cannot list checkpoint '{}': {}", path_, Errno(errno)));
  }
  rewinddir(dir);
  std::vector<std::string> stale;
  const time_t abandoned = time(nullptr) - kAbandonedTemp.count();
  while (const dirent* entry = readdir(dir)) {
    const std::string name(entry->d_name);
    struct stat st {};
    if (keep.count(name) || fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        S_ISDIR(st.st_mode)) {
      continue;
    }
    // Another store sharing this directory may be writing its temporary now: only one
    // untouched for long was abandoned (its writer killed).
    const bool temp = name.starts_with('.') && name.find(kTempMarker) != std::string::npos;
    if (name.ends_with(".npy") || (temp && st.st_mtime < abandoned)) stale.push_back(name);
  }
  closedir(dir);
  size_t removed = 0;
  for (const std::string& name : stale) removed += unlinkat(fd_, name.c_str(), 0) == 0;
  return removed;
}

Status CheckpointDir::Sync() {
  if (fsync(fd_) != 0) {
    return Unavailable(fmt::format("cannot sync checkpoint '{}': {}", path_, Errno(errno)));
  }
  return Status::Ok();
}

}  // namespace atl::store
