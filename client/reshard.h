// Resharding: the transfer an edge needs when its producer and consumer lay the tensor out
// differently (another sharding, another mesh, another number of devices). Every consumer
// shard gets each element of its block exactly once, as pieces cut from producer shards
// and tagged with where they go; the edge stays one transfer whatever the shard counts.
#pragma once

#include <string>
#include <vector>

#include "common/ir/ir.h"
#include "common/proto/protocol.h"

namespace atl {

// Where each shard of a tensor lives.
struct Layout {
  ir::TensorType type;
  Shape mesh;
  std::vector<std::string> hosts;  // per shard: its host, to prefer a replica next door
};

// True when shard i of `from` is exactly shard i of `to`: the edge moves whole shards.
bool SameLayout(const Layout& from, const Layout& to);

struct PieceRoute {
  uint32_t from = 0;  // producer shard
  uint32_t to = 0;    // consumer shard
  proto::Piece piece;
};

// The pieces that take a tensor laid out as `from` to the layout `to`, grouped by consumer
// shard. Of a block several producer shards replicate, the one on the consumer's host is
// used, or else one chosen round-robin. InvalidArgument when the two are not the same
// global tensor or a shape is dynamic.
Result<std::vector<PieceRoute>> PlanReshard(const Layout& from, const Layout& to);

}  // namespace atl
