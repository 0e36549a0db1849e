#include "common/base/shm_arena.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

namespace atl {

namespace {

// Where glibc's shm_open keeps its objects.
constexpr const char* kShmDir = "/dev/shm";

std::string ErrnoText(int err) { return std::strerror(err); }

Status CheckName(const std::string& name) {
  if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != std::string::npos ||
      name.size() > 255) {
    return InvalidArgument("shared-memory name '" + name +
                           "' must be '/' followed by 1-254 characters without '/'");
  }
  return Status::Ok();
}

// MakeName's name less the pid: "/atoll-<tag>-".
std::string NamePrefix(std::string_view tag) {
  std::string prefix = "/atoll-";
  for (char c : tag) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '.' || c == '-';
    prefix.push_back(keep ? c : '_');
  }
  return prefix + "-";
}

}  // namespace

std::string ShmRegion::MakeName(std::string_view tag) {
  return NamePrefix(tag) + std::to_string(getpid());
}

Result<ShmRegion> ShmRegion::Create(const std::string& name, uint64_t bytes) {
  ATOLL_RETURN_IF_ERROR(CheckName(name));
  if (bytes == 0) return InvalidArgument("shared-memory region " + name + " must not be empty");
  if (bytes > static_cast<uint64_t>(std::numeric_limits<off_t>::max())) {
    return InvalidArgument("shared-memory region " + name + " of " + std::to_string(bytes) +
                           " bytes is too large");
  }
  const auto create = [&] {
    return shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  };
  int fd = create();
  int err = errno;
  if (fd < 0 && err == EEXIST && RemoveIfAbandoned(name)) {
    fd = create();
    err = errno;
  }
  if (fd < 0) {
    return Unavailable("cannot create shared memory " + name + ": " + ErrnoText(err) +
                       (err == EEXIST ? " (in use by a live process)" : ""));
  }
  // Locked before it is sized: RemoveIfAbandoned takes an unlocked, empty object for one
  // still being made. Only such a check holds the lock, briefly, so this wait is short.
  int locked;
  do {
    locked = flock(fd, LOCK_EX);
  } while (locked != 0 && errno == EINTR);
  const auto fail = [&](const std::string& what) {
    const int cause = errno;
    close(fd);
    shm_unlink(name.c_str());
    return Unavailable(what + ": " + ErrnoText(cause));
  };
  if (locked != 0) return fail("cannot lock shared memory " + name);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    return fail("cannot size shared memory " + name + " to " + std::to_string(bytes) + " bytes");
  }
  void* addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED) {
    return fail("cannot map shared memory " + name + " (" + std::to_string(bytes) + " bytes)");
  }
  return ShmRegion(name, addr, bytes, fd);
}

bool ShmRegion::RemoveIfAbandoned(const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return false;  // gone already, or another user's
  bool abandoned = false;
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
    struct stat st {};
    abandoned = fstat(fd, &st) == 0 && st.st_size > 0;
    if (abandoned) shm_unlink(name.c_str());
  }
  close(fd);  // and with it the lock
  return abandoned;
}

std::vector<std::string> ShmRegion::RemoveAbandoned(std::string_view tag) {
  // The rest of a name of this tag is the pid, digits only ("h0-" is not "h0-1-"'s).
  const std::string prefix = NamePrefix(tag).substr(1);  // a file name has no '/'
  std::vector<std::string> removed;
  DIR* dir = opendir(kShmDir);
  if (dir == nullptr) return removed;
  while (const dirent* entry = readdir(dir)) {
    const std::string_view file = entry->d_name;
    if (!file.starts_with(prefix) || file.size() == prefix.size()) continue;
    const std::string_view pid = file.substr(prefix.size());
    if (pid.find_first_not_of("0123456789") != std::string_view::npos) continue;
    const std::string name = "/" + std::string(file);
    if (RemoveIfAbandoned(name)) removed.push_back(name);
  }
  closedir(dir);
  return removed;
}

Result<uint64_t> ShmRegion::FreeBytes() {
  struct statvfs fs {};
  if (statvfs(kShmDir, &fs) != 0) {
    const int err = errno;
    return Unavailable(std::string("cannot stat ") + kShmDir + ": " + ErrnoText(err));
  }
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

Result<ShmRegion> ShmRegion::Open(const std::string& name, Access access) {
  ATOLL_RETURN_IF_ERROR(CheckName(name));
  const bool writable = access == Access::kReadWrite;
  const int fd = shm_open(name.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC, 0);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound("shared memory " + name + " does not exist");
    return Unavailable("cannot open shared memory " + name + ": " + ErrnoText(err));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return Unavailable("cannot stat shared memory " + name + ": " + ErrnoText(err));
  }
  if (st.st_size <= 0) {
    close(fd);
    return Unavailable("shared memory " + name + " is empty (not yet sized by its creator?)");
  }
  const auto bytes = static_cast<uint64_t>(st.st_size);
  void* addr =
      mmap(nullptr, bytes, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (addr == MAP_FAILED) {
    return Unavailable("cannot map shared memory " + name + ": " + ErrnoText(err));
  }
  return ShmRegion(name, addr, bytes, /*lock_fd=*/-1);
}

ShmRegion::ShmRegion(ShmRegion&& other) noexcept
    : name_(std::move(other.name_)),
      addr_(std::exchange(other.addr_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      lock_fd_(std::exchange(other.lock_fd_, -1)) {}

ShmRegion& ShmRegion::operator=(ShmRegion&& other) noexcept {
  if (this != &other) {
    Reset();
    name_ = std::move(other.name_);
    addr_ = std::exchange(other.addr_, nullptr);
    size_ = std::exchange(other.size_, 0);
    lock_fd_ = std::exchange(other.lock_fd_, -1);
  }
  return *this;
}

ShmRegion::~ShmRegion() { Reset(); }

void ShmRegion::Reset() {
  if (addr_ != nullptr) munmap(addr_, size_);
  if (lock_fd_ >= 0) {
    shm_unlink(name_.c_str());
    close(lock_fd_);
  }
  addr_ = nullptr;
  size_ = 0;
  lock_fd_ = -1;
}

Result<std::span<std::byte>> ShmRegion::Slice(uint64_t offset, uint64_t nbytes) {
  if (offset > size_ || nbytes > size_ - offset) {
    return InvalidArgument("bytes [" + std::to_string(offset) + ", +" + std::to_string(nbytes) +
                           ") are outside shared memory " + name_ + " of " + std::to_string(size_) +
                           " bytes");
  }
  return std::span<std::byte>(data() + offset, nbytes);
}

Result<std::span<const std::byte>> ShmRegion::Slice(uint64_t offset, uint64_t nbytes) const {
  auto slice = const_cast<ShmRegion*>(this)->Slice(offset, nbytes);
  if (!slice.ok()) return slice.status();
  return std::span<const std::byte>(slice->data(), slice->size());
}

}  // namespace atl
