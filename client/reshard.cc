#include "client/reshard.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace atl {

bool SameLayout(const Layout& from, const Layout& to) {
  return from.type == to.type && from.mesh == to.mesh;
}

Result<std::vector<PieceRoute>> PlanReshard(const Layout& from, const Layout& to) {
  if (from.type.dtype != to.type.dtype || from.type.shape != to.type.shape) {
    return InvalidArgument(fmt::format("cannot reshard {}{} into {}{}", DTypeName(from.type.dtype),
                                       ShapeString(from.type.shape), DTypeName(to.type.dtype),
                                       ShapeString(to.type.shape)));
  }
  if (!ir::IsStatic(from.type)) {
    return InvalidArgument("cannot reshard a tensor of dynamic shape " +
                           ShapeString(from.type.shape));
  }
  const size_t rank = from.type.shape.size();
  const Shape from_local = ir::ShardShape(from.type, from.mesh);
  const Shape to_local = ir::ShardShape(to.type, to.mesh);
  // The producer's distinct blocks, by origin, each with the shards that hold it.
  std::map<Shape, std::vector<uint32_t>> blocks;
  for (size_t p = 0; p < from.hosts.size(); ++p) {
    blocks[ir::ShardOrigin(from.type, from.mesh, static_cast<int>(p))].push_back(
        static_cast<uint32_t>(p));
  }
  std::vector<PieceRoute> routes;
  for (size_t c = 0; c < to.hosts.size(); ++c) {
    const Shape to_origin = ir::ShardOrigin(to.type, to.mesh, static_cast<int>(c));
    const size_t first = routes.size();
    for (const auto& [origin, holders] : blocks) {
      proto::Piece piece;
      bool empty = false;
      for (size_t d = 0; d < rank && !empty; ++d) {
        const int64_t lo = std::max(origin[d], to_origin[d]);
        const int64_t hi = std::min(origin[d] + from_local[d], to_origin[d] + to_local[d]);
        empty = hi <= lo;
        piece.begin.push_back(lo - origin[d]);
        piece.size.push_back(hi - lo);
        piece.dst_begin.push_back(lo - to_origin[d]);
      }
      if (empty) continue;
      piece.dst_shape = to_local;
      auto local = std::find_if(holders.begin(), holders.end(),
                                [&](uint32_t p) { return from.hosts[p] == to.hosts[c]; });
      const uint32_t source = local != holders.end() ? *local : holders[c % holders.size()];
      routes.push_back({source, static_cast<uint32_t>(c), std::move(piece)});
    }
    for (size_t r = first; r < routes.size(); ++r) {
      routes[r].piece.of = static_cast<uint32_t>(routes.size() - first);
    }
  }
  return routes;
}

}  // namespace atl
