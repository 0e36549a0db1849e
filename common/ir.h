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
// dimension split_dim is cut into equal contiguous blocks, block i on device i.
struct TensorType {
  DType dtype = DType::kF32;
  Shape shape;
  int32_t split_dim = -1;

  bool operator==(const TensorType&) const = default;
  MSGPACK_DEFINE(dtype, shape, split_dim);
};

// kAllReduceSum is a collective: every shard of the gang contributes its local tensor
// (which must be replicated-typed: a full-size partial value) and gets the elementwise sum.
enum class OpCode : uint8_t { kAdd, kSub, kMul, kDiv, kMatmul, kSpin, kAllReduceSum };
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
  double attr = 0.0;  // kSpin: microseconds the device stays busy
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

// The type of an operand inside `fn` (a scalar has no tensor type: returns nullptr).
const TensorType* OperandType(const FunctionDef& fn, const Operand& operand);
std::vector<TensorType> OutputTypes(const FunctionDef& fn);

// Checks that every operand refers backwards, shapes agree, and every split dimension
// divides evenly over `num_shards` devices.
Status Validate(const FunctionDef& fn, int num_shards);

// The shape of one shard of `type` over `num_shards` devices.
Shape ShardShape(const TensorType& type, int num_shards);

}  // namespace atl::ir

MSGPACK_ADD_ENUM(atl::ir::OpCode);
