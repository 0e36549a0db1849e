// DeviceStream: one device's in-order, non-preemptive execution stream. Items run strictly
// in gang order (the island scheduler's order): the head item waits for its inputs even if
// a later item's inputs are all there, which is what keeps collectives from deadlocking.
//
// Thread-safe: Enqueue/Deliver/Fail are called by the executor's loop; the stream's own
// thread runs the items and hands each result to `on_done`.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <thread>

#include "common/base/mutex.h"
#include "common/base/spin_condition.h"
#include "compute/backend.h"
#include "services/executor/work_item.h"

namespace atl::executor {

class DeviceStream {
 public:
  using OnDone = std::function<void(Completion)>;

  // `hub` is where this device's shards meet the rest of their gangs for collectives.
  // `matmul_threads` is the device's share of the cores for its matmuls, set on its thread
  // (kernels::SetMatmulThreads; 0: OpenBLAS's own threads). `wait_spin`: how long the thread
  // looks for its next item before it sleeps (SpinCondition).
  DeviceStream(compute::Backend& backend, CollectiveHub& hub, OnDone on_done, int matmul_threads,
               std::chrono::microseconds wait_spin = std::chrono::microseconds(0));
  ~DeviceStream();  // stops and joins the thread; queued items are dropped

  // Queues an item at its place in gang order.
  void Enqueue(std::shared_ptr<WorkItem> item);
  // Fills input `input` of `item` (queued on this stream) and wakes the stream.
  void Deliver(const std::shared_ptr<WorkItem>& item, uint32_t input, Tensor value);
  // Counts one of `item`'s output reservations as granted and wakes the stream.
  void Reserved(const std::shared_ptr<WorkItem>& item);
  // Marks `item` failed; it completes at once with `status` when it reaches the head.
  void Fail(const std::shared_ptr<WorkItem>& item, Status status);
  // Fails every queued item of run `run` with `why`, and stops the running one if it is the
  // run's (it fails with Cancelled at its next check, see compute/cancellation.h).
  void CancelRun(uint64_t run, const Status& why);

  size_t queued() const;
  // Total time this stream spent running items since it started, in microseconds.
  uint64_t busy_us() const { return busy_us_.load(std::memory_order_relaxed); }

 private:
  // A failed item does not reach its collectives (those but `reached`, op indices it
  // contributed to before it failed): its gang hears so instead of waiting for it.
  void AbandonCollectives(const WorkItem& item, const Status& why,
                          const std::set<uint32_t>& reached = {});
  void Loop();

  compute::Backend& backend_;
  CollectiveHub& hub_;
  OnDone on_done_;
  const int matmul_threads_;
  mutable Mutex mu_;
  SpinCondition cv_;
  std::deque<std::shared_ptr<WorkItem>> queue_ GUARDED_BY(mu_);  // sorted by entry.gang_seq
  std::shared_ptr<WorkItem> running_ GUARDED_BY(mu_);            // the item the thread runs
  bool stop_ GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> busy_us_{0};
  std::thread thread_;
};

}  // namespace atl::executor
