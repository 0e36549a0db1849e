#include "cli/follow_events.h"

#include <unistd.h>

#include <chrono>
#include <iostream>

#include <fmt/format.h>

#include "common/net/event_loop.h"
#include "common/net/transport.h"

namespace atl {

void FollowEvents(const GlobalOptions& global, const FollowOptions& options,
                  const OnEvent& on_event) {
  using Clock = std::chrono::steady_clock;
  auto info = ResolveCluster(global);
  if (!info.ok()) Fail(info.status());
  if (info->events_out.empty()) {
    Fail(options.command + ": no event bus endpoint known for the RM at " + info->rm_endpoint +
         "; pass --events EP");
  }
  InstallShutdownSignals();
  zmq::context_t context(1);
  if (Status s = SecureContext(context, global); !s.ok()) Fail(s.WithContext(options.command));
  zmq::socket_t sub = net::MakeSocket(context, zmq::socket_type::sub);
  try {
    if (options.topics.empty()) sub.set(zmq::sockopt::subscribe, "");
    for (const auto& t : options.topics) sub.set(zmq::sockopt::subscribe, t);
  } catch (const zmq::error_t& e) {
    Fail(options.command + ": cannot subscribe: " + e.what());
  }
  if (Status s = net::Connect(sub, info->events_out); !s.ok()) Fail(s.WithContext(options.command));
  if (!options.banner.empty() && isatty(STDERR_FILENO)) {
    std::cerr << fmt::format(fmt::runtime(options.banner), info->events_out) << std::endl;
  }

  const bool bounded = options.timeout_s > 0;
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000));
  bool warned_malformed = false;
  while (!ShutdownRequested()) {
    auto wait = std::chrono::milliseconds(200);
    if (bounded) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return;
      wait = std::min(wait, left);
    }
    auto frames = net::RecvFrames(sub, wait);
    if (!frames.ok()) {
      if (ShutdownRequested()) return;
      Fail(frames.status().WithContext(options.command));
    }
    if (!*frames) continue;
    auto event = (*frames)->size() == 2 ? DecodeEvent((**frames)[0], (**frames)[1])
                                        : Result<Event>(InvalidArgument("event is not 2 frames"));
    Result<bool> go_on = event.ok() ? on_event(*event) : Result<bool>(event.status());
    if (!go_on.ok()) {
      if (!warned_malformed) {
        std::cerr << "atoll: " << options.command << ": skipping malformed events ("
                  << go_on.status().message() << ")" << std::endl;
        warned_malformed = true;
      }
      continue;
    }
    if (!*go_on) return;
  }
}

}  // namespace atl
