#include "launcher/restart_backoff.h"

#include <algorithm>

namespace atl {

RestartBackoff::RestartBackoff(BackoffOptions options) : options_(options) {}

std::chrono::milliseconds RestartBackoff::OnExit(TimePoint started, TimePoint exited) {
  if (exited - started >= options_.reset_after) last_ = std::chrono::milliseconds(0);
  last_ = last_.count() == 0 ? options_.initial : std::min(last_ * 2, options_.cap);
  return last_;
}

}  // namespace atl
