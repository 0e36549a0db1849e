// ArenaViews: arguments that a shard reads in place from the object store's arena instead
// of copying them out at every run (an ONNX model's weights: 46 MB for resnet18, plus the
// page faults of fresh memory, at every inference).
//
// The executor asks the store to pin the shard it reads (GetObject::pin): the store then
// gives the block to no other object, even if the object is released meanwhile, until the
// lease in its reply is dropped (UnpinObjects). View makes a tensor over the block, through
// a read-only mapping of the arena of its own (a kernel that wrote into an argument would
// fault instead of changing a stored object), that holds the lease: when the tensor's last
// copy goes, on whatever thread, the lease joins a queue and an eventfd wakes the
// executor's loop, which sends the store the leases queued (TakeReleased). A view holds the
// mapping it was made from, so a store that restarted (a new arena mapped) leaves it valid;
// leases of a store instance other than the attached one are dropped, not sent: that store
// is gone, its pins with it.
//
// The view carries the shard's ContentId (store instance, sealed version), so that a kernel
// may keep what it derives from the bytes (oneDNN's reordered weights) across runs.
//
// Thread-safety: Attach, Detach, View and TakeReleased belong to the executor's loop; views
// are dropped on any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/proto/store_messages.h"

namespace atl::executor {

class ArenaViews {
 public:
  ArenaViews();  // opens the eventfd; without one (the system refused) nothing is pinned
  ArenaViews(const ArenaViews&) = delete;
  ArenaViews& operator=(const ArenaViews&) = delete;

  // Maps the arena `arena_name` of store process `instance` read-only; until it succeeds
  // (and after Detach) available() is false and arguments are copied as before.
  Status Attach(const std::string& arena_name, uint64_t instance);
  void Detach();
  bool available() const;

  // A read-only tensor over the shard that pinned read `reply` gives (its lease is dropped
  // with the tensor's last copy). InvalidArgument when the shard lies outside the arena or
  // does not match its dtype and shape; the lease is queued for release then too.
  Result<Tensor> View(const proto::GetObjectReply& reply);

  // Readable while released leases wait to be taken; -1 without an eventfd.
  int fd() const;
  // The leases released since the last call that the attached store instance gave, and
  // clears the eventfd.
  std::vector<uint64_t> TakeReleased();

 private:
  struct Released;  // the queue of released leases, shared with every view's lease
  struct Lease;     // a view's owner: the mapping and the lease it holds
  struct Mapping;   // an arena mapped read-only
  std::shared_ptr<Released> released_;
  std::shared_ptr<const Mapping> mapping_;  // null while detached
  uint64_t instance_ = 0;
};

}  // namespace atl::executor
