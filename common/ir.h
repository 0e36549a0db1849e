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

// A tensor's global type and how it is laid over a slice's 1-D device list:
// split_dim < 0 means every device holds the whole tensor (replicated); otherwise
// dimension split_dim is cut into contiguous blocks, block i on device i: equal blocks for
// a static dimension, blocks of data-dependent sizes for a dynamic one (kDynamicDim).
struct TensorType {
  DType dtype = DType::kF32;
  Shape shape;
  int32_t split_dim = -1;

  bool operator==(const TensorType&) const = default;
  MSGPACK_DEFINE(dtype, shape, split_dim);
};

// kAllReduceSum is a collective: every shard of the gang contributes its local tensor
// (which must be replicated-typed: a full-size partial value) and gets the elementwise sum.
// kFilter keeps the elements of a 1-D tensor greater than `attr`, in order: its result's
// length depends on the data (a dynamic dimension).
enum class OpCode : uint8_t { kAdd, kSub, kMul, kDiv, kMatmul, kSpin, kAllReduceSum, kFilter };
std::string_view OpName(OpCode code);

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
  double attr = 0.0;  // kSpin: microseconds the device stays busy; kFilter: threshold
  TensorType type;    // the result's global type, inferred by the builder

  bool operator==(const Op&) const = default;
  MSGPACK_DEFINE(code, operands, attr, type);
};

struct FunctionDef {
  std::string name;
  std::vector<TensorType> inputs;
  std::vector<Operand> outputs;  // each an input or an op result
  std::vector<Op> ops;

  bool operator==(const FunctionDef&) const = default;
  MSGPACK_DEFINE(name, inputs, outputs, ops);
};

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

// Checks that every operand refers backwards, shapes agree, and every static split
// dimension divides evenly over `num_shards` devices.
Status Validate(const FunctionDef& fn, int num_shards);

// The shape of one shard of `type` over `num_shards` devices (a dynamic dimension stays
// dynamic).
Shape ShardShape(const TensorType& type, int num_shards);

}  // namespace atl::ir

MSGPACK_ADD_ENUM(atl::ir::OpCode);
