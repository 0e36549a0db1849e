#include "kernels/elementwise.h"

#include <algorithm>
#include <cmath>
#include <new>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/binary_loop.h"
#include "kernels/broadcast_block.h"
#include "kernels/check.h"
#include "kernels/shape_ops.h"
#include "kernels/vector_math.h"

namespace atl::kernels {

using internal::Describe;

std::string_view UnaryFnName(UnaryFn fn) {
  switch (fn) {
#define ATOLL_UNARY_OP(Name, name) \
  case UnaryFn::k##Name:           \
    return name;
#include "atoll/unary_ops.def"
  }
  return "?";
}

std::string_view BinaryFnName(BinaryFn fn) {
  switch (fn) {
    case BinaryFn::kAdd:
      return "add";
    case BinaryFn::kSub:
      return "sub";
    case BinaryFn::kMul:
      return "mul";
    case BinaryFn::kDiv:
      return "div";
    case BinaryFn::kMax:
      return "max";
    case BinaryFn::kMin:
      return "min";
  }
  return "?";
}

namespace {

// Elements per block of a fused evaluation: 4 KiB per node, so a few nodes stay in L1 and a
// few dozen in L2.
constexpr int64_t kBlock = 1024;

bool Known(UnaryFn fn) { return UnaryFnName(fn) != "?"; }
bool Known(BinaryFn fn) { return BinaryFnName(fn) != "?"; }

// What gelu takes the tanh of, kGeluC (v + kGeluA v^3), in its forward and its derivative.
template <typename T>
T GeluTanhArgument(T v) {
  return kGeluC<T> * (v + kGeluA<T> * v * v * v);
}

// y[i] = fn(x[i]) for i < n, T float or double: the unary kernels, one case per row of
// atoll/unary_ops.def and one loop per case so that each can be vectorized; exp, log and
// tanh come vectorized from kernels/vector_math.h. `fn` is known.
template <typename T>
void ApplyUnary(UnaryFn fn, const T* x, T* y, int64_t n) {
  constexpr T kZero = 0, kHalf = 0.5, kOne = 1;
  switch (fn) {
    case UnaryFn::kExp:
      Exp(x, y, n);
      return;
    case UnaryFn::kLog:
      Log(x, y, n);
      return;
    case UnaryFn::kTanh:
      Tanh(x, y, n);
      return;
    case UnaryFn::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] < kZero ? kZero : x[i];
      return;
    case UnaryFn::kNeg:
      for (int64_t i = 0; i < n; ++i) y[i] = -x[i];
      return;
    case UnaryFn::kSqrt:
      for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(x[i]);
      return;
    case UnaryFn::kRsqrt:
      for (int64_t i = 0; i < n; ++i) y[i] = kOne / std::sqrt(x[i]);
      return;
    case UnaryFn::kGelu:
      MapThrough<T>(
          Tanh, n, [x](int64_t i) { return GeluTanhArgument(x[i]); },
          [x, y](int64_t i, T t) { y[i] = kHalf * x[i] * (kOne + t); });
      return;
    case UnaryFn::kSigmoid:  // e^-x overflows to inf for x < -88 (f32): 1 / inf = 0, no NaN
      MapThrough<T>(
          Exp, n, [x](int64_t i) { return -x[i]; },
          [y](int64_t i, T e) { y[i] = kOne / (kOne + e); });
      return;
  }
}

// z[i] = fn(a[i], b[i]) for i < n. `fn` is known.
template <typename T>
void ApplyBinary(BinaryFn fn, const T* a, const T* b, T* z, int64_t n) {
  internal::BinaryLoop(
      fn, n, [a](int64_t i) { return a[i]; }, [b](int64_t i) { return b[i]; }, z);
}

// ApplyBinary with the right operand one value for every element.
template <typename T>
void ApplyBinaryScalar(BinaryFn fn, const T* a, T b, T* z, int64_t n) {
  internal::BinaryLoop(
      fn, n, [a](int64_t i) { return a[i]; }, [b](int64_t) { return b; }, z);
}

Status CheckExpr(const FusedExpr& expr, size_t num_inputs) {
  const auto& nodes = expr.nodes();
  if (nodes.empty()) return InvalidArgument("fused expression has no nodes");
  for (size_t i = 0; i < nodes.size(); ++i) {
    const FusedNode& node = nodes[i];
    const auto operand_ok = [i](int32_t ref) { return ref >= 0 && static_cast<size_t>(ref) < i; };
    switch (node.kind) {
      case FusedNode::Kind::kInput:
      case FusedNode::Kind::kBroadcast:
        if (node.input < 0 || static_cast<size_t>(node.input) >= num_inputs) {
          return InvalidArgument(
              fmt::format("fused node {} reads input {}, expected an index in [0, {})", i,
                          node.input, num_inputs));
        }
        break;
      case FusedNode::Kind::kConstant:
        break;
      case FusedNode::Kind::kUnary:
        if (!Known(node.unary)) {
          return InvalidArgument(fmt::format("fused node {} has unknown unary op {}", i,
                                             static_cast<int>(node.unary)));
        }
        if (!operand_ok(node.lhs)) {
          return InvalidArgument(
              fmt::format("fused node {} ({}) reads node {}, expected an earlier node in [0, {})",
                          i, UnaryFnName(node.unary), node.lhs, i));
        }
        break;
      case FusedNode::Kind::kBinary:
        if (!Known(node.binary)) {
          return InvalidArgument(fmt::format("fused node {} has unknown binary op {}", i,
                                             static_cast<int>(node.binary)));
        }
        if (!operand_ok(node.lhs) || !operand_ok(node.rhs)) {
          return InvalidArgument(fmt::format(
              "fused node {} ({}) reads nodes {} and {}, expected earlier nodes in [0, {})", i,
              BinaryFnName(node.binary), node.lhs, node.rhs, i));
        }
        break;
      default:
        return InvalidArgument(
            fmt::format("fused node {} has unknown kind {}", i, static_cast<int>(node.kind)));
    }
  }
  return Status::Ok();
}

void Format(const std::vector<FusedNode>& nodes, int32_t i, std::string& out) {
  const FusedNode& node = nodes[i];
  switch (node.kind) {
    case FusedNode::Kind::kInput:
      out += fmt::format("in{}", node.input);
      return;
    case FusedNode::Kind::kBroadcast:
      out += fmt::format("broadcast(in{}, [{}])", node.input, fmt::join(node.dims, ","));
      return;
    case FusedNode::Kind::kConstant:
      out += fmt::format("{}", node.constant);
      return;
    case FusedNode::Kind::kUnary:
      out += UnaryFnName(node.unary);
      out += '(';
      if (node.lhs >= 0 && node.lhs < i) Format(nodes, node.lhs, out);
      out += ')';
      return;
    case FusedNode::Kind::kBinary:
      out += BinaryFnName(node.binary);
      out += '(';
      if (node.lhs >= 0 && node.lhs < i) Format(nodes, node.lhs, out);
      out += ", ";
      if (node.rhs >= 0 && node.rhs < i) Format(nodes, node.rhs, out);
      out += ')';
      return;
  }
  out += '?';
}

}  // namespace

