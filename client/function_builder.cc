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

int32_t MeshAxesNamed(const ir::FunctionDef& def) {
  int32_t axes = 1;
  for (const auto& in : def.inputs) {
    for (int32_t axis : in.split) axes = std::max(axes, axis + 1);
  }
  return axes;
}

Status ValidateUnregistered(ir::FunctionDef& def) {
  def.mesh = Shape(MeshAxesNamed(def), 1);
  Status valid = ir::Validate(def, 1, /*slice_known=*/false);
  def.mesh.clear();
  return valid;
}

namespace {

// Appends an op, inferring its result type from its operands; records the first error.
Value AddOp(FunctionBuilder::Impl& impl, ir::OpCode code, std::vector<ir::Operand> operands,
            double attr = 0.0, std::vector<int64_t> params = {}) {
  if (!impl.status.ok()) return {};
  for (const auto& o : operands) {
    if (o.kind != ir::Operand::kScalar && ir::OperandType(impl.def, o) == nullptr) {
      impl.status = InvalidArgument(
          fmt::format("{}: operand is not a value of this builder", ir::OpName(code)));
      return {};
    }
  }
  ir::Op op{code, std::move(operands), attr, {}, std::move(params)};
  auto type = ir::InferType(impl.def, op);
  if (!type.ok()) {
    impl.status = type.status().WithContext("function '" + impl.def.name + "'");
    return {};
  }
  op.type = *type;
  impl.def.ops.push_back(std::move(op));
  // Checks everything so far, this op included.
  impl.def.outputs.push_back({ir::Operand::kOp, static_cast<int>(impl.def.ops.size()) - 1, 0});
  Status valid = ValidateUnregistered(impl.def);
  impl.def.outputs.pop_back();
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
Value FunctionBuilder::Matmul(Value a, Value b, bool transpose_a, bool transpose_b) {
  return AddOp(*impl_, ir::OpCode::kMatmul, {ToOperand(a), ToOperand(b)},
               ir::MatmulAttr(transpose_a, transpose_b));
}

#define ATOLL_UNARY_OP(Name, name)                             \
  Value FunctionBuilder::Name(Value a) {                       \
    return AddOp(*impl_, ir::OpCode::k##Name, {ToOperand(a)}); \
  }
#include "atoll/unary_ops.def"

Value FunctionBuilder::GeluBackward(Value dy, Value x) {
  return AddOp(*impl_, ir::OpCode::kGeluGrad, {ToOperand(dy), ToOperand(x)});
}
Value FunctionBuilder::BiasAdd(Value x, Value bias) {
  return AddOp(*impl_, ir::OpCode::kBiasAdd, {ToOperand(x), ToOperand(bias)});
}

namespace {

// `axis` of `v` counted from the front, or -1 (an error for InferType to report).
int NormalizeAxis(const FunctionBuilder::Impl& impl, Value v, int axis) {
  const ir::TensorType* t = ir::OperandType(impl.def, ToOperand(v));
  if (t == nullptr) return axis;
  return axis < 0 ? axis + static_cast<int>(t->shape.size()) : axis;
}

}  // namespace

Value FunctionBuilder::ReduceSum(Value x, int axis) {
  return AddOp(*impl_, ir::OpCode::kReduceSum, {ToOperand(x)}, NormalizeAxis(*impl_, x, axis));
}
Value FunctionBuilder::ReduceMean(Value x, int axis) {
  // A sum scaled by the global extent: on a cut axis each device's share then sums to the
  // mean, which a local mean would not. A storage dtype's sum and scaling happen in f32, so
  // that the mean is rounded once.
  const ir::TensorType* t = ir::OperandType(impl_->def, ToOperand(x));
  if (t == nullptr) return ReduceSum(x, axis);  // which records the error
  const DType dtype = t->dtype;
  const int dim = NormalizeAxis(*impl_, x, axis);
  const int64_t extent = dim >= 0 && dim < static_cast<int>(t->shape.size()) ? t->shape[dim] : 0;
  const bool storage = ClassOf(dtype) == DTypeClass::kStorage;
  const Value sum = ReduceSum(storage ? Cast(x, DType::kF32) : x, axis);
  if (!impl_->status.ok()) return {};
  const Value mean = Mul(sum, 1.0 / static_cast<double>(extent));
  return storage ? Cast(mean, dtype) : mean;
}

Value FunctionBuilder::Softmax(Value x) {
  return AddOp(*impl_, ir::OpCode::kSoftmax, {ToOperand(x)});
}
Value FunctionBuilder::LayerNorm(Value x, Value gamma, Value beta, double eps) {
  return AddOp(*impl_, ir::OpCode::kLayerNorm, {ToOperand(x), ToOperand(gamma), ToOperand(beta)},
               eps);
}
FunctionBuilder::LayerNormGrads FunctionBuilder::LayerNormBackward(Value dy, Value x, Value gamma,
                                                                   double eps) {
  const std::vector<ir::Operand> operands = {ToOperand(dy), ToOperand(x), ToOperand(gamma)};
  return {AddOp(*impl_, ir::OpCode::kLayerNormGradX, operands, eps),
          AddOp(*impl_, ir::OpCode::kLayerNormGradGamma, operands, eps),
          AddOp(*impl_, ir::OpCode::kLayerNormGradBeta, operands, eps)};
}
FunctionBuilder::CrossEntropyValues FunctionBuilder::CrossEntropy(Value logits, Value labels) {
  const ir::TensorType* t = ir::OperandType(impl_->def, ToOperand(logits));
  // The loss op carries the global batch, so that a shard can scale its mean to its share.
  const double batch = t != nullptr && !t->shape.empty() ? static_cast<double>(t->shape[0]) : 0;
  return {
      AddOp(*impl_, ir::OpCode::kCrossEntropyLoss, {ToOperand(logits), ToOperand(labels)}, batch),
      AddOp(*impl_, ir::OpCode::kCrossEntropyGrad, {ToOperand(logits), ToOperand(labels)})};
}
Value FunctionBuilder::Transpose(Value x) {
  return AddOp(*impl_, ir::OpCode::kTranspose, {ToOperand(x)});
}
Value FunctionBuilder::SgdUpdate(Value param, Value grad, double learning_rate) {
  return AddOp(*impl_, ir::OpCode::kSgdUpdate, {ToOperand(param), ToOperand(grad)}, learning_rate);
}
FunctionBuilder::AdamValues FunctionBuilder::AdamUpdate(Value param, Value grad, Value m, Value v,
                                                        Value step, const AdamOptions& options) {
  const std::vector<ir::Operand> operands = {ToOperand(param),
                                             ToOperand(grad),
                                             ToOperand(m),
                                             ToOperand(v),
                                             ToOperand(step),
                                             Scalar(options.learning_rate),
                                             Scalar(options.beta1),
                                             Scalar(options.beta2),
                                             Scalar(options.epsilon),
                                             Scalar(options.weight_decay)};
  return {AddOp(*impl_, ir::OpCode::kAdamParam, operands),
          AddOp(*impl_, ir::OpCode::kAdamM, operands), AddOp(*impl_, ir::OpCode::kAdamV, operands)};
}

Value FunctionBuilder::GroupedMatmul(Value x, Value w, bool transpose_w) {
  return AddOp(*impl_, ir::OpCode::kGroupedMatmul, {ToOperand(x), ToOperand(w)},
               transpose_w ? 1.0 : 0.0);
}
Value FunctionBuilder::GroupedWeightGrad(Value x, Value dy, int64_t groups) {
  return AddOp(*impl_, ir::OpCode::kGroupedWeightGrad, {ToOperand(x), ToOperand(dy)},
               static_cast<double>(groups));
}
Value FunctionBuilder::ScatterAddRows(Value values, Value ids, int64_t rows) {
  return AddOp(*impl_, ir::OpCode::kScatterAddRows, {ToOperand(values), ToOperand(ids)},
               static_cast<double>(rows));
}
Value FunctionBuilder::GatherRows(Value table, Value ids) {
  return AddOp(*impl_, ir::OpCode::kGatherRows, {ToOperand(table), ToOperand(ids)});
}

FunctionBuilder::TopKValues FunctionBuilder::TopK(Value x, int64_t k) {
  const auto attr = static_cast<double>(k);
  return {AddOp(*impl_, ir::OpCode::kTopKValues, {ToOperand(x)}, attr),
          AddOp(*impl_, ir::OpCode::kTopKIndices, {ToOperand(x)}, attr)};
}
Value FunctionBuilder::Column(Value x, int64_t j) {
  return AddOp(*impl_, ir::OpCode::kColumn, {ToOperand(x)}, static_cast<double>(j));
}

Value FunctionBuilder::Primitive(std::string_view name, const std::vector<Value>& operands,
                                 const std::vector<int64_t>& params, double attr) {
  if (!impl_->status.ok()) return {};
  const Result<ir::OpCode> code = ir::OpCodeNamed(name);
  if (!code.ok()) {
    impl_->status = code.status().WithContext("function '" + impl_->def.name + "'");
    return {};
  }
  std::vector<ir::Operand> wire;
  for (Value v : operands) wire.push_back(ToOperand(v));
  return AddOp(*impl_, *code, std::move(wire), attr, params);
}

std::vector<Value> FunctionBuilder::Structured(std::string_view name,
                                               const std::vector<const FunctionBuilder*>& bodies,
                                               const std::vector<Value>& operands,
                                               const std::vector<int64_t>& params) {
  if (!impl_->status.ok()) return {};
  auto fail = [&](Status status) {
    impl_->status = status.WithContext("function '" + impl_->def.name + "'");
    return std::vector<Value>{};
  };
  const Result<ir::OpCode> code = ir::OpCodeNamed(name);
  if (!code.ok()) return fail(code.status());
  if (!ir::IsStructured(*code)) {
    return fail(
        InvalidArgument(fmt::format("'{}' is not a structured primitive (while, scan or "
                                    "cond)",
                                    name)));
  }
  // The bodies join this function's; the op names them by their index there.
  std::vector<int64_t> wire_params;
  for (const FunctionBuilder* body : bodies) {
    if (body == nullptr) return fail(InvalidArgument(fmt::format("{}: a null body", name)));
    if (!body->impl_->status.ok()) {
      return fail(body->impl_->status.WithContext(fmt::format("{} body", name)));
    }
    wire_params.push_back(static_cast<int64_t>(impl_->def.bodies.size()));
    impl_->def.bodies.push_back(body->impl_->def);
  }
  wire_params.insert(wire_params.end(), params.begin(), params.end());
  std::vector<ir::Operand> wire;
  for (Value v : operands) wire.push_back(ToOperand(v));
  const size_t bodies_before = impl_->def.bodies.size() - bodies.size();
  const Value first = AddOp(*impl_, *code, std::move(wire), 0.0, std::move(wire_params));
  if (!impl_->status.ok()) {
    impl_->def.bodies.resize(bodies_before);
    return {};
  }
  const auto results = ir::ResultTypes(impl_->def, impl_->def.ops.back());
  if (!results.ok()) return fail(results.status());
  std::vector<Value> out = {first};
  for (size_t k = 1; k < results->size(); ++k) {
    out.push_back(AddOp(*impl_, ir::OpCode::kTupleElement, {ToOperand(first)}, 0.0,
                        {static_cast<int64_t>(k)}));
  }
  return out;
}

Value FunctionBuilder::Cast(Value x, DType dtype) {
  return AddOp(*impl_, ir::OpCode::kCast, {ToOperand(x)}, static_cast<double>(dtype));
}

Value FunctionBuilder::Spin(Value a, double micros) {
  return AddOp(*impl_, ir::OpCode::kSpin, {ToOperand(a)}, micros);
}

Value FunctionBuilder::Filter(Value a, double threshold) {
  return AddOp(*impl_, ir::OpCode::kFilter, {ToOperand(a)}, threshold);
}

static_assert(kWholeSlice == ir::kWholeSlice);

Value FunctionBuilder::AllReduceSum(Value a, int mesh_axis) {
  return AddOp(*impl_, ir::OpCode::kAllReduceSum, {ToOperand(a)}, mesh_axis);
}
Value FunctionBuilder::AllReduceMax(Value a, int mesh_axis) {
  return AddOp(*impl_, ir::OpCode::kAllReduceMax, {ToOperand(a)}, mesh_axis);
}
Value FunctionBuilder::AllReduceMin(Value a, int mesh_axis) {
  return AddOp(*impl_, ir::OpCode::kAllReduceMin, {ToOperand(a)}, mesh_axis);
}
Value FunctionBuilder::AllReduceMean(Value a, int mesh_axis) {
  return AddOp(*impl_, ir::OpCode::kAllReduceMean, {ToOperand(a)}, mesh_axis);
}
Value FunctionBuilder::AllGather(Value a, int mesh_axis) {
  return AddOp(*impl_, ir::OpCode::kAllGather, {ToOperand(a)}, mesh_axis);
}
Value FunctionBuilder::ReduceScatter(Value a, int mesh_axis, int dim) {
  return AddOp(*impl_, ir::OpCode::kReduceScatter, {ToOperand(a)}, mesh_axis,
               {NormalizeAxis(*impl_, a, dim)});
}
Value FunctionBuilder::AllToAll(Value a, int mesh_axis, int dim) {
  return AddOp(*impl_, ir::OpCode::kAllToAll, {ToOperand(a)}, mesh_axis,
               {NormalizeAxis(*impl_, a, dim)});
}
Value FunctionBuilder::Broadcast(Value a, int mesh_axis, int64_t root) {
  return AddOp(*impl_, ir::OpCode::kBroadcast, {ToOperand(a)}, mesh_axis, {root});
}
Value FunctionBuilder::CollectivePermute(Value a, int mesh_axis,
                                         const std::vector<std::pair<int64_t, int64_t>>& pairs) {
  std::vector<int64_t> params;
  for (const auto& [source, target] : pairs) {
    params.push_back(source);
    params.push_back(target);
  }
  return AddOp(*impl_, ir::OpCode::kCollectivePermute, {ToOperand(a)}, mesh_axis,
               std::move(params));
}

std::vector<Value> FunctionBuilder::Call(const FunctionBuilder& f, const std::vector<Value>& args) {
  const ir::FunctionDef& callee = f.impl_->def;
  // On an error, as many values as f has outputs, all invalid: the ops that take them are
  // refused as any op after an error.
  const std::vector<Value> none(callee.outputs.size());
  if (!impl_->status.ok()) return none;
  auto fail = [&](Status status) {
    impl_->status = status.WithContext(
        fmt::format("function '{}', call of '{}'", impl_->def.name, callee.name));
    return none;
  };
  if (!f.impl_->status.ok()) return fail(f.impl_->status);
  if (args.size() != callee.inputs.size()) {
    return fail(InvalidArgument(
        fmt::format("takes {} arguments, got {}", callee.inputs.size(), args.size())));
  }
  std::vector<ir::Operand> inputs;
  for (size_t i = 0; i < args.size(); ++i) {
    const ir::Operand o = ToOperand(args[i]);
    const ir::TensorType* t = ir::OperandType(impl_->def, o);
    if (t == nullptr) return fail(InvalidArgument(fmt::format("argument {} is not a value", i)));
    if (*t != callee.inputs[i]) {
      return fail(InvalidArgument(fmt::format("argument {} is {}, the input takes {}", i,
                                              ir::Describe(*t), ir::Describe(callee.inputs[i]))));
    }
    inputs.push_back(o);
  }
  // The callee's values as operands of this builder, its ops appended in order.
  std::vector<ir::Operand> results;
  auto mapped = [&](const ir::Operand& o) {
    if (o.kind == ir::Operand::kInput) return inputs[o.index];
    if (o.kind == ir::Operand::kOp) return results[o.index];
    return o;
  };
  // The callee's bodies join this function's, after those it has.
  const auto body_offset = static_cast<int64_t>(impl_->def.bodies.size());
  impl_->def.bodies.insert(impl_->def.bodies.end(), callee.bodies.begin(), callee.bodies.end());
  for (const ir::Op& op : callee.ops) {
    std::vector<ir::Operand> operands;
    for (const ir::Operand& o : op.operands) operands.push_back(mapped(o));
    std::vector<int64_t> params = op.params;
    for (size_t b = 0; b < ir::BodyParamCount(op); ++b) params[b] += body_offset;
    const Value v = AddOp(*impl_, op.code, std::move(operands), op.attr, std::move(params));
    if (!impl_->status.ok()) return none;
    results.push_back(ToOperand(v));
  }
  std::vector<Value> outputs;
  for (const ir::Operand& o : callee.outputs) {
    const ir::Operand m = mapped(o);
    outputs.push_back({m.kind == ir::Operand::kInput ? kValueInput : kValueOp, m.index});
  }
  return outputs;
}

Result<FunctionBuilder::ValueType> FunctionBuilder::TypeOf(Value v) const {
  const ir::TensorType* t = ir::OperandType(impl_->def, ToOperand(v));
  if (t == nullptr) {
    return InvalidArgument(
        fmt::format("function '{}': not a value of this builder", impl_->def.name));
  }
  std::vector<int> axes(t->split.begin(), t->split.end());
  return ValueType{t->dtype, t->shape, Sharding::Axes(std::move(axes))};
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
