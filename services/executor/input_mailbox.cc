#include "services/executor/input_mailbox.h"

#include <algorithm>
#include <optional>

namespace atl::executor {

void InputMailbox::Await(const InputKey& key, std::shared_ptr<WorkItem> item) {
  std::optional<Result<Tensor>> early;
  {
    std::lock_guard lock(mu_);
    if (auto it = early_.find(key); it != early_.end()) {
      early = std::move(it->second);
      early_.erase(it);
    } else {
      waiting_[key] = std::move(item);
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
    std::lock_guard lock(mu_);
    auto it = waiting_.find(key);
    if (it == waiting_.end()) {
      // The producer was faster than our Dispatch: keep the tuple until the entry arrives.
      early_.insert_or_assign(key, std::move(value));
      return;
    }
    item = std::move(it->second);
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
    std::lock_guard lock(mu_);
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      const auto& peers = it->second->entry.peers;
      if (std::find(peers.begin(), peers.end(), peer) == peers.end()) {
        ++it;
        continue;
      }
      doomed.push_back(std::move(it->second));
      it = waiting_.erase(it);
    }
  }
  for (const auto& item : doomed) sink_.Fail(item, why);
  return doomed.size();
}

size_t InputMailbox::waiting() const {
  std::lock_guard lock(mu_);
  return waiting_.size();
}

size_t InputMailbox::early() const {
  std::lock_guard lock(mu_);
  return early_.size();
}

}  // namespace atl::executor