FusedValue FusedExpr::Push(FusedNode node) {
  nodes_.push_back(std::move(node));
  return {static_cast<int32_t>(nodes_.size() - 1)};
}

FusedValue FusedExpr::Input(int32_t index) {
  FusedNode node;
  node.input = index;
  return Push(std::move(node));
}

FusedValue FusedExpr::Broadcast(int32_t index, std::vector<int64_t> dims) {
  FusedNode node;
  node.kind = FusedNode::Kind::kBroadcast;
  node.input = index;
  node.dims = std::move(dims);
  return Push(std::move(node));
}

FusedValue FusedExpr::Constant(float value) {
  FusedNode node;
  node.kind = FusedNode::Kind::kConstant;
  node.constant = value;
  return Push(std::move(node));
}

FusedValue FusedExpr::Apply(UnaryFn fn, FusedValue x) {
  FusedNode node;
  node.kind = FusedNode::Kind::kUnary;
  node.unary = fn;
  node.lhs = x.node;
  return Push(std::move(node));
}

FusedValue FusedExpr::Apply(BinaryFn fn, FusedValue lhs, FusedValue rhs) {
  FusedNode node;
  node.kind = FusedNode::Kind::kBinary;
  node.binary = fn;
  node.lhs = lhs.node;
  node.rhs = rhs.node;
  return Push(std::move(node));
}

std::string FusedExpr::ToString() const {
  std::string out;
  if (!nodes_.empty()) Format(nodes_, static_cast<int32_t>(nodes_.size() - 1), out);
  return out;
}

Result<Tensor> Unary(UnaryFn fn, const Tensor& x) {
  ATOLL_RETURN_IF_ERROR(internal::CheckFloat(x, fmt::format("{} operand", UnaryFnName(fn))));
  if (!Known(fn)) {
    return InvalidArgument(fmt::format("unknown unary op {}", static_cast<int>(fn)));
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(x.dtype(), x.shape()));
  internal::ForFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    ApplyUnary<T>(fn, x.as<T>().data(), out.as<T>().data(), x.num_elements());
  });
  return out;
}

