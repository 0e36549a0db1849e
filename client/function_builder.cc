#include <algorithm>

#include <fmt/format.h>

#include "client/internal.h"

namespace atl {

FunctionBuilder::FunctionBuilder(std::string name) : impl_(std::make_unique<Impl>()) {
  impl_->def.name = std::move(name);
}
FunctionBuilder::~FunctionBuilder() = default;
FunctionBuilder::FunctionBuilder(FunctionBuilder&&) noexcept = default;
FunctionBuilder& FunctionBuilder::operator=(FunctionBuilder&&) noexcept = default;

const Status& FunctionBuilder::status() const { return impl_->status; }

namespace {

ir::Operand ToOperand(Value v) {
  return {static_cast<uint8_t>(v.kind == kValueInput ? ir::Operand::kInput : ir::Operand::kOp),
          v.index, 0.0};
}

ir::Operand Scalar(double s) { return {ir::Operand::kScalar, 0, s}; }

}  // namespace

Value FunctionBuilder::Input(DType dtype, Shape shape, Sharding sharding) {
  if (!shape.empty() && sharding.axes.size() > shape.size() && impl_->status.ok()) {
    impl_->status =
        InvalidArgument(fmt::format("function '{}': a sharding of {} dimensions for "
                                    "a rank-{} input",
                                    impl_->def.name, sharding.axes.size(), shape.size()));
  }
  std::vector<int32_t> split(shape.size(), -1);
  std::copy_n(sharding.axes.begin(), std::min(sharding.axes.size(), split.size()), split.begin());
  impl_->def.inputs.push_back({dtype, std::move(shape), std::move(split)});
  return {kValueInput, static_cast<int>(impl_->def.inputs.size()) - 1};
}

namespace {

// Appends an op, inferring its result type from its operands; records the first error.
Value AddOp(FunctionBuilder::Impl& impl, ir::OpCode code, std::vector<ir::Operand> operands,
            double attr = 0.0) {
  if (!impl.status.ok()) return {};
  for (const auto& o : operands) {
    if (o.kind != ir::Operand::kScalar && ir::OperandType(impl.def, o) == nullptr) {
      impl.status = InvalidArgument(
          fmt::format("{}: operand is not a value of this builder", ir::OpName(code)));
      return {};
    }
  }
  ir::Op op{code, std::move(operands), attr, {}};
  auto type = ir::InferType(impl.def, op);
  if (!type.ok()) {
    impl.status = type.status().WithContext("function '" + impl.def.name + "'");
    return {};
  }
  op.type = *type;
  impl.def.ops.push_back(std::move(op));
  // Checks everything so far, this op included, on a single device seen as a mesh with as
  // many axes as the inputs name (the slice's mesh is known at Register).
  int32_t axes = 1;
  for (const auto& in : impl.def.inputs) {
    for (int32_t axis : in.split) axes = std::max(axes, axis + 1);
  }
  impl.def.mesh = Shape(axes, 1);
  impl.def.outputs.push_back({ir::Operand::kOp, static_cast<int>(impl.def.ops.size()) - 1, 0});
  Status valid = ir::Validate(impl.def, 1);
  impl.def.outputs.pop_back();
  impl.def.mesh.clear();
  if (!valid.ok()) {
    impl.status = valid.WithContext("function '" + impl.def.name + "'");
    return {};
  }
  return {kValueOp, static_cast<int>(impl.def.ops.size()) - 1};
}

}  // namespace

Value FunctionBuilder::Add(Value a, Value b) {
  return AddOp(*impl_, ir::OpCode::kAdd, {ToOperand(a), ToOperand(b)});
}
Value FunctionBuilder::Add(Value a, double b) {
  return AddOp(*impl_, ir::OpCode::kAdd, {ToOperand(a), Scalar(b)});
}
Value FunctionBuilder::Sub(Value a, Value b) {
  return AddOp(*impl_, ir::OpCode::kSub, {ToOperand(a), ToOperand(b)});
}
Value FunctionBuilder::Sub(Value a, double b) {
  return AddOp(*impl_, ir::OpCode::kSub, {ToOperand(a), Scalar(b)});
}
Value FunctionBuilder::Mul(Value a, Value b) {
  return AddOp(*impl_, ir::OpCode::kMul, {ToOperand(a), ToOperand(b)});
}
Value FunctionBuilder::Mul(Value a, double b) {
  return AddOp(*impl_, ir::OpCode::kMul, {ToOperand(a), Scalar(b)});
}
Value FunctionBuilder::Div(Value a, Value b) {
  return AddOp(*impl_, ir::OpCode::kDiv, {ToOperand(a), ToOperand(b)});
}
Value FunctionBuilder::Div(Value a, double b) {
  return AddOp(*impl_, ir::OpCode::kDiv, {ToOperand(a), Scalar(b)});
}
Value FunctionBuilder::Matmul(Value a, Value b) {
  return AddOp(*impl_, ir::OpCode::kMatmul, {ToOperand(a), ToOperand(b)});
}
Value FunctionBuilder::Spin(Value a, double micros) {
  return AddOp(*impl_, ir::OpCode::kSpin, {ToOperand(a)}, micros);
}

Value FunctionBuilder::Filter(Value a, double threshold) {
  return AddOp(*impl_, ir::OpCode::kFilter, {ToOperand(a)}, threshold);
}

Value FunctionBuilder::AllReduceSum(Value a) {
  return AddOp(*impl_, ir::OpCode::kAllReduceSum, {ToOperand(a)});
}

void FunctionBuilder::Output(Value v) {
  if (!impl_->status.ok()) return;
  const ir::Operand o = ToOperand(v);
  if (ir::OperandType(impl_->def, o) == nullptr) {
    impl_->status = InvalidArgument("output is not a value of this builder");
    return;
  }
  impl_->def.outputs.push_back(o);
}

}  // namespace atl
