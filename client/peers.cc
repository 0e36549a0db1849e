#include "client/peers.h"

#include <algorithm>
#include <utility>

namespace atl {

void AddPeers(std::map<std::string, proto::SubmitProgram>& per_scheduler) {
  std::map<std::pair<uint32_t, uint32_t>, proto::PlacedEntry*> by_shard;  // (node, shard)
  for (auto& [scheduler, submit] : per_scheduler) {
    for (auto& placed : submit.entries) by_shard[{placed.entry.node, placed.entry.shard}] = &placed;
  }
  for (const auto& [key, producer] : by_shard) {
    for (const auto& dests : producer->entry.outputs) {
      for (const auto& dest : dests) {
        if (dest.kind != proto::OutputDest::kTuple) continue;
        auto consumer = by_shard.find({dest.node, dest.shard});
        if (consumer == by_shard.end() || consumer->second->executor == producer->executor) {
          continue;
        }
        auto& peers = consumer->second->entry.peers;
        if (std::find(peers.begin(), peers.end(), producer->executor) == peers.end()) {
          peers.push_back(producer->executor);
        }
      }
    }
  }
}

}  // namespace atl
