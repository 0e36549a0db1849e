#include "compute/cpu_ops.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "common/base/dtype_types.h"
#include "compute/cancellation.h"
#include "compute/cpu_kernels.h"
#include "kernels/arithmetic.h"
#include "kernels/cast.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/filter.h"
#include "kernels/matmul.h"
#include "kernels/nn.h"
#include "kernels/optim.h"
#include "kernels/reduce.h"
#include "kernels/shape_ops.h"
#include "kernels/spin.h"
#include "kernels/topk.h"

namespace atl::compute {

namespace {

using ir::OpCode;
using Operands = std::span<const Tensor* const>;

// The first N operands as tensors. RunCpuOp has checked the operand count against the row's,
// which is at least N.
template <size_t N>
Result<std::array<const Tensor*, N>> Tensors(const ir::Op& op, Operands operands) {
  std::array<const Tensor*, N> tensors{};
  for (size_t i = 0; i < N; ++i) {
    if (operands[i] == nullptr) {
      return InvalidArgument(
          fmt::format("{}: operand {} must be a tensor, not a scalar", ir::OpName(op.code), i));
    }
    tensors[i] = operands[i];
  }
  return tensors;
}

// Multiplies every element of a float tensor by `factor` (in double, rounded once): a
// row-split shard's share of a batch mean is its local mean times local rows / global rows,
// so that the shards' shares sum to the mean.
Tensor Scale(Tensor t, double factor) {
  if (factor == 1.0) return t;
  VisitDType(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_floating_point_v<T>) {
      for (T& v : t.as<T>()) v = static_cast<T>(v * factor);
    }
  });
  return t;
}

}  // namespace

// The kernels of the rows (compute/cpu_kernels.h), in the table's order; outside the
// anonymous namespace, where the table's declarations of them are. Each takes the op and its
// operands, whose count RunCpuOp has checked.

// At most one of the two operands is a scalar. A [] tensor beside a tensor of another shape
// is broadcast over it, as a scalar is (expanded in its own dtype, so an i64 loses nothing).
Result<Tensor> RunArithmetic(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(const kernels::BinaryFn fn, BinaryFnOf(op.code));
  const Tensor* lhs = operands[0];
  const Tensor* rhs = operands[1];
  if (lhs != nullptr && rhs != nullptr && lhs->shape() != rhs->shape()) {
    if (rhs->shape().empty()) {
      ATOLL_ASSIGN_OR_RETURN(const Tensor wide, kernels::BroadcastTo(*rhs, lhs->shape()));
      return kernels::Binary(fn, *lhs, wide);
    }
    if (lhs->shape().empty()) {
      ATOLL_ASSIGN_OR_RETURN(const Tensor wide, kernels::BroadcastTo(*lhs, rhs->shape()));
      return kernels::Binary(fn, wide, *rhs);
    }
  }
  if (lhs != nullptr && rhs != nullptr) return kernels::Binary(fn, *lhs, *rhs);
  if (lhs != nullptr) return kernels::Binary(fn, *lhs, op.operands[1].scalar);
  if (rhs != nullptr) return kernels::Binary(fn, op.operands[0].scalar, *rhs);
  return InvalidArgument(fmt::format("{} of two scalars", ir::OpName(op.code)));
}

Result<Tensor> RunMatmul(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<2>(op, operands));
  return kernels::Matmul(
      *t[0], *t[1],
      {.transpose_a = ir::MatmulTransposeA(op.attr), .transpose_b = ir::MatmulTransposeB(op.attr)});
}

Result<Tensor> RunSpin(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<1>(op, operands));
  return kernels::Spin(*t[0], op.attr, CurrentCancelFlag());
}

Result<Tensor> RunCollective(const ir::Op& op, Operands) {
  return InvalidArgument(fmt::format(
      "{}: collective ops are run by the interpreter, not by a backend", ir::OpName(op.code)));
}

Result<Tensor> RunInInterpreter(const ir::Op& op, Operands) {
  return InvalidArgument(fmt::format(
      "{}: control-flow ops are run by the interpreter, not by a backend", ir::OpName(op.code)));
}

