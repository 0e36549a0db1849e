#include "common/base/shm_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

namespace atl {

namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

Status CheckName(const std::string& name) {
  if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != std::string::npos ||
      name.size() > 255) {
    return InvalidArgument("shared-memory name '" + name +
                           "' must be '/' followed by 1-254 characters without '/'");
  }
  return Status::Ok();
}

}  // namespace

std::string ShmRegion::MakeName(std::string_view tag) {
  std::string name = "/atoll-";
  for (char c : tag) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '.' || c == '-';
    name.push_back(keep ? c : '_');
  }
  name += "-" + std::to_string(getpid());
  return name;
}

Result<ShmRegion> ShmRegion::Create(const std::string& name, uint64_t bytes) {
  ATOLL_RETURN_IF_ERROR(CheckName(name));
  if (bytes == 0) return InvalidArgument("shared-memory region " + name + " must not be empty");
  if (bytes > static_cast<uint64_t>(std::numeric_limits<off_t>::max())) {
    return InvalidArgument("shared-memory region " + name + " of " + std::to_string(bytes) +
                           " bytes is too large");
  }
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    return Unavailable("cannot create shared memory " + name + ": " + ErrnoText(err));
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    return Unavailable("cannot size shared memory " + name + " to " + std::to_string(bytes) +
                       " bytes: " + ErrnoText(err));
  }
  void* addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);  // the mapping keeps the object alive
  if (addr == MAP_FAILED) {
    shm_unlink(name.c_str());
    return Unavailable("cannot map shared memory " + name + " (" + std::to_string(bytes) +
                       " bytes): " + ErrnoText(err));
  }
  return ShmRegion(name, addr, bytes, /*creator=*/true);
}

Result<ShmRegion> ShmRegion::Open(const std::string& name) {
  ATOLL_RETURN_IF_ERROR(CheckName(name));
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
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
  void* addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (addr == MAP_FAILED) {
    return Unavailable("cannot map shared memory " + name + ": " + ErrnoText(err));
  }
  return ShmRegion(name, addr, bytes, /*creator=*/false);
}

ShmRegion::ShmRegion(ShmRegion&& other) noexcept
    : name_(std::move(other.name_)),
      addr_(std::exchange(other.addr_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      creator_(std::exchange(other.creator_, false)) {}

ShmRegion& ShmRegion::operator=(ShmRegion&& other) noexcept {
  if (this != &other) {
    Reset();
    name_ = std::move(other.name_);
    addr_ = std::exchange(other.addr_, nullptr);
    size_ = std::exchange(other.size_, 0);
    creator_ = std::exchange(other.creator_, false);
  }
  return *this;
}

ShmRegion::~ShmRegion() { Reset(); }

void ShmRegion::Reset() {
  if (addr_ != nullptr) munmap(addr_, size_);
  if (creator_) shm_unlink(name_.c_str());
  addr_ = nullptr;
  size_ = 0;
  creator_ = false;
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
