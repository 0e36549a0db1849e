#include "services/executor/input_mailbox.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

namespace atl::executor {

void InputMailbox::Await(const InputKey& key, std::shared_ptr<WorkItem> item) {
  std::optional<Result<Tensor>> early;
  {
    MutexLock lock(mu_);
    if (auto it = early_.find(key); it != early_.end()) {
      early = std::move(it->second);
      early_.erase(it);
    } else {
      waiting_[key] = {std::move(item), -1};
      return;
    }
  }
  if (early->ok()) {
    sink_.Deliver(item, key.input, std::move(*early).value());
  } else {
    sink_.Fail(item, early->status());
  }
}

void InputMailbox::Deliver(const InputKey& key, Result<Tensor> value) {
  std::shared_ptr<WorkItem> item;
  {
    MutexLock lock(mu_);
    auto it = waiting_.find(key);
    if (it == waiting_.end()) {
      // The producer was faster than our Dispatch: keep the tuple until the entry arrives.
      early_.insert_or_assign(key, std::move(value));
      return;
    }
    item = std::move(it->second.item);
    waiting_.erase(it);
  }
  if (value.ok()) {
    sink_.Deliver(item, key.input, std::move(value).value());
  } else {
    sink_.Fail(item, value.status());
  }
}

size_t InputMailbox::FailWaitingOn(const std::string& peer, const Status& why) {
  std::vector<std::shared_ptr<WorkItem>> doomed;
  {
    MutexLock lock(mu_);
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      const auto& peers = it->second.item->entry.peers;
      if (std::find(peers.begin(), peers.end(), peer) == peers.end()) {
        ++it;
        continue;
      }
      doomed.push_back(std::move(it->second.item));
      it = waiting_.erase(it);
    }
  }
  for (const auto& item : doomed) sink_.Fail(item, why);
  return doomed.size();
}

std::vector<InputKey> InputMailbox::FailWaitingLongerThan(int64_t now_us, int64_t wait_us) {
  std::vector<std::pair<InputKey, std::shared_ptr<WorkItem>>> doomed;
  {
    MutexLock lock(mu_);
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      int64_t& since = it->second.seen_us;
      if (since < 0) since = now_us;
      if (now_us - since <= wait_us) {
        ++it;
        continue;
      }
      doomed.emplace_back(it->first, std::move(it->second.item));
      it = waiting_.erase(it);
    }
  }
  std::vector<InputKey> failed;
  for (const auto& [key, item] : doomed) {
    sink_.Fail(item, DeadlineExceeded(
                         fmt::format("run {} node {} shard {} waited over {} ms for input {}: its "
                                     "producer was scheduled but the tuple never came",
                                     key.run, key.node, key.shard, wait_us / 1000, key.input)));
    failed.push_back(key);
  }
  return failed;
}

size_t InputMailbox::waiting() const {
  MutexLock lock(mu_);
  return waiting_.size();
}

size_t InputMailbox::early() const {
  MutexLock lock(mu_);
  return early_.size();
}

}  // namespace atl::executor
