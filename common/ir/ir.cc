#include "common/ir/ir.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "common/ir/type_rules.h"

namespace atl::ir {

namespace {

// One row of the op table, as the IR uses it.
struct OpRow {
  std::string_view name;
  size_t operands;
  internal::TypeRule type_rule;
  bool collective;
};

constexpr OpRow kOpTable[] = {
#define ATOLL_OP(Name, name, operands, TypeRule, CpuKernel, GradRule) \
  {name, operands, &internal::TypeRule, false},
#define ATOLL_COLLECTIVE_OP(Name, name, TypeRule, GradRule) {name, 1, &internal::TypeRule, true},
#include "common/ir/ops.def"
};
static_assert(std::size(kOpTable) == kNumOpCodes);

// The row of `code`, or nullptr for a code outside the table (a corrupt or hand-made op).
const OpRow* RowOf(OpCode code) {
  const auto index = static_cast<size_t>(code);
  return index < kNumOpCodes ? &kOpTable[index] : nullptr;
}

}  // namespace

std::string_view OpName(OpCode code) {
  const OpRow* row = RowOf(code);
  return row != nullptr ? row->name : "?";
}

Result<OpCode> OpCodeNamed(std::string_view name) {
  for (size_t code = 0; code < kNumOpCodes; ++code) {
    if (kOpTable[code].name == name) return static_cast<OpCode>(code);
  }
  return InvalidArgument(fmt::format("no primitive is called '{}'", name));
}

bool TakesOperandCount(OpCode code, size_t count) {
  const OpRow* row = RowOf(code);
  if (row == nullptr) return false;
  return row->operands == kVariadic ? count >= 1 : count == row->operands;
}

bool IsUnaryOp(OpCode code) {
  switch (code) {
#define ATOLL_UNARY_OP(Name, name) case OpCode::k##Name:
#include "atoll/unary_ops.def"
    return true;
    default:
      return false;
  }
}

double MatmulAttr(bool transpose_a, bool transpose_b) {
  return (transpose_a ? 1.0 : 0.0) + (transpose_b ? 2.0 : 0.0);
}
bool MatmulTransposeA(double attr) { return (static_cast<int>(attr) & 1) != 0; }
bool MatmulTransposeB(double attr) { return (static_cast<int>(attr) & 2) != 0; }

bool IsCollective(OpCode code) {
  const OpRow* row = RowOf(code);
  return row != nullptr && row->collective;
}

bool HasCollectives(const FunctionDef& fn) {
  for (const auto& op : fn.ops) {
    if (IsCollective(op.code)) return true;
  }
  return false;
}

bool IsStatic(const TensorType& type) {
  for (int64_t d : type.shape) {
    if (d == kDynamicDim) return false;
  }
  return true;
}

bool ShapeFits(const Shape& declared, const Shape& actual) {
  if (declared.size() != actual.size()) return false;
  for (size_t i = 0; i < declared.size(); ++i) {
    if (declared[i] != kDynamicDim && declared[i] != actual[i]) return false;
  }
  return true;
}

bool IsIrregular(const FunctionDef& fn) {
  for (const auto& t : fn.inputs) {
    if (!IsStatic(t)) return true;
  }
  for (const auto& t : OutputTypes(fn)) {
    if (!IsStatic(t)) return true;
  }
  return false;
}

const TensorType* OperandType(const FunctionDef& fn, const Operand& operand) {
  switch (operand.kind) {
    case Operand::kInput:
      if (operand.index >= 0 && static_cast<size_t>(operand.index) < fn.inputs.size()) {
        return &fn.inputs[operand.index];
      }
      return nullptr;
    case Operand::kOp:
      if (operand.index >= 0 && static_cast<size_t>(operand.index) < fn.ops.size()) {
        return &fn.ops[operand.index].type;
      }
      return nullptr;
    default:
      return nullptr;
  }
}

std::vector<TensorType> OutputTypes(const FunctionDef& fn) {
  std::vector<TensorType> out;
  for (const auto& o : fn.outputs) {
    const TensorType* t = OperandType(fn, o);
    out.push_back(t ? *t : TensorType{});
  }
  return out;
}

TensorType SplitType(DType dtype, Shape shape, int dim) {
  std::vector<int32_t> split(shape.size(), -1);
  if (dim >= 0 && static_cast<size_t>(dim) < split.size()) split[dim] = 0;
  return {dtype, std::move(shape), std::move(split)};
}

bool IsReplicated(const TensorType& type) {
  for (int32_t axis : type.split) {
    if (axis >= 0) return false;
  }
  return true;
}

Shape MeshOf(const FunctionDef& fn, int num_shards) {
  return fn.mesh.empty() ? Shape{num_shards} : fn.mesh;
}

namespace {

// Shard `shard`'s coordinates on `mesh` (row-major).
Shape MeshCoords(const Shape& mesh, int shard) {
  Shape coords(mesh.size());
  int64_t rest = shard;
  for (size_t a = mesh.size(); a-- > 0;) {
    coords[a] = mesh[a] > 0 ? rest % mesh[a] : 0;
    rest = mesh[a] > 0 ? rest / mesh[a] : 0;
  }
  return coords;
}

bool AxisOk(int32_t axis, const Shape& mesh) {
  return axis >= 0 && static_cast<size_t>(axis) < mesh.size() && mesh[axis] > 0;
}

}  // namespace

Shape ShardShape(const TensorType& type, const Shape& mesh) {
  Shape s = type.shape;
  for (size_t d = 0; d < s.size() && d < type.split.size(); ++d) {
    if (AxisOk(type.split[d], mesh) && s[d] != kDynamicDim) s[d] /= mesh[type.split[d]];
  }
  return s;
}

Shape ShardOrigin(const TensorType& type, const Shape& mesh, int shard) {
  const Shape coords = MeshCoords(mesh, shard);
  const Shape local = ShardShape(type, mesh);
  Shape origin(type.shape.size(), 0);
  for (size_t d = 0; d < origin.size() && d < type.split.size(); ++d) {
    if (AxisOk(type.split[d], mesh)) origin[d] = coords[type.split[d]] * local[d];
  }
  return origin;
}

bool IsFirstReplica(const TensorType& type, const Shape& mesh, int shard) {
  const Shape coords = MeshCoords(mesh, shard);
  for (size_t a = 0; a < mesh.size(); ++a) {
    const bool cut = std::find(type.split.begin(), type.split.end(), static_cast<int32_t>(a)) !=
                     type.split.end();
    if (!cut && coords[a] != 0) return false;
  }
  return true;
}

Status CheckLayout(const std::string& what, const TensorType& t, const Shape& mesh) {
  for (auto d : t.shape) {
    // Size 0 is a shape like any other, as in jax.lax: an empty batch, an empty slice.
    if (d < 0 && d != kDynamicDim)
      return InvalidArgument(what + " has a negative dimension " + ShapeString(t.shape));
  }
  ATOLL_RETURN_IF_ERROR(internal::CheckCountable(t).WithContext(what));
  if (t.split.size() != t.shape.size()) {
    return InvalidArgument(fmt::format("{} {} has a split for {} dimensions", what,
                                       ShapeString(t.shape), t.split.size()));
  }
  std::vector<bool> used(mesh.size());
  for (size_t d = 0; d < t.split.size(); ++d) {
    const int32_t axis = t.split[d];
    if (axis < 0) continue;
    if (static_cast<size_t>(axis) >= mesh.size()) {
      return InvalidArgument(
          fmt::format("{} cuts dimension {} along mesh axis {}, but the mesh "
                      "{} has {} axes",
                      what, d, axis, ShapeString(mesh), mesh.size()));
    }
    if (used[axis]) {
      return InvalidArgument(fmt::format("{} cuts two dimensions along mesh axis {}", what, axis));
    }
    used[axis] = true;
    if (t.shape[d] == kDynamicDim) {
      if (mesh.size() != 1) {
        return InvalidArgument(
            fmt::format("{}: a dynamic dimension can be cut only over a 1-D mesh", what));
      }
      continue;
    }
    if (t.shape[d] % mesh[axis] != 0) {
      return InvalidArgument(
          fmt::format("{} {}: dimension {} ({}) does not divide over mesh axis {} ({} devices)",
                      what, ShapeString(t.shape), d, t.shape[d], axis, mesh[axis]));
    }
  }
  return Status::Ok();
}

namespace {

Status CheckOperand(const FunctionDef& fn, const Operand& o, size_t before_op) {
  if (o.kind == Operand::kScalar) return Status::Ok();
  if (o.kind == Operand::kOp && static_cast<size_t>(o.index) >= before_op) {
    return InvalidArgument(fmt::format("operand refers to op {} which is not earlier", o.index));
  }
  if (OperandType(fn, o) == nullptr) {
    return InvalidArgument(
        fmt::format("operand (kind {}, index {}) does not exist", o.kind, o.index));
  }
  return Status::Ok();
}

// A grouped op's groups are the experts of a routed layer, one per device: the rows a
// device holds all belong to its own group, so a device cannot hold several.
Status CheckOneGroupPerDevice(const FunctionDef& fn, const Op& op, const Shape& mesh) {
  if (op.code != OpCode::kGroupedMatmul && op.code != OpCode::kGroupedWeightGrad) {
    return Status::Ok();
  }
  const TensorType* groups =
      op.code == OpCode::kGroupedMatmul ? OperandType(fn, op.operands[1]) : &op.type;
  const int32_t axis = groups->split[0];
  if (!AxisOk(axis, mesh)) {
    return InvalidArgument(
        fmt::format("{}: groups must be cut along a mesh axis", OpName(op.code)));
  }
  if (groups->shape[0] == mesh[axis]) return Status::Ok();
  return InvalidArgument(fmt::format(
      "{}: {} groups over mesh axis {} of {} devices; each device must hold exactly one group",
      OpName(op.code), groups->shape[0], axis, mesh[axis]));
}

// What a collective's type rule could not check without the slice: its axis is one of the
// mesh's, its sizes divide over it, and its root and pairs name members of its groups.
Status CheckCollective(const Op& op, const Shape& mesh) {
  if (!IsCollective(op.code)) return Status::Ok();
  const auto axis = static_cast<int64_t>(op.attr);  // the type rule checked it is whole
  if (axis == kWholeSlice) return Status::Ok();     // and only all-reduces may say so
  if (axis >= static_cast<int64_t>(mesh.size())) {
    return InvalidArgument(fmt::format("{} runs along mesh axis {}, but the mesh {} has {} axes",
                                       OpName(op.code), axis, ShapeString(mesh), mesh.size()));
  }
  ATOLL_RETURN_IF_ERROR(CheckLayout(fmt::format("{} result", OpName(op.code)), op.type, mesh));
  const int64_t members = mesh[axis];
  auto member = [&](int64_t coordinate, std::string_view what) -> Status {
    if (coordinate < members) return Status::Ok();
    return InvalidArgument(fmt::format("{}: {} {} is not a coordinate of mesh axis {} ({} devices)",
                                       OpName(op.code), what, coordinate, axis, members));
  };
  if (op.code == OpCode::kBroadcast) return member(op.params[0], "root");
  if (op.code == OpCode::kCollectivePermute) {
    for (size_t i = 0; i < op.params.size(); ++i) {
      ATOLL_RETURN_IF_ERROR(member(op.params[i], i % 2 == 0 ? "source" : "target"));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<TensorType> InferType(const FunctionDef& fn, const Op& op) {
  const OpRow* row = RowOf(op.code);
  if (row == nullptr) {
    return InvalidArgument(fmt::format("unknown op code {}", static_cast<int>(op.code)));
  }
  if (!TakesOperandCount(op.code, op.operands.size())) {
    if (row->operands == kVariadic) {
      return InvalidArgument(fmt::format("{} takes one or more operands, got none", row->name));
    }
    return InvalidArgument(fmt::format("{} takes {} operand{}, got {}", row->name, row->operands,
                                       row->operands == 1 ? "" : "s", op.operands.size()));
  }
  ATOLL_ASSIGN_OR_RETURN(TensorType type, row->type_rule(fn, op));
  // Operands of countable size can still make a result that is not ([m,1] x [1,n]).
  ATOLL_RETURN_IF_ERROR(internal::CheckCountable(type).WithContext(std::string(row->name)));
  return type;
}

namespace {

Status ValidateOnMesh(const FunctionDef& fn, const Shape& mesh, bool slice_known, int depth);

// A body of `fn`: checked on its parent's mesh, with no collective (a body's ops would need
// the gang's other shards to run the same trip count and branch, which nothing promises).
Status ValidateBody(const FunctionDef& body, const Shape& mesh, bool slice_known, int depth) {
  if (depth >= kMaxBodyDepth) {
    return InvalidArgument(fmt::format("bodies nest deeper than {} levels", kMaxBodyDepth));
  }
  if (!body.mesh.empty()) {
    return InvalidArgument("a body runs on its parent's mesh: its own mesh must be empty, got " +
                           ShapeString(body.mesh));
  }
  for (size_t i = 0; i < body.ops.size(); ++i) {
    if (IsCollective(body.ops[i].code)) {
      return InvalidArgument(
          fmt::format("op {} ({}) is a collective: a loop or branch body may not hold one", i,
                      OpName(body.ops[i].code)));
    }
  }
  return ValidateOnMesh(body, mesh, slice_known, depth + 1);
}

Status ValidateOnMesh(const FunctionDef& fn, const Shape& mesh, bool slice_known, int depth) {
  if (fn.outputs.empty()) return InvalidArgument("function '" + fn.name + "' has no outputs");
  for (size_t b = 0; b < fn.bodies.size(); ++b) {
    ATOLL_RETURN_IF_ERROR(ValidateBody(fn.bodies[b], mesh, slice_known, depth)
                              .WithContext(fmt::format("body {} ('{}')", b, fn.bodies[b].name)));
  }
  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    ATOLL_RETURN_IF_ERROR(CheckLayout(fmt::format("input {}", i), fn.inputs[i], mesh));
  }
  for (size_t i = 0; i < fn.ops.size(); ++i) {
    const Op& op = fn.ops[i];
    for (const auto& o : op.operands) {
      ATOLL_RETURN_IF_ERROR(CheckOperand(fn, o, i).WithContext(fmt::format("op {}", i)));
    }
    ATOLL_ASSIGN_OR_RETURN(TensorType want, InferType(fn, op));
    if (!(want == op.type)) return InvalidArgument(fmt::format("op {}: result type is wrong", i));
    if (slice_known) {
      ATOLL_RETURN_IF_ERROR(
          CheckOneGroupPerDevice(fn, op, mesh).WithContext(fmt::format("op {}", i)));
      ATOLL_RETURN_IF_ERROR(CheckCollective(op, mesh).WithContext(fmt::format("op {}", i)));
    }
  }
  for (const auto& o : fn.outputs) {
    if (o.kind == Operand::kScalar) return InvalidArgument("an output cannot be a scalar");
    ATOLL_RETURN_IF_ERROR(CheckOperand(fn, o, fn.ops.size()).WithContext("output"));
  }
  return Status::Ok();
}

}  // namespace

Status Validate(const FunctionDef& fn, int num_shards, bool slice_known) {
  if (num_shards <= 0) return InvalidArgument("a function needs at least one device");
  const Shape mesh = MeshOf(fn, num_shards);
  for (int64_t extent : mesh) {
    if (extent <= 0) return InvalidArgument("mesh " + ShapeString(mesh) + " has an empty axis");
  }
  auto devices = CheckedNumElements(mesh);
  if (!devices.ok()) return devices.status().WithContext("mesh");
  if (*devices != num_shards) {
    return InvalidArgument(fmt::format("mesh {} holds {} devices, the slice has {}",
                                       ShapeString(mesh), *devices, num_shards));
  }
  return ValidateOnMesh(fn, mesh, slice_known, 0);
}

bool IsStructured(OpCode code) {
  return code == OpCode::kWhile || code == OpCode::kScan || code == OpCode::kCond;
}

size_t BodyParamCount(const Op& op) {
  switch (op.code) {
    case OpCode::kWhile:
      return std::min<size_t>(2, op.params.size());
    case OpCode::kScan:
      return std::min<size_t>(1, op.params.size());
    case OpCode::kCond:
      return op.params.size() / 2;
    default:
      return 0;
  }
}

Result<std::vector<TensorType>> ResultTypes(const FunctionDef& fn, const Op& op) {
  if (IsStructured(op.code)) return internal::StructuredResults(fn, op);
  return std::vector<TensorType>{op.type};
}

}  // namespace atl::ir
