// DeviceStreams: the host's device streams by local device index, and the ItemSink that
// hands each item's inputs, grants and failures to the stream of its entry's device.
//
// Thread-safety: Add and Clear run on the loop thread while no other thread uses the set
// (start-up, shutdown); the rest may be called from any thread, each stream locking itself.
// Every item passed in must name an existing device (admission checks it).
#pragma once

#include <memory>
#include <vector>

#include "services/executor/device_stream.h"
#include "services/executor/work_item.h"

namespace atl::executor {

class DeviceStreams final : public ItemSink {
 public:
  void Add(std::unique_ptr<DeviceStream> stream) { streams_.push_back(std::move(stream)); }
  // Stops and joins every stream's thread; their queued items are dropped.
  void Clear() { streams_.clear(); }

  size_t size() const { return streams_.size(); }
  const DeviceStream& at(size_t device) const { return *streams_[device]; }

  // Queues `item` on its device's stream, at its place in gang order.
  void Enqueue(std::shared_ptr<WorkItem> item) {
    DeviceStream& stream = *streams_[item->entry.device];
    stream.Enqueue(std::move(item));
  }
  void Deliver(const std::shared_ptr<WorkItem>& item, uint32_t input, Tensor value) override {
    streams_[item->entry.device]->Deliver(item, input, std::move(value));
  }
  void Reserved(const std::shared_ptr<WorkItem>& item) override {
    streams_[item->entry.device]->Reserved(item);
  }
  void Fail(const std::shared_ptr<WorkItem>& item, Status status) override {
    streams_[item->entry.device]->Fail(item, std::move(status));
  }
  // Stops run `run` on every device (DeviceStream::CancelRun).
  void CancelRun(uint64_t run, const Status& why) {
    for (auto& stream : streams_) stream->CancelRun(run, why);
  }

 private:
  std::vector<std::unique_ptr<DeviceStream>> streams_;
};

}  // namespace atl::executor
