// InputMailbox: where tuple inputs meet the shards that wait for them. A shard admitted
// here awaits each tuple input by its InputKey; a tuple that arrives before its shard's
// entry (the producer was faster than the Dispatch) is kept until the shard awaits it.
// Values go to the ItemSink (the device streams), never through the loop thread.
//
// Thread-safe: the loop awaits and fails; the loop and device threads (a finished shard
// feeding its consumers on this host) deliver. The sink is called with no lock held.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/base/mutex.h"
#include "services/executor/work_item.h"

namespace atl::executor {

class InputMailbox {
 public:
  // `sink` receives every value and failure; it must outlive the mailbox.
  explicit InputMailbox(ItemSink& sink) : sink_(sink) {}

  // `item` waits for the tuple `key` (its input key.input). A tuple that came earlier is
  // handed to the sink at once (or its error fails the item).
  void Await(const InputKey& key, std::shared_ptr<WorkItem> item);
  // The tuple `key` (or its producer's error): to the item awaiting it, or kept until one
  // does. A later tuple for a key nobody awaits yet replaces the earlier one.
  void Deliver(const InputKey& key, Result<Tensor> value);
  // Fails with `why` every waiting item whose entry names `peer` (a control endpoint)
  // among its peers: its tuples will never come. Returns how many failed.
  size_t FailWaitingOn(const std::string& peer, const Status& why);
  // Fails every item that has waited for a tuple since a call more than `wait_us` before
  // `now_us` (any steady clock, microseconds): its producer was placed but the tuple never
  // came, and the item would hold its device for ever. The error (DeadlineExceeded) names
  // the run, node, shard and input. Returns the keys that failed. Call it periodically.
  std::vector<InputKey> FailWaitingLongerThan(int64_t now_us, int64_t wait_us);

  size_t waiting() const;  // items waiting for a tuple, counted once per input
  size_t early() const;    // tuples kept for entries that have not arrived

 private:
  ItemSink& sink_;
  mutable Mutex mu_;
  struct Waiting {
    std::shared_ptr<WorkItem> item;
    int64_t seen_us = -1;  // when FailWaitingLongerThan first saw it; -1: not yet
  };
  std::map<InputKey, Waiting> waiting_ GUARDED_BY(mu_);
  std::map<InputKey, Result<Tensor>> early_ GUARDED_BY(mu_);
};

}  // namespace atl::executor
