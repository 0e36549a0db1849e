// RestartBackoff: how long a supervisor waits before it starts a crashed service again, as
// Kubernetes' restart policy does: the first restart comes after `initial`, each further one
// after twice the delay before it, up to `cap`; a service that stayed up for `reset_after`
// before it crashed starts over at `initial` (it was healthy; this crash is a new story).
//
// Pure: the caller passes the times (LocalCluster the steady clock's, tests fake ones).
//
// Example:
//   RestartBackoff backoff;                          // 100 ms doubling to 10 s
//   auto delay = backoff.OnExit(started, exited);    // 100 ms, then 200 ms, 400 ms, ...
#pragma once

#include <chrono>

namespace atl {

struct BackoffOptions {
  std::chrono::milliseconds initial{100};
  std::chrono::milliseconds cap{10000};
  std::chrono::milliseconds reset_after{10000};
};

class RestartBackoff {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit RestartBackoff(BackoffOptions options = {});

  // The service that started at `started` exited at `exited`: the delay before starting it
  // again.
  std::chrono::milliseconds OnExit(TimePoint started, TimePoint exited);

 private:
  BackoffOptions options_;
  std::chrono::milliseconds last_{0};  // the previous delay; 0: none since the last reset
};

}  // namespace atl
