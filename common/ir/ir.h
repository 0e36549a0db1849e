// The intermediate representation of compiled functions, shared by the client library
// (which builds it), the RM (which stores it) and executors (which run it). A function body
// is a straight-line list of ops over global shapes; every executor runs it on its shard.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "atoll/tensor.h"

MSGPACK_ADD_ENUM(atl::DType);

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

// The type of a tensor cut along dimension `dim` over mesh axis 0 (dim < 0: replicated).
TensorType SplitType(DType dtype, Shape shape, int dim);
bool IsReplicated(const TensorType& type);

// kAllReduceSum is a collective: every shard of the gang contributes its local tensor
// (which must be replicated-typed: a full-size partial value) and gets the elementwise sum.
// kFilter keeps the elements of a 1-D tensor greater than `attr`, in order: its result's
// length depends on the data (a dynamic dimension).
//
// The ops after kFilter are the kernel library's (kernels/), for training models. Every op
// runs on each shard's local block, so InferType accepts only the shardings for which the
// local result is the right block of the global one, and refuses the rest naming what it
// accepts. Where an op sums over a dimension that is cut along a mesh axis (matmul's
// contracted dimension, a reduction's axis, layer-norm parameter gradients, the
// cross-entropy loss), each device computes only its block's share: a PARTIAL value, typed
// as not cut along that axis, that AllReduceSum turns into the global value. Ops that
// average (cross-entropy) scale their share by the local/global batch so that the sum of
// the partials is the global mean.
//   unary (kExp .. kGelu)   f32, any sharding.
//   kGeluGrad(dy, x)        dy and x of one type.
//   kMatmul(a, b)           attr = transpose_a + 2 * transpose_b. With op(a) [m,k] and
//                           op(b) [k,n]: k cut alike in both (or in neither; cut: partial),
//                           m and n cut along different mesh axes (or not cut).
//   kBiasAdd(x, b)          x [..., n] + b [n] per row; b cut as x's last dimension.
//   kReduceSum(x)           over dimension `attr` (removed); cut: partial.
//   kSoftmax(x), kLayerNorm(x, gamma, beta) over the last dimension, which must not be cut;
//                           gamma, beta [d] replicated; attr = layer norm's epsilon.
//   kLayerNormGradX/Gamma/Beta(dy, x, gamma)  the three gradients of kLayerNorm (attr =
//                           epsilon); dgamma and dbeta are partial when x is cut.
//   kCrossEntropyLoss(logits [b,c], labels i32 [b])  f32 [] mean loss; attr = b, the
//                           global batch; c not cut, labels cut as logits' rows; partial.
//   kCrossEntropyGrad(logits, labels)  d loss / d logits, like logits.
//   kTranspose(x)           [m,n] -> [n,m]; the cuts move with their dimensions.
//   kSgdUpdate(param, grad) param - attr * grad, both of one type.
//   kAdamParam/M/V(param, grad, m, v, step, lr, beta1, beta2, epsilon, weight_decay)
//                           one Adam step (kernels::AdamUpdate): the new param, first and
//                           second moment. param, grad, m, v of one f32 type; step i32 []
//                           replicated, counting from 1; the rest scalar operands.
// Rows dealt out to experts (Route gives each device its rows, a dynamic dimension 0):
// the unary ops, kGeluGrad, kBiasAdd, kSoftmax and kSgdUpdate take a dynamic dimension 0
// too; the ops below take one anywhere a row count appears.
//   kGroupedMatmul(x, w)    x [m,k], rows cut along mesh axis A; w [G,k,n] (attr 1:
//                           [G,n,k], transposed) with G cut along A, one group per device:
//                           each device multiplies its rows by its own group. -> [m,n] cut
//                           like x's rows.
//   kGroupedWeightGrad(x, dy)  x [m,k], dy [m,n], rows cut alike along A; attr = G: each
//                           device's x^T dy over its own rows, as its group of [G,k,n]
//                           cut along A (the gradient of kGroupedMatmul's w).
//   kScatterAddRows(v, ids) v [m,d], ids i32 [m] cut like v's rows: row i of v added into
//                           row ids[i] of a zero [attr,d]; replicated (partial when cut).
//   kGatherRows(t, ids)     t [r,d] replicated, ids i32 [m]: rows t[ids[i]], [m,d] cut
//                           like ids.
// Row-wise ops for gating tokens on the devices (a dynamic dimension 0 allowed; the rows
// may be cut, the last dimension not):
//   kTopKValues/Indices(x)  x f32 [..., n]; attr = k in [1, n]: each row's k largest values
//                           f32 [..., k], best first (the lower index first among equals),
//                           and their positions i32 [..., k] (kernels::TopK); cut like x.
//   kColumn(x)              x f32 or i32 [m,n]; attr = j in [0, n): column j, [m] cut like
//                           x's rows.
enum class OpCode : uint8_t {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMatmul,
  kSpin,
  kAllReduceSum,
  kFilter,
  kExp,
  kLog,
  kTanh,
  kRelu,
  kNeg,
  kSqrt,
  kRsqrt,
  kGelu,
  kGeluGrad,
  kBiasAdd,
  kReduceSum,
  kSoftmax,
  kLayerNorm,
  kLayerNormGradX,
  kLayerNormGradGamma,
  kLayerNormGradBeta,
  kCrossEntropyLoss,
  kCrossEntropyGrad,
  kTranspose,
  kSgdUpdate,
  kAdamParam,
  kAdamM,
  kAdamV,
  kGroupedMatmul,
  kGroupedWeightGrad,
  kScatterAddRows,
  kGatherRows,
  kTopKValues,
  kTopKIndices,
  kColumn,
};
std::string_view OpName(OpCode code);

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
  double attr = 0.0;  // per op code, see OpCode (kSpin: microseconds; kFilter: threshold)
  TensorType type;    // the result's global type, inferred by the builder

  bool operator==(const Op&) const = default;
  MSGPACK_DEFINE(code, operands, attr, type);
};