Result<Tensor> RunFilter(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<1>(op, operands));
  return kernels::Filter(*t[0], op.attr);
}

Result<Tensor> RunUnary(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(const kernels::UnaryFn fn, UnaryFnOf(op.code));
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<1>(op, operands));
  return kernels::Unary(fn, *t[0]);
}

Result<Tensor> RunGeluGrad(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<2>(op, operands));
  return kernels::GeluBackward(*t[0], *t[1]);
}

Result<Tensor> RunBiasAdd(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<2>(op, operands));
  return kernels::BroadcastBinary(kernels::BinaryFn::kAdd, *t[0], *t[1]);
}

Result<Tensor> RunReduceSum(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<1>(op, operands));
  return kernels::ReduceSum(*t[0], static_cast<int64_t>(op.attr));
}

Result<Tensor> RunSoftmax(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<1>(op, operands));
  return kernels::Softmax(*t[0]);
}

Result<Tensor> RunLayerNorm(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<3>(op, operands));
  return kernels::LayerNorm(*t[0], *t[1], *t[2], op.attr);
}

// Each of the three gradient ops runs the whole kernel and keeps its part: the IR gives an
// op one result.
Result<Tensor> RunLayerNormGrad(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<3>(op, operands));
  ATOLL_ASSIGN_OR_RETURN(kernels::LayerNormGrads grads,
                         kernels::LayerNormBackward(*t[0], *t[1], *t[2], op.attr));
  if (op.code == OpCode::kLayerNormGradX) return std::move(grads.dx);
  if (op.code == OpCode::kLayerNormGradGamma) return std::move(grads.dgamma);
  return std::move(grads.dbeta);
}

Result<Tensor> RunCrossEntropy(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<2>(op, operands));
  const Tensor& logits = *t[0];
  ATOLL_ASSIGN_OR_RETURN(kernels::CrossEntropyResult r, kernels::CrossEntropy(logits, *t[1]));
  const double local_rows = static_cast<double>(logits.shape()[0]);
  if (op.code == OpCode::kCrossEntropyLoss) return Scale(std::move(r.loss), local_rows / op.attr);
  return Scale(std::move(r.dlogits), local_rows / static_cast<double>(op.type.shape.at(0)));
}

Result<Tensor> RunTranspose(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<1>(op, operands));
  return kernels::Transpose2D(*t[0]);
}

Result<Tensor> RunSgdUpdate(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<2>(op, operands));
  return kernels::SgdUpdate(*t[0], *t[1], {.learning_rate = op.attr});
}

// Each of kAdamParam, kAdamM and kAdamV runs the whole kernel and keeps its part: the IR
// gives an op one result, and an elementwise step costs little next to the matmuls that
// made its gradient.
Result<Tensor> RunAdam(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<5>(op, operands));
  const Tensor& step = *t[4];
  const bool scalars =
      std::all_of(op.operands.begin() + 5, op.operands.end(),
                  [](const ir::Operand& o) { return o.kind == ir::Operand::kScalar; });
  if (!scalars || step.dtype() != DType::kI32 || step.num_elements() != 1) {
    return InvalidArgument(
        fmt::format("{} takes param, grad, m, v, an i32 step and 5 scalars", ir::OpName(op.code)));
  }
  auto scalar = [&](size_t i) { return op.operands[i].scalar; };
  kernels::AdamOptions options;
  options.learning_rate = scalar(5);
  options.beta1 = scalar(6);
  options.beta2 = scalar(7);
  options.epsilon = scalar(8);
  options.weight_decay = scalar(9);
  ATOLL_ASSIGN_OR_RETURN(
      kernels::AdamState next,
      kernels::AdamUpdate(*t[0], *t[1], *t[2], *t[3], step.as<int32_t>()[0], options));
  if (op.code == OpCode::kAdamParam) return std::move(next.param);
  if (op.code == OpCode::kAdamM) return std::move(next.m);
  return std::move(next.v);
}

