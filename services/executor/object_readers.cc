#include "services/executor/object_readers.h"

namespace atl::executor {

void ObjectReaders::Await(const ObjectShard& object, std::shared_ptr<WorkItem> item,
                          uint32_t input) {
  MutexLock lock(mu_);
  waiting_[object].push_back({std::move(item), input});
}

std::vector<ObjectReaders::Reader> ObjectReaders::Take(const ObjectShard& object) {
  MutexLock lock(mu_);
  auto it = waiting_.find(object);
  if (it == waiting_.end()) return {};
  std::vector<Reader> readers = std::move(it->second);
  waiting_.erase(it);
  return readers;
}

void ObjectReaders::Deliver(const ObjectShard& object, const Tensor& value) {
  for (Reader& r : Take(object)) sink_.Deliver(r.item, r.input, value);
}

void ObjectReaders::Fail(const ObjectShard& object, const Status& why) {
  for (Reader& r : Take(object)) sink_.Fail(r.item, why);
}

}  // namespace atl::executor
