#include "services/executor/held_dispatches.h"

#include <algorithm>

#include "common/proto/codec.h"

namespace atl::executor {

bool NamesComingFunction(const proto::Dispatch& dispatch, const IsComing& coming) {
  return std::any_of(dispatch.entries.begin(), dispatch.entries.end(),
                     [&](const auto& e) { return e.error_code == 0 && coming(e.function_id); });
}

void HeldDispatches::Add(proto::Dispatch dispatch, std::string scheduler, int64_t now_us) {
  held_.push_back({std::move(dispatch), std::move(scheduler), now_us});
}

std::vector<HeldDispatches::Held> HeldDispatches::TakeReady(const IsComing& coming,
                                                            int64_t now_us) {
  std::vector<Held> ready;
  while (!held_.empty()) {
    Held& front = held_.front();
    if (now_us - front.since_us <= wait_us_ && NamesComingFunction(front.dispatch, coming)) {
      break;
    }
    ready.push_back(std::move(front));
    held_.pop_front();
  }
  return ready;
}

size_t HeldDispatches::FailRun(uint64_t run, const Status& why) {
  const proto::Error error = proto::ToError(why);
  size_t failed = 0;
  for (Held& held : held_) {
    for (proto::Entry& e : held.dispatch.entries) {
      if (e.run_id != run || e.error_code != 0) continue;
      e.error_code = error.code;
      e.error = error.message;
      ++failed;
    }
  }
  return failed;
}

}  // namespace atl::executor
