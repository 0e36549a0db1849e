#include "compute/model_ops.h"

#include <algorithm>

#include <fmt/format.h>

#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/matmul.h"
#include "kernels/nn.h"
#include "kernels/optim.h"
#include "kernels/reduce.h"
#include "kernels/shape_ops.h"
#include "kernels/topk.h"

namespace atl::executor {

namespace {

using ir::OpCode;

Result<kernels::UnaryFn> ToUnaryFn(OpCode code) {
  switch (code) {
    case OpCode::kExp:
      return kernels::UnaryFn::kExp;
    case OpCode::kLog:
      return kernels::UnaryFn::kLog;
    case OpCode::kTanh:
      return kernels::UnaryFn::kTanh;
    case OpCode::kRelu:
      return kernels::UnaryFn::kRelu;
    case OpCode::kNeg:
      return kernels::UnaryFn::kNeg;
    case OpCode::kSqrt:
      return kernels::UnaryFn::kSqrt;
    case OpCode::kRsqrt:
      return kernels::UnaryFn::kRsqrt;
    default:
      return InvalidArgument(fmt::format("{} is not a unary kernel", ir::OpName(code)));
  }
}

// Multiplies every element by `factor`: a row-split shard's share of a batch mean is its
// local mean times local rows / global rows, so that the shards' shares sum to the mean.
Tensor Scale(Tensor t, double factor) {
  if (factor != 1.0) {
    for (float& v : t.as<float>()) v = static_cast<float>(v * factor);
  }
  return t;
}

Result<Tensor> RunLayerNormGrad(const ir::Op& op, const Tensor& dy, const Tensor& x,
                                const Tensor& gamma) {
  ATOLL_ASSIGN_OR_RETURN(kernels::LayerNormGrads grads,
                         kernels::LayerNormBackward(dy, x, gamma, static_cast<float>(op.attr)));
  if (op.code == OpCode::kLayerNormGradX) return std::move(grads.dx);
  if (op.code == OpCode::kLayerNormGradGamma) return std::move(grads.dgamma);
  return std::move(grads.dbeta);
}

Result<Tensor> RunCrossEntropy(const ir::Op& op, const Tensor& logits, const Tensor& labels) {
  ATOLL_ASSIGN_OR_RETURN(kernels::CrossEntropyResult r, kernels::CrossEntropy(logits, labels));
  const double local_rows = static_cast<double>(logits.shape()[0]);
  if (op.code == OpCode::kCrossEntropyLoss) return Scale(std::move(r.loss), local_rows / op.attr);
  return Scale(std::move(r.dlogits), local_rows / static_cast<double>(op.type.shape.at(0)));
}

// Each of kAdamParam, kAdamM and kAdamV runs the whole kernel and keeps its part: the IR
// gives an op one result, and an elementwise step costs little next to the matmuls that
// made its gradient.
Result<Tensor> RunAdam(const ir::Op& op, const Tensor& param, const Tensor& grad, const Tensor& m,
                       const Tensor& v, const Tensor& step) {
  const bool scalars =
      op.operands.size() == 10 &&
      std::all_of(op.operands.begin() + 5, op.operands.end(),
                  [](const ir::Operand& o) { return o.kind == ir::Operand::kScalar; });
  if (!scalars || step.dtype() != DType::kI32 || step.num_elements() != 1) {
    return InvalidArgument(
        fmt::format("{} takes param, grad, m, v, an i32 step and 5 scalars", ir::OpName(op.code)));
  }
  auto scalar = [&](size_t i) { return static_cast<float>(op.operands[i].scalar); };
  kernels::AdamOptions options;
  options.learning_rate = scalar(5);
  options.beta1 = scalar(6);
  options.beta2 = scalar(7);
  options.epsilon = scalar(8);
  options.weight_decay = scalar(9);
  ATOLL_ASSIGN_OR_RETURN(kernels::AdamState next,
                         kernels::AdamUpdate(param, grad, m, v, step.as<int32_t>()[0], options));
  if (op.code == OpCode::kAdamParam) return std::move(next.param);
  if (op.code == OpCode::kAdamM) return std::move(next.m);
  return std::move(next.v);
}

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

Result<Tensor> RunGroupedMatmul(const ir::Op& op, const Tensor& x, const Tensor& w) {
  ATOLL_ASSIGN_OR_RETURN(Tensor group, OwnGroup(op, w));
  return kernels::Matmul(x, group, {.transpose_a = false, .transpose_b = op.attr == 1});
}

Result<Tensor> RunGroupedWeightGrad(const Tensor& x, const Tensor& dy) {
  ATOLL_ASSIGN_OR_RETURN(Tensor grad,
                         kernels::Matmul(x, dy, {.transpose_a = true, .transpose_b = false}));
  const Shape shape = grad.shape();
  return kernels::Reshape(grad, {1, shape[0], shape[1]});
}

// kTopKValues and kTopKIndices each run the kernel and keep their part, as Adam's ops do:
// the IR gives an op one result.
Result<Tensor> RunTopK(const ir::Op& op, const Tensor& x) {
  ATOLL_ASSIGN_OR_RETURN(kernels::TopKResult r, kernels::TopK(x, static_cast<int64_t>(op.attr)));
  if (op.code == OpCode::kTopKValues) return std::move(r.values);
  return std::move(r.indices);
}

Result<Tensor> RunColumn(const ir::Op& op, const Tensor& x) {
  const auto j = static_cast<int64_t>(op.attr);
  if (x.shape().size() != 2) {
    return InvalidArgument(fmt::format("column needs a matrix, got {}{}", DTypeName(x.dtype()),
                                       ShapeString(x.shape())));
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor column, kernels::Slice(x, 1, j, j + 1));
  return kernels::Reshape(column, {x.shape()[0]});
}

}  // namespace

bool IsModelOp(OpCode code) {
  return code == OpCode::kMatmul || (code >= OpCode::kExp && code <= OpCode::kColumn);
}

Result<Tensor> RunModelOp(const ir::Op& op, std::span<const Tensor* const> operands) {
  // Operand i as a tensor; the scalar operands (Adam's hyper-parameters) are read from op.
  auto arg = [&](size_t i) -> Result<const Tensor*> {
    if (i >= operands.size()) {
      return InvalidArgument(fmt::format("{}: operand {} is missing (got {})", ir::OpName(op.code),
                                         i, operands.size()));
    }
    if (operands[i] == nullptr) {
      return InvalidArgument(
          fmt::format("{}: operand {} must be a tensor, not a scalar", ir::OpName(op.code), i));
    }
    return operands[i];
  };
  ATOLL_ASSIGN_OR_RETURN(const Tensor* a, arg(0));
  switch (op.code) {
    case OpCode::kMatmul: {
      ATOLL_ASSIGN_OR_RETURN(const Tensor* b, arg(1));
      return kernels::Matmul(*a, *b,
                             {.transpose_a = ir::MatmulTransposeA(op.attr),
                              .transpose_b = ir::MatmulTransposeB(op.attr)});
    }
    case OpCode::kExp:
    case OpCode::kLog:
    case OpCode::kTanh:
    case OpCode::kRelu:
    case OpCode::kNeg:
    case OpCode::kSqrt:
    case OpCode::kRsqrt: {
      ATOLL_ASSIGN_OR_RETURN(const kernels::UnaryFn fn, ToUnaryFn(op.code));
      return kernels::Unary(fn, *a);
    }
    case OpCode::kGelu:
      return kernels::Gelu(*a);
    case OpCode::kGeluGrad: {
      ATOLL_ASSIGN_OR_RETURN(const Tensor* x, arg(1));
      return kernels::GeluBackward(*a, *x);
    }
    case OpCode::kBiasAdd: {
      ATOLL_ASSIGN_OR_RETURN(const Tensor* bias, arg(1));
      return kernels::BroadcastBinary(kernels::BinaryFn::kAdd, *a, *bias);
    }
    case OpCode::kReduceSum:
      return kernels::ReduceSum(*a, static_cast<int64_t>(op.attr));
    case OpCode::kSoftmax:
      return kernels::Softmax(*a);
    case OpCode::kLayerNorm: {
      ATOLL_ASSIGN_OR_RETURN(const Tensor* gamma, arg(1));
      ATOLL_ASSIGN_OR_RETURN(const Tensor* beta, arg(2));
      return kernels::LayerNorm(*a, *gamma, *beta, static_cast<float>(op.attr));
    }
    case OpCode::kLayerNormGradX:
    case OpCode::kLayerNormGradGamma:
    case OpCode::kLayerNormGradBeta: {
      ATOLL_ASSIGN_OR_RETURN(const Tensor* x, arg(1));
      ATOLL_ASSIGN_OR_RETURN(const Tensor* gamma, arg(2));
      return RunLayerNormGrad(op, *a, *x, *gamma);
    }
    case OpCode::kCrossEntropyLoss:
    case OpCode::kCrossEntropyGrad: {
      ATOLL_ASSIGN_OR_RETURN(const Tensor* labels, arg(1));
      return RunCrossEntropy(op, *a, *labels);
    }
    case OpCode::kTranspose:
      return kernels::Transpose2D(*a);
    case OpCode::kSgdUpdate: {
      ATOLL_ASSIGN_OR_RETURN(const Tensor* grad, arg(1));
      return kernels::SgdUpdate(*a, *grad, {.learning_rate = static_cast<float>(op.attr)});
    }
    case OpCode::kAdamParam:
    case OpCode::kAdamM:
    case OpCode::kAdamV: {
      ATOLL_ASSIGN_OR_RETURN(const Tensor* grad, arg(1));
      ATOLL_ASSIGN_OR_RETURN(const Tensor* m, arg(2));
      ATOLL_ASSIGN_OR_RETURN(const Tensor* v, arg(3));
      ATOLL_ASSIGN_OR_RETURN(const Tensor* step, arg(4));
      return RunAdam(op, *a, *grad, *m, *v, *step);
    }
    case OpCode::kGroupedMatmul: {
      ATOLL_ASSIGN_OR_RETURN(const Tensor* w, arg(1));
      return RunGroupedMatmul(op, *a, *w);
    }
    case OpCode::kGroupedWeightGrad: {
      ATOLL_ASSIGN_OR_RETURN(const Tensor* dy, arg(1));
      return RunGroupedWeightGrad(*a, *dy);
    }
    case OpCode::kScatterAddRows: {
      ATOLL_ASSIGN_OR_RETURN(const Tensor* ids, arg(1));
      return kernels::EmbeddingGrad(*a, *ids, static_cast<int64_t>(op.attr));
    }
    case OpCode::kGatherRows: {
      ATOLL_ASSIGN_OR_RETURN(const Tensor* ids, arg(1));
      return kernels::EmbeddingGather(*a, *ids);
    }
    case OpCode::kTopKValues:
    case OpCode::kTopKIndices:
      return RunTopK(op, *a);
    case OpCode::kColumn:
      return RunColumn(op, *a);
    default:
      return InvalidArgument(fmt::format("{} is not a kernel-library op", ir::OpName(op.code)));
  }
}

}  // namespace atl::executor
