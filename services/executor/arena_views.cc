#include "services/executor/arena_views.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <utility>

#include "common/base/mutex.h"
#include "common/base/shm_arena.h"

namespace atl::executor {

struct ArenaViews::Mapping {
  ShmRegion region;
};

struct ArenaViews::Released {
  ~Released() {
    if (fd >= 0) close(fd);
  }
  void Push(uint64_t instance, uint64_t lease) {
    bool was_empty;
    {
      MutexLock lock(mu);
      was_empty = leases.empty();
      leases.emplace_back(instance, lease);
    }
    // Only the first release wakes the loop: later ones join what that wake-up takes.
    if (was_empty) {
      const uint64_t one = 1;
      [[maybe_unused]] auto n = write(fd, &one, sizeof(one));
    }
  }

  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  Mutex mu;
  std::vector<std::pair<uint64_t, uint64_t>> leases GUARDED_BY(mu);  // (instance, lease)
};

struct ArenaViews::Lease {
  Lease(std::shared_ptr<const Mapping> m, std::shared_ptr<Released> r, uint64_t i, uint64_t l)
      : mapping(std::move(m)), released(std::move(r)), instance(i), lease(l) {}
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() { released->Push(instance, lease); }

  const std::shared_ptr<const Mapping> mapping;  // unmapped only once no view reads it
  const std::shared_ptr<Released> released;
  const uint64_t instance;
  const uint64_t lease;
};

ArenaViews::ArenaViews() : released_(std::make_shared<Released>()) {}

Status ArenaViews::Attach(const std::string& arena_name, uint64_t instance) {
  Detach();
  if (released_->fd < 0) return Internal("no eventfd for the leases of pinned reads");
  ATOLL_ASSIGN_OR_RETURN(ShmRegion region,
                         ShmRegion::Open(arena_name, ShmRegion::Access::kReadOnly));
  mapping_ = std::make_shared<const Mapping>(Mapping{std::move(region)});
  instance_ = instance;
  return Status::Ok();
}

void ArenaViews::Detach() {
  mapping_.reset();
  instance_ = 0;
}

bool ArenaViews::available() const { return mapping_ != nullptr; }

int ArenaViews::fd() const { return released_->fd; }

Result<Tensor> ArenaViews::View(const proto::GetObjectReply& reply) {
  if (!mapping_ || reply.instance != instance_) {
    return FailedPrecondition("no arena of store instance " + std::to_string(reply.instance) +
                              " is mapped here to read in place");
  }
  // From here on the lease goes back to the store whatever happens.
  auto lease = std::make_shared<Lease>(mapping_, released_, reply.instance, reply.lease);
  ATOLL_ASSIGN_OR_RETURN(auto bytes, mapping_->region.Slice(reply.offset, reply.nbytes));
  return Tensor::View(reply.dtype, reply.shape, bytes, std::move(lease),
                      ContentId{reply.instance, reply.version});
}

std::vector<uint64_t> ArenaViews::TakeReleased() {
  // Cleared before the swap: a release after the swap wakes the loop again.
  uint64_t count = 0;
  [[maybe_unused]] auto n = read(released_->fd, &count, sizeof(count));
  std::vector<std::pair<uint64_t, uint64_t>> taken;
  {
    MutexLock lock(released_->mu);
    taken.swap(released_->leases);
  }
  std::vector<uint64_t> leases;
  for (const auto& [instance, lease] : taken) {
    if (instance == instance_ && instance != 0) leases.push_back(lease);
  }
  return leases;
}

}  // namespace atl::executor
