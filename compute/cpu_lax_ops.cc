#include "compute/cpu_kernels.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/ir/type_rules.h"

#include "kernels/cast.h"
#include "kernels/lax.h"
#include "kernels/shape_ops.h"

namespace atl::compute {

// Every operand as a tensor (the rules made them so; a corrupt op is refused here).
Result<std::vector<const Tensor*>> AllTensors(const ir::Op& op, CpuOperands operands) {
  for (size_t i = 0; i < operands.size(); ++i) {
    if (operands[i] == nullptr) {
      return InvalidArgument(
          fmt::format("{}: operand {} must be a tensor, not a scalar", ir::OpName(op.code), i));
    }
  }
  return std::vector<const Tensor*>(operands.begin(), operands.end());
}

// The kernel's result in the dtype the op's rule gave it: a storage dtype computed in f32 is
// rounded into it once.
Result<Tensor> InOpDType(const ir::Op& op, Result<Tensor> result) {
  if (!result.ok() || result->dtype() == op.type.dtype) return result;
  if (ClassOf(op.type.dtype) == DTypeClass::kStorage && result->dtype() == DType::kF32) {
    return kernels::Cast(*result, op.type.dtype);
  }
  return result;
}

namespace {

using ir::OpCode;

// The params as the row's n lists of `rank` values each.
Result<std::vector<std::vector<int64_t>>> Lists(const ir::Op& op, size_t lists, size_t rank) {
  if (op.params.size() != lists * rank) {
    return InvalidArgument(fmt::format("{}: params hold {} values, not {} lists of {}",
                                       ir::OpName(op.code), op.params.size(), lists, rank));
  }
  std::vector<std::vector<int64_t>> out;
  for (size_t l = 0; l < lists; ++l) {
    out.emplace_back(op.params.begin() + l * rank, op.params.begin() + (l + 1) * rank);
  }
  return out;
}

// `fields` lists of `rank` values from params[at] on; the dilations default to 1.
Result<kernels::Window> WindowOf(const ir::Op& op, size_t rank, size_t fields) {
  if (op.params.size() < fields * rank) {
    return InvalidArgument(fmt::format("{}: params hold {} values, not {} lists of {}",
                                       ir::OpName(op.code), op.params.size(), fields, rank));
  }
  auto list = [&](size_t f) {
    if (f >= fields) return std::vector<int64_t>(rank, 1);
    return std::vector<int64_t>(op.params.begin() + static_cast<ptrdiff_t>(f * rank),
                                op.params.begin() + static_cast<ptrdiff_t>((f + 1) * rank));
  };
  return kernels::Window{list(0), list(1), list(2), list(3), list(4), list(5)};
}

DType ComputedIn(DType dtype) {
  return ClassOf(dtype) == DTypeClass::kStorage ? DType::kF32 : dtype;
}

kernels::LaxBinaryFn LaxBinaryFnOf(OpCode code) {
  switch (code) {
#define ATOLL_BINARY_OP(Name, name, Takes, Gives) \
  case OpCode::k##Name:                           \
    return kernels::LaxBinaryFn::k##Name;
#include "common/ir/lax_binary_ops.def"
    default:
      return static_cast<kernels::LaxBinaryFn>(255);  // named "?": the kernel refuses it
  }
}

kernels::LaxUnaryFn LaxUnaryFnOf(OpCode code) {
  switch (code) {
#define ATOLL_LAX_UNARY_OP(Name, name, Takes, Gives) \
  case OpCode::k##Name:                              \
    return kernels::LaxUnaryFn::k##Name;
#include "common/ir/lax_unary_ops.def"
    default:
      return static_cast<kernels::LaxUnaryFn>(255);
  }
}

}  // namespace

Result<Tensor> RunLaxBinary(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  return InOpDType(op, kernels::LaxBinary(LaxBinaryFnOf(op.code), *t[0], *t[1]));
}

Result<Tensor> RunLaxUnary(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  return InOpDType(op, kernels::LaxUnary(LaxUnaryFnOf(op.code), *t[0]));
}

Result<Tensor> RunSelectN(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  if (t.size() < 2) return InvalidArgument("select_n needs which and a case");
  return InOpDType(op, kernels::SelectN(*t[0], std::span(t).subspan(1)));
}

Result<Tensor> RunClamp(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  return InOpDType(op, kernels::Clamp(*t[0], *t[1], *t[2]));
}

Result<Tensor> RunConvertElementType(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  return kernels::ConvertElementType(*t[0], op.type.dtype);
}

Result<Tensor> RunReshape(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  // Where the result is cut, the interpreter made params this shard's block (it knows the
  // mesh): reshape's rule keeps a cut only where the block is one run of elements.
  return InOpDType(op, kernels::Reshape(*t[0], op.params));
}

Result<Tensor> RunBroadcastInDim(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  const Tensor& x = *t[0];
  const size_t n = x.shape().size();
  if (op.params.size() < n) return InvalidArgument("broadcast_in_dim: params too short");
  const size_t r = op.params.size() - n;
  Shape shape(op.params.begin(), op.params.begin() + r);
  const std::vector<int64_t> dims(op.params.begin() + r, op.params.end());
  for (size_t i = 0; i < n; ++i) {
    if (op.type.split[dims[i]] >= 0) shape[dims[i]] = x.shape()[i];  // a cut one: local
  }
  return InOpDType(op, kernels::BroadcastInDim(x, shape, dims));
}

Result<Tensor> RunTransposeNd(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  return InOpDType(op, kernels::TransposeNd(*t[0], op.params));
}

Result<Tensor> RunSlice(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  const Tensor& x = *t[0];
  ATOLL_ASSIGN_OR_RETURN(auto lists, Lists(op, 3, x.shape().size()));
  // A cut dimension is taken whole (the rule's condition): the local extent.
  for (size_t d = 0; d < x.shape().size(); ++d) {
    if (op.type.split[d] >= 0) lists[1][d] = x.shape()[d];
  }
  return InOpDType(op, kernels::Slice(x, lists[0], lists[1], lists[2]));
}

Result<Tensor> RunConcatenate(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  return InOpDType(op, kernels::Concatenate(t, static_cast<int64_t>(op.attr)));
}

Result<Tensor> RunPad(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  ATOLL_ASSIGN_OR_RETURN(auto lists, Lists(op, 3, t[0]->shape().size()));
  return InOpDType(op, kernels::Pad(*t[0], *t[1], lists[0], lists[1], lists[2]));
}

Result<Tensor> RunRev(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  return InOpDType(op, kernels::Rev(*t[0], op.params));
}

Result<Tensor> RunIota(const ir::Op& op, CpuOperands) {
  if (op.params.empty()) return InvalidArgument("iota: no params");
  const Shape shape(op.params.begin(), op.params.end() - 1);
  return InOpDType(op, kernels::Iota(ComputedIn(op.type.dtype), shape, op.params.back()));
}

Result<Tensor> RunReduceAxes(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  kernels::LaxReduceFn fn = kernels::LaxReduceFn::kMax;
  switch (op.code) {
    case OpCode::kReduceMin:
      fn = kernels::LaxReduceFn::kMin;
      break;
    case OpCode::kReduceProd:
      fn = kernels::LaxReduceFn::kProd;
      break;
    case OpCode::kReduceAnd:
      fn = kernels::LaxReduceFn::kAnd;
      break;
    case OpCode::kReduceOr:
      fn = kernels::LaxReduceFn::kOr;
      break;
    default:
      break;
  }
  return InOpDType(op, kernels::ReduceAxes(fn, *t[0], op.params));
}

Result<Tensor> RunDotGeneral(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  const std::vector<int64_t>& p = op.params;
  if (p.empty()) return InvalidArgument("dot_general: no params");
  const auto nc = static_cast<size_t>(p[0]);
  if (p.size() < 2 + 2 * nc) return InvalidArgument("dot_general: params too short");
  const auto nb = static_cast<size_t>(p[1 + 2 * nc]);
  if (p.size() != 2 + 2 * nc + 2 * nb) return InvalidArgument("dot_general: params miscounted");
  kernels::DotDims dims;
  dims.lhs_contracting.assign(p.begin() + 1, p.begin() + 1 + nc);
  dims.rhs_contracting.assign(p.begin() + 1 + nc, p.begin() + 1 + 2 * nc);
  dims.lhs_batch.assign(p.begin() + 2 + 2 * nc, p.begin() + 2 + 2 * nc + nb);
  dims.rhs_batch.assign(p.begin() + 2 + 2 * nc + nb, p.end());
  return InOpDType(op, kernels::DotGeneral(*t[0], *t[1], dims, ComputedIn(op.type.dtype)));
}

Result<Tensor> RunIntegerPow(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  return InOpDType(op, kernels::IntegerPow(*t[0], static_cast<int64_t>(op.attr)));
}

Result<Tensor> RunDynamicSlice(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  const Tensor& x = *t[0];
  Shape sizes = op.params;
  for (size_t d = 0; d < sizes.size() && d < x.shape().size(); ++d) {
    if (op.type.split[d] >= 0) sizes[d] = x.shape()[d];  // a cut dimension, taken whole
  }
  return InOpDType(op, kernels::DynamicSlice(x, std::span(t).subspan(1), sizes));
}

Result<Tensor> RunDynamicUpdateSlice(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  if (t.size() < 2) return InvalidArgument("dynamic_update_slice: x and update expected");
  return InOpDType(op, kernels::DynamicUpdateSlice(*t[0], *t[1], std::span(t).subspan(2)));
}

Result<Tensor> RunBitcastConvertType(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  return kernels::BitcastConvertType(*t[0], op.type.dtype);
}

Result<Tensor> RunGather(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  ATOLL_ASSIGN_OR_RETURN(const ir::internal::IndexedDims read,
                         ir::internal::ReadIndexedDims(op, 3));
  const kernels::GatherDims dims{read.lists[0], read.lists[1], read.lists[2], read.rest};
  // The local result: the batch dimensions are the local indices', the window's are whole.
  Shape local = op.type.shape;
  size_t batch = 0;
  for (size_t i = 0; i < local.size(); ++i) {
    if (std::find(dims.offset_dims.begin(), dims.offset_dims.end(), static_cast<int64_t>(i)) ==
        dims.offset_dims.end()) {
      local[i] = t[1]->shape()[batch++];
    }
  }
  return InOpDType(op, kernels::Gather(*t[0], *t[1], dims, local, op.attr != 0));
}

Result<Tensor> RunScatter(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  ATOLL_ASSIGN_OR_RETURN(const ir::internal::IndexedDims read,
                         ir::internal::ReadIndexedDims(op, 3));
  const kernels::ScatterDims dims{read.lists[0], read.lists[1], read.lists[2]};
  kernels::ScatterFn fn = kernels::ScatterFn::kReplace;
  if (op.code == OpCode::kScatterAdd) fn = kernels::ScatterFn::kAdd;
  if (op.code == OpCode::kScatterMul) fn = kernels::ScatterFn::kMul;
  if (op.code == OpCode::kScatterMin) fn = kernels::ScatterFn::kMin;
  if (op.code == OpCode::kScatterMax) fn = kernels::ScatterFn::kMax;
  return InOpDType(op, kernels::Scatter(fn, *t[0], *t[1], *t[2], dims, op.attr != 0));
}

Result<Tensor> RunFull(const ir::Op& op, CpuOperands) {
  ATOLL_ASSIGN_OR_RETURN(const Tensor one, Tensor::FromDoubles(op.type.dtype, {}, {op.attr}));
  return kernels::BroadcastInDim(one, op.type.shape, {});
}

// The windowed primitives.

Result<Tensor> RunReduceWindow(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  ATOLL_ASSIGN_OR_RETURN(kernels::Window w, WindowOf(op, t[0]->shape().size(), 6));
  kernels::WindowFn fn = kernels::WindowFn::kSum;
  if (op.code == OpCode::kReduceWindowMax) fn = kernels::WindowFn::kMax;
  if (op.code == OpCode::kReduceWindowMin) fn = kernels::WindowFn::kMin;
  return InOpDType(op, kernels::ReduceWindow(fn, *t[0], w));
}

Result<Tensor> RunSelectAndScatterAdd(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  const size_t rank = t[1]->shape().size();
  ATOLL_ASSIGN_OR_RETURN(kernels::Window w, WindowOf(op, rank, 4));
  if (op.params.size() != 4 * rank + 1) {
    return InvalidArgument("select_and_scatter_add: params must be 4 lists and the select");
  }
  return InOpDType(op, kernels::SelectAndScatterAdd(*t[0], *t[1], w, op.params[4 * rank] == 0));
}

Result<Tensor> RunConv(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  if (op.params.empty() || op.params.size() != 9 + 8 * static_cast<size_t>(op.params[0])) {
    return InvalidArgument("conv_general_dilated: params must be 9 + 8n values");
  }
  const auto n = static_cast<size_t>(op.params[0]);
  size_t at = 1;
  auto take = [&](size_t count) {
    std::vector<int64_t> out(op.params.begin() + static_cast<ptrdiff_t>(at),
                             op.params.begin() + static_cast<ptrdiff_t>(at + count));
    at += count;
    return out;
  };
  kernels::ConvDims dims;
  dims.strides = take(n);
  dims.low = take(n);
  dims.high = take(n);
  dims.lhs_dilation = take(n);
  dims.rhs_dilation = take(n);
  dims.lhs_spec = take(n + 2);
  dims.rhs_spec = take(n + 2);
  dims.out_spec = take(n + 2);
  dims.feature_groups = op.params[at];
  dims.batch_groups = op.params[at + 1];
  return InOpDType(op, kernels::ConvGeneralDilated(*t[0], *t[1], dims, op.type.dtype));
}

Result<Tensor> RunReducePrecision(const ir::Op& op, CpuOperands operands) {
  ATOLL_ASSIGN_OR_RETURN(auto t, AllTensors(op, operands));
  if (op.params.size() != 2) return InvalidArgument("reduce_precision: params must be 2 values");
  return InOpDType(op, kernels::ReducePrecision(*t[0], static_cast<int>(op.params[0]),
                                                static_cast<int>(op.params[1])));
}

}  // namespace atl::compute