namespace {

// A device's group of a grouped op's [G,k,n] weights is [1,k,n]; the matmul kernel takes
// it as [k,n]. (A copy: tensors own their bytes.)
Result<Tensor> OwnGroup(const ir::Op& op, const Tensor& w) {
  if (w.shape().size() != 3 || w.shape()[0] != 1) {
    return InvalidArgument(fmt::format("{}: a device holds one group [1,k,n] of w, got {}{}",
                                       ir::OpName(op.code), DTypeName(w.dtype()),
                                       ShapeString(w.shape())));
  }
  return kernels::Reshape(w, {w.shape()[1], w.shape()[2]});
}

}  // namespace

Result<Tensor> RunGroupedMatmul(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<2>(op, operands));
  ATOLL_ASSIGN_OR_RETURN(Tensor group, OwnGroup(op, *t[1]));
  return kernels::Matmul(*t[0], group, {.transpose_a = false, .transpose_b = op.attr == 1});
}

Result<Tensor> RunGroupedWeightGrad(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<2>(op, operands));
  ATOLL_ASSIGN_OR_RETURN(
      Tensor grad, kernels::Matmul(*t[0], *t[1], {.transpose_a = true, .transpose_b = false}));
  const Shape shape = grad.shape();
  return kernels::Reshape(grad, {1, shape[0], shape[1]});
}

Result<Tensor> RunScatterAddRows(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<2>(op, operands));
  return kernels::EmbeddingGrad(*t[0], *t[1], static_cast<int64_t>(op.attr));
}

Result<Tensor> RunGatherRows(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<2>(op, operands));
  return kernels::EmbeddingGather(*t[0], *t[1]);
}

// kTopKValues and kTopKIndices each run the kernel and keep their part, as Adam's ops do.
Result<Tensor> RunTopK(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<1>(op, operands));
  ATOLL_ASSIGN_OR_RETURN(kernels::TopKResult r,
                         kernels::TopK(*t[0], static_cast<int64_t>(op.attr)));
  if (op.code == OpCode::kTopKValues) return std::move(r.values);
  return std::move(r.indices);
}

Result<Tensor> RunColumn(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<1>(op, operands));
  const Tensor& x = *t[0];
  const auto j = static_cast<int64_t>(op.attr);
  if (x.shape().size() != 2) {
    return InvalidArgument(fmt::format("column needs a matrix, got {}{}", DTypeName(x.dtype()),
                                       ShapeString(x.shape())));
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor column, kernels::Slice(x, 1, j, j + 1));
  return kernels::Reshape(column, {x.shape()[0]});
}

Result<Tensor> RunCast(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<1>(op, operands));
  return kernels::Cast(*t[0], op.type.dtype);  // the rule gave it from attr
}

// The gradient ops: dy, then the forward op's operand (or result).

Result<Tensor> RunUnaryGrad(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<2>(op, operands));
  // attr is the forward op's code: range-checked before the cast, which is undefined outside.
  if (!(op.attr >= 0 && op.attr < static_cast<double>(ir::kNumOpCodes))) {
    return InvalidArgument(fmt::format("unary_grad: attr {} is no op code", op.attr));
  }
  ATOLL_ASSIGN_OR_RETURN(const kernels::UnaryFn fn, UnaryFnOf(static_cast<OpCode>(op.attr)));
  return kernels::UnaryBackward(fn, *t[0], *t[1]);
}

Result<Tensor> RunReduceSumGrad(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<2>(op, operands));
  ATOLL_ASSIGN_OR_RETURN(Tensor expanded,
                         kernels::ExpandDims(*t[0], static_cast<int64_t>(op.attr)));
  return kernels::BroadcastTo(expanded, t[1]->shape());
}

Result<Tensor> RunSoftmaxGrad(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<2>(op, operands));
  return kernels::SoftmaxBackward(*t[0], *t[1]);
}

Result<Tensor> RunTopKGrad(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<2>(op, operands));
  return kernels::TopKBackward(*t[0], *t[1]);
}

Result<Tensor> RunColumnGrad(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<2>(op, operands));
  const Tensor& x = *t[1];
  if (x.shape().size() != 2) {
    return InvalidArgument(fmt::format("column_grad needs a matrix x, got {}{}",
                                       DTypeName(x.dtype()), ShapeString(x.shape())));
  }
  return kernels::PutColumn(*t[0], x.shape()[1], static_cast<int64_t>(op.attr));
}

