// The intermediate representation of compiled functions, shared by the client library
// (which builds it), the RM (which stores it) and executors (which run it). A function body
// is a straight-line list of ops over global shapes; every executor runs it on its shard.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <msgpack.hpp>

#include "atoll/tensor.h"
#include "common/ir/msgpack_enum.h"

ATOLL_MSGPACK_ENUM(atl::DType, atl::kNumDTypes)

namespace atl::ir {

// A tensor's global type and how it is laid over a slice's device mesh (the slice's
// devices in row-major order over the mesh's axes). split[d] is the mesh axis that
// dimension d is cut along, or -1; a dimension cut along axis a is divided into mesh[a]
// contiguous blocks (equal for a static dimension; of data-dependent sizes for a dynamic
// one, kDynamicDim). Mesh axes no dimension is cut along hold replicas. split has one
// entry per dimension; all -1 is a replicated tensor.
struct TensorType {
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<int32_t> split;

  bool operator==(const TensorType&) const = default;
  MSGPACK_DEFINE(dtype, shape, split);
};

// "f32[8,4] split [0,-1]", for error messages.
std::string Describe(const TensorType& t);

// The type of a tensor cut along dimension `dim` over mesh axis 0 (dim < 0: replicated).
TensorType SplitType(DType dtype, Shape shape, int dim);
bool IsReplicated(const TensorType& type);

// The IR's ops, one per row of the op table common/ir/ops.def (which says what each takes,
// what its attr means and which shardings it accepts), in the table's order: kAdd, kSub,
// kMul, kDiv, kMatmul, kSpin, kAllReduceSum, kFilter, the unary ops of
// include/atoll/unary_ops.def (kExp, ..., kGelu), kGeluGrad, ..., kColumn, then the other
// collectives (kAllReduceMax, ..., kCollectivePermute).
// The operand count of a row that takes one or more operands (select_n, concatenate).
inline constexpr size_t kVariadic = static_cast<size_t>(-1);

enum class OpCode : uint8_t {
#define ATOLL_OP(Name, name, operands, TypeRule, CpuKernel, GradRule) k##Name,
#include "common/ir/ops.def"
};
// How many op codes there are: codes from 0 to kNumOpCodes - 1.
inline constexpr size_t kNumOpCodes = 0
#define ATOLL_OP(Name, name, operands, TypeRule, CpuKernel, GradRule) +1
#include "common/ir/ops.def"
    ;
static_assert(kNumOpCodes <= 256, "an OpCode is one byte on the wire");

// The row's name ("add", "matmul", "exp", ...); "?" for a code outside the table.
std::string_view OpName(OpCode code);
// The code of the row called `name`; InvalidArgument naming it when no row is.
Result<OpCode> OpCodeNamed(std::string_view name);
// Whether `count` operands fit the row of `code` (its count, or one or more for kVariadic).
bool TakesOperandCount(OpCode code, size_t count);

// True for the codes of the unary ops (the rows of include/atoll/unary_ops.def).
bool IsUnaryOp(OpCode code);

// kMatmul's attr from its transpose flags, and back.
double MatmulAttr(bool transpose_a, bool transpose_b);
bool MatmulTransposeA(double attr);
bool MatmulTransposeB(double attr);

// An op's argument: a function input, the result of an earlier op, or a scalar constant.
struct Operand {
  enum Kind : uint8_t { kInput = 0, kOp = 1, kScalar = 2 };
  uint8_t kind = kInput;
  int32_t index = 0;    // input or op index
  double scalar = 0.0;  // for kScalar

  bool operator==(const Operand&) const = default;
  MSGPACK_DEFINE(kind, index, scalar);
};

struct Op {
  OpCode code = OpCode::kAdd;
  std::vector<Operand> operands;
  double attr = 0.0;  // per op code, see ops.def (kSpin: microseconds; kFilter: threshold)
  TensorType type;    // the result's global type, inferred by the builder
  // Whole numbers beyond attr, per op code, see ops.def (a collective's dimension, root or
  // source-target pairs); empty for most ops.
  std::vector<int64_t> params;

  Op() = default;
  Op(OpCode op_code, std::vector<Operand> op_operands, double op_attr, TensorType op_type,
     std::vector<int64_t> op_params = {})
      : code(op_code),
        operands(std::move(op_operands)),
        attr(op_attr),
        type(std::move(op_type)),
        params(std::move(op_params)) {}