namespace {

// dx[i] = dy[i] * fn'(x[i]) for i < n, T float or double: one case per row of
// atoll/unary_ops.def, each plain loops. The cases that differentiate through y = fn(x) first
// compute it into dx. `fn` is known.
template <typename T>
void ApplyUnaryBackward(UnaryFn fn, const T* dy, const T* x, T* dx, int64_t n) {
  constexpr T kZero = 0, kHalf = 0.5, kOne = 1, kThree = 3;
  switch (fn) {
    case UnaryFn::kExp:
      ApplyUnary(fn, x, dx, n);
      for (int64_t i = 0; i < n; ++i) dx[i] *= dy[i];
      return;
    case UnaryFn::kLog:
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] / x[i];
      return;
    case UnaryFn::kTanh:
      ApplyUnary(fn, x, dx, n);
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (kOne - dx[i] * dx[i]);
      return;
    case UnaryFn::kRelu:  // a NaN x gives a NaN gradient, as it gives a NaN relu
      for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > kZero ? dy[i] : x[i] != x[i] ? x[i] : kZero;
      return;
    case UnaryFn::kNeg:
      for (int64_t i = 0; i < n; ++i) dx[i] = -dy[i];
      return;
    case UnaryFn::kSqrt:
      ApplyUnary(fn, x, dx, n);
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * kHalf / dx[i];
      return;
    case UnaryFn::kRsqrt:  // d x^-1/2 = -x^-3/2 / 2
      ApplyUnary(fn, x, dx, n);
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * -kHalf * dx[i] * dx[i] * dx[i];
      return;
    case UnaryFn::kGelu:
      MapThrough<T>(
          Tanh, n, [x](int64_t i) { return GeluTanhArgument(x[i]); },
          [x, dy, dx](int64_t i, T t) {
            const T v = x[i];
            // d/dv [0.5 v (1 + t)] = 0.5 (1 + t) + 0.5 v (1 - t^2) c (1 + 3 a v^2).
            const T grad = kHalf * (kOne + t) + kHalf * v * (kOne - t * t) * kGeluC<T> *
                                                    (kOne + kThree * kGeluA<T> * v * v);
            dx[i] = dy[i] * grad;
          });
      return;
    case UnaryFn::kSigmoid:
      ApplyUnary(fn, x, dx, n);
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * dx[i] * (kOne - dx[i]);
      return;
  }
}

}  // namespace

Result<Tensor> UnaryBackward(UnaryFn fn, const Tensor& dy, const Tensor& x) {
  if (!Known(fn)) {
    return InvalidArgument(fmt::format("unknown unary op {}", static_cast<int>(fn)));
  }
  const std::string name = fmt::format("{} backward", UnaryFnName(fn));
  ATOLL_RETURN_IF_ERROR(internal::CheckFloat(x, name + " x"));
  ATOLL_RETURN_IF_ERROR(internal::CheckTypeShape(dy, x.dtype(), x.shape(), name + " dy"));
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(x.dtype(), x.shape()));
  internal::ForFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    ApplyUnaryBackward<T>(fn, dy.as<T>().data(), x.as<T>().data(), out.as<T>().data(),
                          x.num_elements());
  });
  return out;
}

Result<Tensor> BroadcastBinary(BinaryFn fn, const Tensor& a, const Tensor& b) {
  const std::string_view name = BinaryFnName(fn);
  if (!Known(fn)) {
    return InvalidArgument(fmt::format("unknown binary op {}", static_cast<int>(fn)));
  }
  ATOLL_RETURN_IF_ERROR(internal::CheckFloat(a, fmt::format("{} left operand", name)));
  ATOLL_RETURN_IF_ERROR(internal::CheckFloat(b, fmt::format("{} right operand", name)));
  if (a.dtype() != b.dtype()) {
    return InvalidArgument(fmt::format("{}: operands of one dtype needed, got {} and {}", name,
                                       Describe(a), Describe(b)));
  }
  auto shape = BroadcastShapes(a.shape(), b.shape());
  if (!shape.ok()) {
    return InvalidArgument(fmt::format("{}: {} and {} do not broadcast together ({})", name,
                                       Describe(a), Describe(b), shape.status().message()));
  }
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(a.dtype(), *shape));
  const int64_t n = out.num_elements();
  if (b.num_elements() == 1 && n > 0 && a.shape() == *shape) {
    internal::ForFloat(a.dtype(), [&](auto zero) {
      using T = decltype(zero);
      ApplyBinaryScalar<T>(fn, a.as<T>().data(), b.as<T>()[0], out.as<T>().data(), n);
    });
    return out;
  }
  // Each operand is expanded only when its shape differs from the result's.
  Tensor a_full, b_full;
  const Tensor* pa = &a;
  const Tensor* pb = &b;
  if (a.shape() != *shape) {
    ATOLL_ASSIGN_OR_RETURN(a_full, BroadcastTo(a, *shape));
    pa = &a_full;
  }
  if (b.shape() != *shape) {
    ATOLL_ASSIGN_OR_RETURN(b_full, BroadcastTo(b, *shape));
    pb = &b_full;
  }
  internal::ForFloat(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    ApplyBinary<T>(fn, pa->as<T>().data(), pb->as<T>().data(), out.as<T>().data(), n);
  });
  return out;
}

