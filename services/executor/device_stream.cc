#include "services/executor/device_stream.h"

#include <sys/prctl.h>

#include <algorithm>

#include "common/net/events.h"
#include "compute/interpreter.h"
#include "kernels/matmul_threads.h"

namespace atl::executor {

namespace {

// The mesh of `item`'s function, for its collectives.
Shape MeshOfItem(const WorkItem& item) {
  return ir::MeshOf(*item.function, static_cast<int>(item.entry.num_shards));
}

// The collectives of one running shard: its gang's ops meet in the host's hub.
class GangCollectives final : public compute::Collectives {
 public:
  GangCollectives(CollectiveHub& hub, const WorkItem& item) : hub_(hub), item_(item) {}
  Result<Tensor> Run(uint32_t op_index, Tensor local) override {
    if (!item_.layout) return FailedPrecondition("the function was compiled without a layout");
    reached_.insert(op_index);
    ATOLL_ASSIGN_OR_RETURN(CollectiveOp op,
                           CollectiveOp::Of(*item_.function, op_index, MeshOfItem(item_)));
    return hub_.Run({item_.entry.run_id, item_.entry.node, op_index}, *item_.layout, op,
                    item_.entry.shard, std::move(local));
  }
  // The collectives this shard contributed to (or tried to).
  const std::set<uint32_t>& reached() const { return reached_; }

 private:
  CollectiveHub& hub_;
  const WorkItem& item_;
  std::set<uint32_t> reached_;
};

}  // namespace

void DeviceStream::AbandonCollectives(const WorkItem& item, const Status& why,
                                      const std::set<uint32_t>& reached) {
  if (!item.function || !item.layout) return;
  const auto& ops = item.function->ops;
  for (uint32_t i = 0; i < ops.size(); ++i) {
    if (!ir::IsCollective(ops[i].code) || reached.count(i)) continue;
    auto op = CollectiveOp::Of(*item.function, i, MeshOfItem(item));
    if (!op.ok()) continue;  // a function that failed validation never meets its gang
    hub_.Abandon({item.entry.run_id, item.entry.node, i}, *item.layout, *op, item.entry.shard, why);
  }
}

DeviceStream::DeviceStream(compute::Backend& backend, CollectiveHub& hub, OnDone on_done,
                           int matmul_threads, std::chrono::microseconds wait_spin)
    : backend_(backend),
      hub_(hub),
      on_done_(std::move(on_done)),
      matmul_threads_(matmul_threads),
      cv_(wait_spin),
      thread_([this] { Loop(); }) {}

DeviceStream::~DeviceStream() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
}

void DeviceStream::Enqueue(std::shared_ptr<WorkItem> item) {
  {
    MutexLock lock(mu_);
    // Dispatches arrive in gang order, so this is almost always an append.
    auto pos = std::upper_bound(
        queue_.begin(), queue_.end(), item->entry.gang_seq,
        [](uint64_t seq, const auto& queued) { return seq < queued->entry.gang_seq; });
    queue_.insert(pos, std::move(item));
  }
  cv_.NotifyAll();
}

void DeviceStream::Deliver(const std::shared_ptr<WorkItem>& item, uint32_t input, Tensor value) {
  {
    MutexLock lock(mu_);
    if (input >= item->inputs.size() || item->inputs[input].has_value()) return;
    item->inputs[input] = std::move(value);
    item->inputs_missing--;
  }
  cv_.NotifyAll();
}

void DeviceStream::Reserved(const std::shared_ptr<WorkItem>& item) {
  {
    MutexLock lock(mu_);
    if (item->reservations_missing > 0) item->reservations_missing--;
  }
  cv_.NotifyAll();
}

void DeviceStream::Fail(const std::shared_ptr<WorkItem>& item, Status status) {
  {
    MutexLock lock(mu_);
    if (item->failure.ok()) item->failure = std::move(status);
  }
  cv_.NotifyAll();
}

void DeviceStream::CancelRun(uint64_t run, const Status& why) {
  {
    MutexLock lock(mu_);
    for (const auto& item : queue_) {
      if (item->entry.run_id == run && item->failure.ok()) item->failure = why;
    }
    if (running_ && running_->entry.run_id == run) {
      running_->cancelled.store(true, std::memory_order_relaxed);
    }
  }
  cv_.NotifyAll();
}

size_t DeviceStream::queued() const {
  MutexLock lock(mu_);
  return queue_.size();
}

void DeviceStream::Loop() {
  // A sim device sleeps for modelled time; the default 50 us timer slack would add that
  // much to every computation.
  prctl(PR_SET_TIMERSLACK, 1);
  kernels::SetMatmulThreads(matmul_threads_);
  while (true) {
    std::shared_ptr<WorkItem> item;
    {
      MutexLock lock(mu_);
      // The condition calls the predicate with mu_ held, which the analysis cannot see.
      cv_.Wait(lock.native(), [&]() NO_THREAD_SAFETY_ANALYSIS {
        return stop_ || (!queue_.empty() && queue_.front()->Runnable());
      });
      if (stop_) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      running_ = item;
    }
    // The item left the queue: nobody else touches its inputs any more.
    Completion done;
    done.item = item;
    done.start_us = NowMicros();
    if (!item->failure.ok()) {
      done.outputs = item->failure;
      AbandonCollectives(*item, item->failure);
    } else {
      std::vector<Tensor> inputs;
      inputs.reserve(item->inputs.size());
      for (auto& in : item->inputs) inputs.push_back(std::move(*in));
      GangCollectives collectives(hub_, *item);
      done.outputs =
          compute::RunFunction(*item->function, static_cast<int>(item->entry.shard),
                               static_cast<int>(item->entry.num_shards), std::move(inputs),
                               backend_, &collectives, &item->cancelled);
      // Failed (or cancelled) part way: the collectives it had not reached yet would
      // otherwise hold the rest of its gang, and their devices, until the hub's timeout.
      if (!done.outputs.ok())
        AbandonCollectives(*item, done.outputs.status(), collectives.reached());
    }
    {
      MutexLock lock(mu_);
      running_.reset();
    }
    done.end_us = NowMicros();
    busy_us_.fetch_add(static_cast<uint64_t>(done.end_us - done.start_us),
                       std::memory_order_relaxed);
    on_done_(std::move(done));
  }
}

}  // namespace atl::executor
