#include "cli/drain.h"

#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/rm_member.h"
#include "common/proto/protocol.h"

namespace atl {

namespace {

// How long the RM may take to move a host's slices: its compile bound and then some.
constexpr auto kDrainTimeout = std::chrono::seconds(20);

}  // namespace

void DrainHosts(const ClusterInfo& info) {
  for (const auto& p : info.processes) {
    if (p.role != "executor") continue;
    auto drained = AskRmAsMember<proto::DrainHostReply>(info.rm_endpoint, info.keys_dir,
                                                        proto::DrainHost{p.target}, kDrainTimeout);
    if (!drained.ok()) {
      std::cerr << "atoll: could not drain host " << p.target << " (" << drained.status().message()
                << "); stopping it all the same: the RM moves its slices once it notices"
                << std::endl;
      continue;
    }
    const size_t moved = drained->moved.size();
    std::cout << fmt::format("drained host {}: {} slice{} moved off it", p.target, moved,
                             moved == 1 ? "" : "s");
    if (!drained->kept.empty()) {
      std::cout << fmt::format(
          "; slices {} found no other device and keep its devices, so their runs fail once "
          "it is gone",
          fmt::join(drained->kept, ","));
    }
    std::cout << std::endl;
  }
}

}  // namespace atl