Result<Tensor> RunFillLike(const ir::Op& op, Operands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, Tensors<1>(op, operands));
  // f32 or f64 here: RunCpuOp widens a bf16 or f16 x to f32 and rounds the result back.
  const DType dtype = t[0]->dtype();
  if (!IsFloating(dtype)) {
    return InvalidArgument(fmt::format("fill_like takes a float x, got {}", DTypeName(dtype)));
  }
  Tensor out(dtype, t[0]->shape());
  VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_floating_point_v<T>) {
      std::ranges::fill(out.as<T>(), static_cast<T>(op.attr));
    }
  });
  return out;
}

namespace {

// One row of the op table, as the cpu backend uses it.
struct CpuRow {
  size_t operands;
  Result<Tensor> (*run)(const ir::Op&, Operands);
};

constexpr CpuRow kCpuTable[] = {
#define ATOLL_OP(Name, name, operands, TypeRule, CpuKernel, GradRule) {operands, &CpuKernel},
#include "common/ir/ops.def"
};
static_assert(std::size(kCpuTable) == ir::kNumOpCodes);

bool IsStorage(const Tensor* t) {
  return t != nullptr && ClassOf(t->dtype()) == DTypeClass::kStorage;
}

// An op with bf16 or f16 operands computes in f32: those operands are widened (exactly), the
// row's kernel runs in f32, and its f32 result is rounded once into the storage dtype the
// op's rule gave. The kernels themselves know f32 and f64 only.
Result<Tensor> RunInF32(const ir::Op& op, Operands operands, const CpuRow& row) {
  std::vector<Tensor> wide;
  wide.reserve(operands.size());  // no reallocation: `args` points into it
  std::vector<const Tensor*> args;
  for (const Tensor* t : operands) {
    if (!IsStorage(t)) {
      args.push_back(t);
      continue;
    }
    ATOLL_ASSIGN_OR_RETURN(wide.emplace_back(), kernels::Cast(*t, DType::kF32));
    args.push_back(&wide.back());
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor result, row.run(op, args));
  if (result.dtype() == DType::kF32 && ClassOf(op.type.dtype) == DTypeClass::kStorage) {
    return kernels::Cast(result, op.type.dtype);
  }
  return result;
}

}  // namespace

Result<kernels::BinaryFn> BinaryFnOf(OpCode code) {
  switch (code) {
    case OpCode::kAdd:
      return kernels::BinaryFn::kAdd;
    case OpCode::kSub:
      return kernels::BinaryFn::kSub;
    case OpCode::kMul:
      return kernels::BinaryFn::kMul;
    case OpCode::kDiv:
      return kernels::BinaryFn::kDiv;
    default:
      return InvalidArgument(fmt::format("{} is not arithmetic", ir::OpName(code)));
  }
}

Result<kernels::UnaryFn> UnaryFnOf(OpCode code) {
  switch (code) {
#define ATOLL_UNARY_OP(Name, name) \
  case OpCode::k##Name:            \
    return kernels::UnaryFn::k##Name;
#include "atoll/unary_ops.def"
    default:
      return InvalidArgument(fmt::format("{} is not a unary op", ir::OpName(code)));
  }
}

Result<Tensor> RunCpuOp(const ir::Op& op, Operands operands) {
  const auto index = static_cast<size_t>(op.code);
  if (index >= std::size(kCpuTable)) {
    return InvalidArgument(fmt::format("unknown op code {}", index));
  }
  const CpuRow& row = kCpuTable[index];
  if (!ir::TakesOperandCount(op.code, operands.size())) {
    return InvalidArgument(fmt::format("{} takes {} operand{}, got {}", ir::OpName(op.code),
                                       row.operands, row.operands == 1 ? "" : "s",
                                       operands.size()));
  }
  if (std::any_of(operands.begin(), operands.end(), IsStorage)) {
    return RunInF32(op, operands, row);
  }
  return row.run(op, operands);
}

}  // namespace atl::compute
