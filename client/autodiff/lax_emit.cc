#include "client/autodiff/lax_emit.h"

#include <algorithm>

#include <fmt/format.h>

namespace atl::autodiff {

using ir::OpCode;
using ir::Operand;

Result<Operand> LaxDy(Backward& b, const OpGrad& g) { return b.Materialize(g.dy, g.result); }

Status NoRuleFor(const ir::Op& op, std::string_view why) {
  return InvalidArgument(fmt::format("{}: no gradient rule yet ({})", ir::OpName(op.code), why));
}

Result<Operand> ScalarOf(Backward& b, DType dtype, double value) {
  return b.Emit(OpCode::kFull, {}, value, {static_cast<int64_t>(dtype)});
}

Result<Operand> FilledLike(Backward& b, const Operand& x, double value) {
  return b.Emit(OpCode::kFillLike, {x}, value);
}

Result<Operand> Times(Backward& b, const Operand& x, const Operand& y) {
  return b.Emit(OpCode::kMul, {x, y});
}

Result<Operand> Over(Backward& b, const Operand& x, const Operand& y) {
  return b.Emit(OpCode::kDiv, {x, y});
}

Result<Operand> Plus(Backward& b, const Operand& x, const Operand& y) {
  return b.Emit(OpCode::kAdd, {x, y});
}

Shape ShapeOf(Backward& b, const Operand& v) { return b.TypeOf(v).shape; }

Result<Operand> SumOver(Backward& b, Operand v, std::vector<int64_t> dims) {
  std::sort(dims.rbegin(), dims.rend());
  for (int64_t d : dims) {
    ATOLL_ASSIGN_OR_RETURN(v, b.Emit(OpCode::kReduceSum, {v}, static_cast<double>(d)));
  }
  return v;
}

Result<Operand> BroadcastBack(Backward& b, const Operand& v, const Shape& shape,
                              const std::vector<int64_t>& kept) {
  std::vector<int64_t> params(shape.begin(), shape.end());
  params.insert(params.end(), kept.begin(), kept.end());
  return b.Emit(OpCode::kBroadcastInDim, {v}, 0, std::move(params));
}

Result<Operand> BroadcastLike(Backward& b, const Operand& v, const Operand& like) {
  const ir::TensorType t = b.TypeOf(like);
  uint64_t cuts = 0;  // broadcast_in_dim's attr: 4 bits a dimension, 1 + its mesh axis
  for (size_t d = 0; d < t.split.size(); ++d) {
    if (t.split[d] >= 0) cuts |= static_cast<uint64_t>(t.split[d] + 1) << (4 * d);
  }
  return b.Emit(OpCode::kBroadcastInDim, {v}, static_cast<double>(cuts),
                std::vector<int64_t>(t.shape.begin(), t.shape.end()));
}

Result<Operand> IotaOf(Backward& b, const Shape& shape, size_t dim) {
  std::vector<int64_t> params(shape.begin(), shape.end());
  params.push_back(static_cast<int64_t>(dim));
  return b.Emit(OpCode::kIota, {}, static_cast<double>(DType::kI32), std::move(params));
}

Status NotCut(Backward& b, const ir::Op& op, const std::vector<int64_t>& dims) {
  const ir::TensorType t = b.TypeOf(op.operands[0]);
  for (int64_t d : dims) {
    if (t.split[static_cast<size_t>(d)] >= 0) {
      return NoRuleFor(op, fmt::format("dimension {} it runs along is cut over devices", d));
    }
  }
  return Status::Ok();
}

}  // namespace atl::autodiff
