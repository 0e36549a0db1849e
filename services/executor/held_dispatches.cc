#include "services/executor/held_dispatches.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/proto/codec.h"

namespace atl::executor {

namespace {

// Gives `entry` up with `error`, unless its scheduler gave it up already (its error stands).
// Returns whether it took the error.
bool GiveUp(proto::Entry& entry, const proto::Error& error) {
  if (entry.error_code != 0) return false;
  entry.error_code = error.code;
  entry.error = error.message;
  return true;
}

}  // namespace

void HeldDispatches::Expect(const std::vector<uint64_t>& functions, int64_t until_us) {
  awaited_.insert(functions.begin(), functions.end());
  awaited_until_us_ = until_us;
}

bool HeldDispatches::AwaitsFunction(const proto::Dispatch& dispatch, const IsCompiled& compiled,
                                    int64_t now_us) const {
  if (awaited_.empty() || now_us >= awaited_until_us_) return false;
  return std::any_of(dispatch.entries.begin(), dispatch.entries.end(), [&](const auto& e) {
    return e.error_code == 0 && awaited_.count(e.function_id) != 0 && !compiled(e.function_id);
  });
}

bool HeldDispatches::MustHold(const proto::Dispatch& dispatch, const IsCompiled& compiled,
                              int64_t now_us) const {
  return !held_.empty() || AwaitsFunction(dispatch, compiled, now_us);
}

Status HeldDispatches::Add(proto::Dispatch dispatch, std::string scheduler) {
  uint64_t bytes = 0;
  for (const proto::Entry& e : dispatch.entries) {
    for (const proto::InputSource& input : e.inputs) bytes += input.bytes.size();
  }
  Status given_up = Status::Ok();
  if (bytes_ + bytes > max_bytes_) {
    given_up = ResourceExhausted(fmt::format(
        "dispatch of run {} given up: it brings {} bytes of argument values to the {} held "
        "here for functions still to be compiled, past the bound of {} "
        "([executor] held_dispatch_bytes)",
        dispatch.entries.front().run_id, bytes, bytes_, max_bytes_));
    const proto::Error error = proto::ToError(given_up);
    for (proto::Entry& e : dispatch.entries) {
      for (proto::InputSource& input : e.inputs) input.bytes = {};
      GiveUp(e, error);
    }
    bytes = 0;
  }
  bytes_ += bytes;
  held_.push_back({std::move(dispatch), std::move(scheduler), bytes});
  return given_up;
}

std::vector<HeldDispatches::Held> HeldDispatches::TakeReady(const IsCompiled& compiled,
                                                            int64_t now_us) {
  if (now_us >= awaited_until_us_) awaited_.clear();  // what has not come will not
  std::vector<Held> ready;
  while (!held_.empty() && !AwaitsFunction(held_.front().dispatch, compiled, now_us)) {
    bytes_ -= held_.front().bytes;
    ready.push_back(std::move(held_.front()));
    held_.pop_front();
  }
  return ready;
}

size_t HeldDispatches::FailRun(uint64_t run, const Status& why) {
  const proto::Error error = proto::ToError(why);
  size_t failed = 0;
  for (Held& held : held_) {
    for (proto::Entry& e : held.dispatch.entries) {
      if (e.run_id == run && GiveUp(e, error)) ++failed;
    }
  }
  return failed;
}

}  // namespace atl::executor