Result<Tensor> EvalFused(const FusedExpr& expr, std::span<const Tensor> inputs) {
  std::vector<const Tensor*> borrowed;
  for (const Tensor& t : inputs) borrowed.push_back(&t);
  return EvalFused(expr, std::span<const Tensor* const>(borrowed));
}

Result<Tensor> EvalFused(const FusedExpr& expr, std::span<const Tensor* const> inputs) {
  if (inputs.empty()) return InvalidArgument("fused expression needs at least one input tensor");
  return EvalFused(expr, inputs, inputs[0]->shape());
}

Result<Tensor> EvalFused(const FusedExpr& expr, std::span<const Tensor* const> inputs,
                         const Shape& shape) {
  if (inputs.empty()) return InvalidArgument("fused expression needs at least one input tensor");
  for (size_t i = 0; i < inputs.size(); ++i) {
    ATOLL_RETURN_IF_ERROR(internal::CheckF32(*inputs[i], fmt::format("fused input {}", i)));
  }
  ATOLL_RETURN_IF_ERROR(CheckExpr(expr, inputs.size()));
  // Per kBroadcast node, its input's strides in the result's dimensions.
  std::vector<std::vector<int64_t>> broadcast(expr.nodes().size());
  for (size_t i = 0; i < expr.nodes().size(); ++i) {
    const FusedNode& node = expr.nodes()[i];
    const Tensor& in = *inputs[node.input];
    if (node.kind == FusedNode::Kind::kBroadcast) {
      auto strides = internal::BroadcastStrides(in.shape(), shape, node.dims);
      if (!strides) {
        return InvalidArgument(fmt::format(
            "fused node {}: input {} {} does not broadcast into {} "
            "along [{}]",
            i, node.input, Describe(in), ShapeString(shape), fmt::join(node.dims, ",")));
      }
      broadcast[i] = std::move(*strides);
    } else if (node.kind == FusedNode::Kind::kInput && in.shape() != shape) {
      return InvalidArgument(
          fmt::format("fused inputs must share one shape, the result's f32{}: "
                      "input {} is {}",
                      ShapeString(shape), node.input, Describe(in)));
    }
  }
  const std::vector<FusedNode>& nodes = expr.nodes();
  const auto num_nodes = static_cast<int64_t>(nodes.size());
  const int64_t last = num_nodes - 1;
  ATOLL_ASSIGN_OR_RETURN(Tensor out, internal::AllocateForOverwrite(DType::kF32, shape));
  const int64_t n = out.num_elements();
  float* result = out.as<float>().data();

  // One block of values per computed node; inputs are read in place.
  std::vector<float> scratch;
  try {
    scratch.resize(static_cast<size_t>(num_nodes * kBlock));
  } catch (const std::bad_alloc&) {
    return OutOfMemory(fmt::format("fused expression of {} nodes: no scratch", num_nodes));
  }
  std::vector<const float*> value(nodes.size());
  for (int64_t base = 0; base < n; base += kBlock) {
    const int64_t len = std::min(kBlock, n - base);
    for (int64_t i = 0; i < num_nodes; ++i) {
      const FusedNode& node = nodes[i];
      float* dst = i == last ? result + base : scratch.data() + i * kBlock;
      switch (node.kind) {
        case FusedNode::Kind::kInput:
          value[i] = inputs[node.input]->as<float>().data() + base;
          if (i == last) std::copy_n(value[i], len, dst);
          break;
        case FusedNode::Kind::kBroadcast:
          internal::GatherBlock(inputs[node.input]->as<float>().data(), shape, broadcast[i], base,
                                len, dst);
          value[i] = dst;
          break;
        case FusedNode::Kind::kConstant:
          if (base == 0 || i == last) std::fill_n(dst, len, node.constant);
          value[i] = dst;
          break;
        case FusedNode::Kind::kUnary:
          ApplyUnary<float>(node.unary, value[node.lhs], dst, len);
          value[i] = dst;
          break;
        case FusedNode::Kind::kBinary:
          if (nodes[node.rhs].kind == FusedNode::Kind::kConstant) {
            ApplyBinaryScalar<float>(node.binary, value[node.lhs], nodes[node.rhs].constant, dst,
                                     len);
          } else {
            ApplyBinary<float>(node.binary, value[node.lhs], value[node.rhs], dst, len);
          }
          value[i] = dst;
          break;
      }
    }
  }
  return out;
}

}  // namespace atl::kernels
