// ObjectReaders: shards on this host that read an object shard this host is still writing
// (op-by-op calls, each on the one before's result), waiting for its value. The device
// thread that finishes the writer hands them the value at once, as it feeds a chain's
// next shard, so that a call's input does not wait for the executor's loop to wake and
// route the output; the loop hands over the failures, and the value to readers that came
// after the device thread looked.
//
// Thread-safe: the loop awaits; the loop and device threads deliver. The sink is called
// with no lock held.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/base/mutex.h"
#include "services/executor/work_item.h"

namespace atl::executor {

class ObjectReaders {
 public:
  using ObjectShard = std::pair<uint64_t, uint32_t>;  // object id, shard

  // `sink` receives every value and failure; it must outlive this.
  explicit ObjectReaders(ItemSink& sink) : sink_(sink) {}

  // Input `input` of `item` waits for object shard `object`.
  void Await(const ObjectShard& object, std::shared_ptr<WorkItem> item, uint32_t input);
  // Hands `value` to every shard waiting for `object`.
  void Deliver(const ObjectShard& object, const Tensor& value);
  // Fails every shard waiting for `object` with its writer's failure `why`.
  void Fail(const ObjectShard& object, const Status& why);

 private:
  struct Reader {
    std::shared_ptr<WorkItem> item;
    uint32_t input = 0;
  };
  std::vector<Reader> Take(const ObjectShard& object);

  ItemSink& sink_;
  Mutex mu_;
  std::map<ObjectShard, std::vector<Reader>> waiting_ GUARDED_BY(mu_);
};

}  // namespace atl::executor
