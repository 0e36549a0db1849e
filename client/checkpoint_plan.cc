#include "client/checkpoint_plan.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace atl {

Result<SavePlan> PlanSave(const std::vector<SaveSource>& tensors, uint64_t client,
                          const std::string& dir, const std::string& tag,
                          const std::function<std::string(const std::string&)>& host_of) {
  std::set<std::string> names;
  for (const SaveSource& t : tensors) {
    ATOLL_RETURN_IF_ERROR(checkpoint::CheckTensorName(t.name));
    if (!names.insert(t.name).second) {
      return InvalidArgument("a checkpoint names each tensor once; '" + t.name + "' twice");
    }
  }
  SavePlan plan;
  std::vector<size_t> values;  // tensors that are values, in order
  for (size_t i = 0; i < tensors.size(); ++i) {
    const SaveSource& t = tensors[i];
    checkpoint::TensorEntry entry;
    entry.name = t.name;
    if (t.value != nullptr) {
      entry.dtype = t.value->dtype();
      entry.shape = t.value->shape();
      entry.mesh = {1};
      entry.split.assign(entry.shape.size(), -1);
      entry.blocks.push_back({checkpoint::BlockFileName(t.name, 0, tag),
                              Shape(entry.shape.size(), 0), entry.shape, 0, 0, ""});
      plan.files.push_back(entry.blocks.back().file);
      values.push_back(i);
      plan.index.tensors.push_back(std::move(entry));
      continue;
    }
    const ResultPlan& p = *t.plan;
    if (!ir::IsStatic(p.type)) {
      return InvalidArgument(
          fmt::format("tensor '{}' is {}{}: a shape known only once computed "
                      "cannot be saved",
                      t.name, DTypeName(p.type.dtype), ShapeString(p.type.shape)));
    }
    entry.dtype = p.type.dtype;
    entry.shape = p.type.shape;
    entry.mesh = p.mesh;
    entry.split = p.type.split;
    const Shape local = ir::ShardShape(p.type, p.mesh);
    for (size_t s = 0; s < p.shards.size(); ++s) {
      if (!ir::IsFirstReplica(p.type, p.mesh, static_cast<int>(s))) continue;
      const ResultShard& shard = p.shards[s];
      const std::string file = checkpoint::BlockFileName(t.name, entry.blocks.size(), tag);
      auto& request = plan.per_store[shard.store];
      request.shards.push_back({shard.object_id, shard.shard, file});
      plan.sources.push_back({i, entry.blocks.size(), shard.store, request.shards.size() - 1});
      entry.blocks.push_back({file, ir::ShardOrigin(p.type, p.mesh, static_cast<int>(s)), local, 0,
                              0, host_of(shard.store)});
      plan.files.push_back(file);
    }
    plan.index.tensors.push_back(std::move(entry));
  }
  if (plan.per_store.empty()) {
    return InvalidArgument(
        "a checkpoint is written by the object stores that hold its futures: save at least one "
        "future of a run (values alone have no store to go to)");
  }
  const std::string& first = plan.per_store.begin()->first;
  for (size_t i : values) {
    checkpoint::TensorEntry& entry = plan.index.tensors[i];
    entry.blocks[0].host = host_of(first);
    plan.sources.push_back({i, 0, first, plan.per_store[first].shards.size() + plan.values.size()});
    plan.values.push_back(tensors[i].value);
    for (auto& [store, request] : plan.per_store) {
      request.values.push_back({entry.blocks[0].file, entry.dtype, entry.shape});
    }
  }
  for (auto& [store, request] : plan.per_store) {
    request.owner_client = client;
    request.dir = dir;
  }
  return plan;
}

Status ApplySaveReplies(SavePlan& plan,
                        const std::map<std::string, proto::SaveShardsReply>& replies) {
  for (const SavePlan::BlockSource& source : plan.sources) {
    checkpoint::Block& block = plan.index.tensors[source.tensor].blocks[source.block];
    auto it = replies.find(source.store);
    if (it == replies.end() || source.file >= it->second.files.size() ||
        it->second.files[source.file].file != block.file) {
      return Internal(fmt::format("the object store at {} did not say how it wrote '{}'",
                                  source.store, block.file));
    }
    block.bytes = it->second.files[source.file].bytes;
    block.crc32 = it->second.files[source.file].crc32;
  }
  return Status::Ok();
}

Result<ResultPlan> PlanLoad(const checkpoint::TensorEntry& entry, const ir::TensorType& target,
                            const Shape& mesh, const std::vector<std::string>& stores,
                            uint64_t client, const std::string& dir, uint64_t object_id,
                            std::map<std::string, proto::LoadShards>& per_store) {
  if (target.dtype != entry.dtype || target.shape != entry.shape) {
    return InvalidArgument(fmt::format("tensor '{}' is {}{} in the checkpoint, not {}{}",
                                       entry.name, DTypeName(entry.dtype), ShapeString(entry.shape),
                                       DTypeName(target.dtype), ShapeString(target.shape)));
  }
  ATOLL_RETURN_IF_ERROR(ir::CheckLayout("tensor '" + entry.name + "'", target, mesh));
  if (static_cast<int64_t>(stores.size()) != NumElements(mesh)) {
    return InvalidArgument(
        fmt::format("{} devices for a mesh {}", stores.size(), ShapeString(mesh)));
  }
  ResultPlan result;
  result.type = target;
  result.mesh = mesh;
  const Shape local = ir::ShardShape(target, mesh);
  for (size_t s = 0; s < stores.size(); ++s) {
    const Shape origin = ir::ShardOrigin(target, mesh, static_cast<int>(s));
    proto::ShardFromFiles shard{object_id, static_cast<uint32_t>(s), target.dtype, local, {}};
    for (const checkpoint::Block& block : entry.blocks) {
      // The part of the saved block inside this shard: [lo, hi) in global coordinates.
      Shape lo(local.size()), hi(local.size());
      bool empty = false;
      for (size_t d = 0; d < local.size(); ++d) {
        lo[d] = std::max(origin[d], block.offset[d]);
        hi[d] = std::min(origin[d] + local[d], block.offset[d] + block.shape[d]);
        empty = empty || lo[d] >= hi[d];
      }
      if (empty) continue;
      proto::FilePiece piece{block.file, block.bytes, block.crc32, block.shape, {}, {}, {}};
      for (size_t d = 0; d < local.size(); ++d) {
        piece.begin.push_back(lo[d] - block.offset[d]);
        piece.size.push_back(hi[d] - lo[d]);
        piece.at.push_back(lo[d] - origin[d]);
      }
      shard.pieces.push_back(std::move(piece));
    }
    proto::LoadShards& request = per_store[stores[s]];
    request.owner_client = client;
    request.dir = dir;
    request.shards.push_back(std::move(shard));
    result.shards.push_back({stores[s], object_id, static_cast<uint32_t>(s)});
  }
  return result;
}

}  // namespace atl