struct FunctionDef {
  std::string name;
  std::vector<TensorType> inputs;
  std::vector<Operand> outputs;  // each an input or an op result
  std::vector<Op> ops;
  Shape mesh;  // the shape of the device mesh it runs on; empty: 1-D over every device

  bool operator==(const FunctionDef&) const = default;
  MSGPACK_DEFINE(name, inputs, outputs, ops, mesh);
};

// The mesh `fn` runs on over `num_shards` devices.
Shape MeshOf(const FunctionDef& fn, int num_shards);

// True when `fn` has an op that needs the other shards of its gang.
bool HasCollectives(const FunctionDef& fn);

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

// The result type `op` must have, from its operands' types in `fn`; InvalidArgument says
// why the operands do not fit the op.
Result<TensorType> InferType(const FunctionDef& fn, const Op& op);

// Checks that the mesh holds `num_shards` devices, every operand refers backwards, shapes
// agree, every tensor's split names distinct axes of the mesh, and every static split
// dimension divides evenly over its axis, and grouped ops have one group per device.
// `slice_known` false (a function being built, checked over a mesh of ones before it is
// registered on a slice) skips that last check, which needs the slice's real extents.
Status Validate(const FunctionDef& fn, int num_shards, bool slice_known = true);

// The shape of one shard of `type` over `mesh` (a dynamic dimension stays dynamic).
Shape ShardShape(const TensorType& type, const Shape& mesh);
// Where shard `shard`'s block starts in the global tensor (static dimensions only).
Shape ShardOrigin(const TensorType& type, const Shape& mesh, int shard);
// True when shard `shard` holds the first replica of its block: its coordinate is 0 on
// every mesh axis that no dimension is cut along.
bool IsFirstReplica(const TensorType& type, const Shape& mesh, int shard);

}  // namespace atl::ir

MSGPACK_ADD_ENUM(atl::ir::OpCode);
