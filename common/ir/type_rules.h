// The type rules of the op table (common/ir/ops.def's TypeRule column): each gives the result
// type of an op from its operands' types in `fn` (shape, dtype, and the shardings under which
// each shard's local result is its block of the global one), or InvalidArgument saying what
// the op accepts. ir::InferType looks the rule up by op code after checking the row's operand
// count, so a rule may index op.operands up to that count. Internal to common/ir; pure and
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "atoll/status.h"
#include "common/ir/ir.h"

namespace atl::ir::internal {

// The signature of a TypeRule.
using TypeRule = Result<TensorType> (*)(const FunctionDef& fn, const Op& op);

// The TypeRule of every row of the op table, declared from the table itself (a rule that
// several rows share is declared once per row, which C++ allows), so a new row's rule needs
// no declaration here. They are defined in type_rules*.cc and in the primitive families of
// ops/ (ops/op_parts.h).
#define ATOLL_OP(Name, name, operands, TypeRule, CpuKernel, GradRule) \
  Result<TensorType> TypeRule(const FunctionDef& fn, const Op& op);
#include "common/ir/ops.def"

// broadcast_in_dim's attr read as the mesh axis each result dimension is cut along where the
// operand does not give it (-1: not cut): digit d (4 bits, least significant first) holds
// 1 + that axis, 0 for none. InvalidArgument for a value that is not such digits.
Result<std::vector<int32_t>> BroadcastCuts(double attr, size_t rank);
// Every result type of a structured op (ir::ResultTypes; type_rules_control.cc).
Result<std::vector<TensorType>> StructuredResults(const FunctionDef& fn, const Op& op);

// Gather's and scatter's dimension numbers, read from params as ops.def lays them out: the
// first `lists` counted lists, then the rest (gather's slice_sizes).
struct IndexedDims {
  std::vector<std::vector<int64_t>> lists;
  std::vector<int64_t> rest;
};
Result<IndexedDims> ReadIndexedDims(const Op& op, size_t lists);

// Checks the rules share (type_rules.cc). Each returns InvalidArgument naming the op.

// Which dimensions of an op's tensor operands may be dynamic (kDynamicDim).
enum class Dims {
  kStatic,       // none
  kDynamicRows,  // dimension 0: rows routed to a device, computed on row by row
  kAny,          // any
};

// The op's first `n` operands as tensors (each shaped as `dims` allows), the rest of its
// operands scalar constants.
Result<std::vector<const TensorType*>> Tensors(const FunctionDef& fn, const Op& op, size_t n,
                                               Dims dims = Dims::kStatic);

// A set of dtypes an op takes: bit (1 << code) per dtype.
using DTypeSet = uint32_t;
constexpr DTypeSet SetOf(DType dtype) { return DTypeSet{1} << static_cast<unsigned>(dtype); }
// Every floating dtype: f32 and f64, and the storage dtypes bf16 and f16 (which the backend
// computes on in f32, rounding each result once).
inline constexpr DTypeSet kFloats =
    SetOf(DType::kF32) | SetOf(DType::kF64) | SetOf(DType::kBF16) | SetOf(DType::kF16);
// f32 and f64: ops whose storage-dtype form would lose what they compute (optimizer steps,
// layer norm, the routed-expert and gating ops).
inline constexpr DTypeSet kWideFloats = SetOf(DType::kF32) | SetOf(DType::kF64);
inline constexpr DTypeSet kIntegers = SetOf(DType::kI32) | SetOf(DType::kI64);
// Every integer dtype, signed and unsigned; bool; the numbers (integers and floats); all.
inline constexpr DTypeSet kAllIntegers =
    kIntegers | SetOf(DType::kI8) | SetOf(DType::kU8) | SetOf(DType::kU32);
inline constexpr DTypeSet kBoolSet = SetOf(DType::kBool);
inline constexpr DTypeSet kNumeric = kAllIntegers | kFloats;
inline constexpr DTypeSet kEveryDType = kNumeric | kBoolSet;
// A dtype's code as an attr (convert_element_type, iota, argmax, dot_general's preferred
// type): the dtype, or InvalidArgument naming the op and the attr.
Result<DType> DTypeAttr(const Op& op, double attr, std::string_view what);

// "f32, f64, bf16 or f16": the set's names, in the table's order, for messages.
std::string DTypeSetName(DTypeSet set);
// `t`'s dtype is in `accepted`; else InvalidArgument: "<op> takes f32 or f64 <what>, got
// bf16[2,3] split [0,-1]" (`what` may be empty, or say which operand).
Status NeedDType(const Op& op, const TensorType& t, DTypeSet accepted, std::string_view what = "");
// An attr that counts or indexes (a group count, a row count, k, an axis) as an integer: nullopt
// unless it is a whole number that int64 holds, since casting any other double is undefined.
std::optional<int64_t> WholeAttr(double attr);
// A type's size in bytes must fit in int64 (a dynamic dimension counts as 1 here: its data
// is checked when it exists), so that no shard's size computed from it wraps around.
Status CheckCountable(const TensorType& t);
// The last dimension is where softmax, layer norm, cross-entropy and top-k compute row
// statistics: a row must be whole on every device.
Status NeedWholeRows(const Op& op, const TensorType& t);
Status NeedSameType(const Op& op, const TensorType& a, const TensorType& b);
// A numeric x and params {axis}, an axis of x that is not cut (argmax, the cumulative
// reductions: each looks along the whole axis): the axis (type_rules_lax.cc).
Result<size_t> NumericAlongWholeAxis(const Op& op, const TensorType& x);
// The type `t` less the dimensions `dims` (distinct, in range), of `dtype`: reductions'
// results. A cut reduced dimension leaves a partial value, not cut along that axis.
TensorType Without(const TensorType& t, const std::vector<int64_t>& dims, DType dtype);

}  // namespace atl::ir::internal
