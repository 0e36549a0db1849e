#include "client/sharding.h"

#include <cstring>

#include <fmt/format.h>

#include "common/base/tensor_block.h"

namespace atl {

Result<Tensor> ShardOf(const Tensor& t, const ir::TensorType& type, const Shape& mesh, int shard) {
  if (t.shape() != type.shape) {
    return InvalidArgument(fmt::format("cannot cut {} as a {} tensor", ShapeString(t.shape()),
                                       ShapeString(type.shape)));
  }
  return ExtractBlock(t, ir::ShardOrigin(type, mesh, shard), ir::ShardShape(type, mesh));
}

Result<Tensor> Assemble(const std::vector<Tensor>& shards, const ir::TensorType& type,
                        const Shape& mesh) {
  if (shards.empty() || static_cast<int64_t>(shards.size()) != NumElements(mesh)) {
    return InvalidArgument(
        fmt::format("{} shards for a mesh of {} devices", shards.size(), NumElements(mesh)));
  }
  // Replicas must agree: a difference means devices diverged, which is a bug.
  auto differ = [&](size_t i, const Tensor& want) {
    return Internal(
        fmt::format("replicated value differs between devices: shard {} holds {}, "
                    "its replica {}",
                    i, shards[i].ToString(), want.ToString()));
  };
  if (ir::IsReplicated(type)) {
    for (size_t i = 1; i < shards.size(); ++i) {
      if (!(shards[i] == shards[0])) return differ(i, shards[0]);
    }
    return shards[0];
  }
  if (!ir::IsStatic(type)) {
    for (size_t d = 0; d < type.shape.size(); ++d) {
      if (type.split[d] >= 0) return Concat(shards, d);
    }
  }
  Tensor out(type.dtype, type.shape);
  const Shape local = ir::ShardShape(type, mesh);
  for (size_t i = 0; i < shards.size(); ++i) {
    if (shards[i].shape() != local || shards[i].dtype() != type.dtype) {
      return InvalidArgument(fmt::format(
          "shard {} is {}{}, a shard of this result is {}{}", i, DTypeName(shards[i].dtype()),
          ShapeString(shards[i].shape()), DTypeName(type.dtype), ShapeString(local)));
    }
    if (ir::IsFirstReplica(type, mesh, static_cast<int>(i))) {
      ATOLL_RETURN_IF_ERROR(InsertBlock(out, shards[i], ir::ShardOrigin(type, mesh, i)));
    }
  }
  for (size_t i = 0; i < shards.size(); ++i) {
    if (ir::IsFirstReplica(type, mesh, static_cast<int>(i))) continue;
    ATOLL_ASSIGN_OR_RETURN(Tensor first, ExtractBlock(out, ir::ShardOrigin(type, mesh, i), local));
    if (!(first == shards[i])) return differ(i, first);
  }
  return out;
}

}  // namespace atl