  bool operator==(const Op&) const = default;
  MSGPACK_DEFINE(code, operands, attr, type, params);
};

struct FunctionDef {
  std::string name;
  std::vector<TensorType> inputs;
  std::vector<Operand> outputs;  // each an input or an op result
  std::vector<Op> ops;
  Shape mesh;  // the shape of the device mesh it runs on; empty: 1-D over every device
  // The functions its structured ops (while, scan, cond) run, named by index in their
  // params. A body runs on its parent's mesh (its own mesh stays empty) and holds no
  // collective; bodies nest at most kMaxBodyDepth deep.
  std::vector<FunctionDef> bodies;

  bool operator==(const FunctionDef&) const = default;
  MSGPACK_DEFINE(name, inputs, outputs, ops, mesh, bodies);
};

inline constexpr int kMaxBodyDepth = 16;

// True for the structured control-flow ops (while, scan, cond): ops that run bodies of their
// function and have several results, read by tuple_element ops. The interpreter runs them.
bool IsStructured(OpCode code);
// How many of a structured op's first params name bodies (0 for any other op).
size_t BodyParamCount(const Op& op);
// The types of every result of `op` in `fn`: a structured op's results (its first is
// op.type), or op.type alone. InvalidArgument when the op's bodies do not fit its operands.
Result<std::vector<TensorType>> ResultTypes(const FunctionDef& fn, const Op& op);

// The mesh `fn` runs on over `num_shards` devices.
Shape MeshOf(const FunctionDef& fn, int num_shards);

// True for the collective ops (the ATOLL_COLLECTIVE_OP rows of ops.def): ops that need the
// other shards of their gang, run by the interpreter through compute::Collectives.
bool IsCollective(OpCode code);
// True when `fn` has a collective op.
bool HasCollectives(const FunctionDef& fn);
// A collective's attr is the mesh axis its groups run along; an all-reduce's may be
// kWholeSlice: one group of every device of the slice.
inline constexpr int32_t kWholeSlice = -1;

// True when every dimension of `type` is known before the function runs.
bool IsStatic(const TensorType& type);
// True when `actual` fits `declared`: same rank, equal static dimensions (a dynamic one
// takes any size).
bool ShapeFits(const Shape& declared, const Shape& actual);
// True when an input or output of `fn` has a data-dependent shape: nothing can be
// allocated for it before its inputs exist, so it is dispatched sequentially.
bool IsIrregular(const FunctionDef& fn);

// The type of an operand inside `fn` (a scalar has no tensor type: returns nullptr).
const TensorType* OperandType(const FunctionDef& fn, const Operand& operand);
std::vector<TensorType> OutputTypes(const FunctionDef& fn);

// The result type `op` must have, from its operands' types in `fn` (its row's operand count,
// then its type rule); InvalidArgument says why the operands do not fit the op, or that the
// op code is unknown.
Result<TensorType> InferType(const FunctionDef& fn, const Op& op);

// Checks that the mesh holds `num_shards` devices, every operand refers backwards, shapes
// agree, every tensor's split names distinct axes of the mesh, and every static split
// dimension divides evenly over its axis, and grouped ops have one group per device, and
// collectives run along an axis of the mesh, over sizes that divide over it, with roots and
// pairs that name its coordinates. `slice_known` false (a function being built, checked over
// a mesh of ones before it is registered on a slice) skips those last two checks, which need
// the slice's real extents.
Status Validate(const FunctionDef& fn, int num_shards, bool slice_known = true);

// InvalidArgument, naming `what`, unless `type` can be laid out over `mesh`: positive (or
// dynamic) dimensions, a split per dimension naming distinct axes of the mesh, and every
// static dimension that is cut dividing evenly over its axis.
Status CheckLayout(const std::string& what, const TensorType& type, const Shape& mesh);

// The shape of one shard of `type` over `mesh` (a dynamic dimension stays dynamic).
Shape ShardShape(const TensorType& type, const Shape& mesh);
// Where shard `shard`'s block starts in the global tensor (static dimensions only).
Shape ShardOrigin(const TensorType& type, const Shape& mesh, int shard);
// True when shard `shard` holds the first replica of its block: its coordinate is 0 on
// every mesh axis that no dimension is cut along.
bool IsFirstReplica(const TensorType& type, const Shape& mesh, int shard);

}  // namespace atl::ir

ATOLL_MSGPACK_ENUM(atl::ir::OpCode, atl::ir::kNumOpCodes)
