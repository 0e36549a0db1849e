// The type rules of structured control flow: while, scan and cond run functions of
// fn.bodies, and tuple_element reads their results beyond the first. A body's inputs are the
// values the op hands it, then the values it closes over (its consts), each of exactly the
// operand's type; its outputs are what the op makes of them. Bodies run per shard, so a
// carried value keeps its sharding through every trip.
#include <fmt/format.h>

#include "common/ir/type_rules.h"

namespace atl::ir::internal {

namespace {

std::string Types(const std::vector<TensorType>& types) {
  std::string out;
  for (const TensorType& t : types) out += (out.empty() ? "" : ", ") + Describe(t);
  return "(" + out + ")";
}

// Body `params[at]` of `op`, or InvalidArgument naming the op and the index.
Result<const FunctionDef*> Body(const FunctionDef& fn, const Op& op, size_t at) {
  const int64_t index = op.params[at];
  if (index < 0 || static_cast<size_t>(index) >= fn.bodies.size()) {
    return InvalidArgument(fmt::format("{}: body {} does not exist (the function has {})",
                                       OpName(op.code), index, fn.bodies.size()));
  }
  return &fn.bodies[static_cast<size_t>(index)];
}

// The body takes exactly `want`, and gives outputs of no dynamic shape.
Status NeedInputs(const Op& op, const FunctionDef& body, std::string_view role,
                  const std::vector<TensorType>& want) {
  if (body.inputs != want) {
    return InvalidArgument(fmt::format("{}: its {} '{}' must take {}, it takes {}", OpName(op.code),
                                       role, body.name, Types(want), Types(body.inputs)));
  }
  for (const TensorType& t : OutputTypes(body)) {
    if (!IsStatic(t)) {
      return InvalidArgument(fmt::format("{}: its {} '{}' gives {}, of a data-dependent shape",
                                         OpName(op.code), role, body.name, Describe(t)));
    }
  }
  return Status::Ok();
}

Result<size_t> Count(const Op& op, size_t at, std::string_view what) {
  if (op.params[at] < 0) {
    return InvalidArgument(
        fmt::format("{}: {} must be >= 0, got {}", OpName(op.code), what, op.params[at]));
  }
  return static_cast<size_t>(op.params[at]);
}

std::vector<TensorType> Slice(const std::vector<TensorType>& all, size_t from, size_t count) {
  return {all.begin() + static_cast<ptrdiff_t>(from),
          all.begin() + static_cast<ptrdiff_t>(from + count)};
}

// while(carry..., cond consts..., body consts...): params = cond, body, #cond consts, #body
// consts.
Result<std::vector<TensorType>> WhileResults(const FunctionDef& fn, const Op& op,
                                             const std::vector<TensorType>& in) {
  if (op.params.size() != 4) {
    return InvalidArgument(fmt::format(
        "while: params must be cond, body, #cond consts, #body consts (4 values), got {}",
        op.params.size()));
  }
  ATOLL_ASSIGN_OR_RETURN(const FunctionDef* cond, Body(fn, op, 0));
  ATOLL_ASSIGN_OR_RETURN(const FunctionDef* body, Body(fn, op, 1));
  ATOLL_ASSIGN_OR_RETURN(const size_t cond_consts, Count(op, 2, "#cond consts"));
  ATOLL_ASSIGN_OR_RETURN(const size_t body_consts, Count(op, 3, "#body consts"));
  if (cond_consts + body_consts >= in.size()) {
    return InvalidArgument(
        fmt::format("while: {} operands leave no carried value after {} cond and {} body consts",
                    in.size(), cond_consts, body_consts));
  }
  const size_t carried = in.size() - cond_consts - body_consts;
  const std::vector<TensorType> carry = Slice(in, 0, carried);
  std::vector<TensorType> cond_in = carry, body_in = carry;
  for (const TensorType& t : Slice(in, carried, cond_consts)) cond_in.push_back(t);
  for (const TensorType& t : Slice(in, carried + cond_consts, body_consts)) body_in.push_back(t);
  ATOLL_RETURN_IF_ERROR(NeedInputs(op, *cond, "cond", cond_in));
  ATOLL_RETURN_IF_ERROR(NeedInputs(op, *body, "body", body_in));
  const TensorType predicate{DType::kBool, {}, {}};
  if (OutputTypes(*cond) != std::vector<TensorType>{predicate}) {
    return InvalidArgument(fmt::format("while: its cond '{}' must give one bool[], it gives {}",
                                       cond->name, Types(OutputTypes(*cond))));
  }
  if (OutputTypes(*body) != carry) {
    return InvalidArgument(fmt::format(
        "while: its body '{}' must give the carried values' types {}, it gives {}: a loop's "
        "carry may not change type, shape or sharding",
        body->name, Types(carry), Types(OutputTypes(*body))));
  }
  return carry;
}

// scan(init..., xs..., consts...): params = body, #carry, #consts, length, reverse.
Result<std::vector<TensorType>> ScanResults(const FunctionDef& fn, const Op& op,
                                            const std::vector<TensorType>& in) {
  if (op.params.size() != 5) {
    return InvalidArgument(fmt::format(
        "scan: params must be body, #carry, #consts, length, reverse (5 values), got {}",
        op.params.size()));
  }
  ATOLL_ASSIGN_OR_RETURN(const FunctionDef* body, Body(fn, op, 0));
  ATOLL_ASSIGN_OR_RETURN(const size_t carried, Count(op, 1, "#carry"));
  ATOLL_ASSIGN_OR_RETURN(const size_t consts, Count(op, 2, "#consts"));
  const int64_t length = op.params[3];
  if (length < 0 || (op.params[4] != 0 && op.params[4] != 1)) {
    return InvalidArgument(fmt::format("scan: length must be >= 0 and reverse 0 or 1, got {}, {}",
                                       length, op.params[4]));
  }
  if (carried + consts > in.size()) {
    return InvalidArgument(fmt::format("scan: {} operands are fewer than {} carried and {} consts",
                                       in.size(), carried, consts));
  }
  const size_t scanned = in.size() - carried - consts;
  std::vector<TensorType> body_in = Slice(in, 0, carried);
  for (size_t i = carried; i < carried + scanned; ++i) {
    const TensorType& xs = in[i];
    if (xs.shape.empty() || xs.shape[0] != length) {
      return InvalidArgument(fmt::format("scan: xs {} must have {} rows along dimension 0, got {}",
                                         i - carried, length, Describe(xs)));
    }
    if (xs.split[0] >= 0) {
      return InvalidArgument(fmt::format(
          "scan: xs {} is cut along mesh axis {} on its scanned dimension 0, which every shard "
          "walks whole; got {}",
          i - carried, xs.split[0], Describe(xs)));
    }
    body_in.push_back({xs.dtype, Shape(xs.shape.begin() + 1, xs.shape.end()),
                       std::vector<int32_t>(xs.split.begin() + 1, xs.split.end())});
  }
  for (const TensorType& t : Slice(in, carried + scanned, consts)) body_in.push_back(t);
  ATOLL_RETURN_IF_ERROR(NeedInputs(op, *body, "body", body_in));
  const std::vector<TensorType> out = OutputTypes(*body);
  const std::vector<TensorType> carry = Slice(in, 0, carried);
  if (out.size() < carried || Slice(out, 0, carried) != carry) {
    return InvalidArgument(fmt::format(
        "scan: its body '{}' must give the carried values' types {} first, it gives {}: a "
        "loop's carry may not change type, shape or sharding",
        body->name, Types(carry), Types(out)));
  }
  std::vector<TensorType> results = carry;
  for (size_t i = carried; i < out.size(); ++i) {
    TensorType ys = out[i];
    ys.shape.insert(ys.shape.begin(), length);
    ys.split.insert(ys.split.begin(), -1);
    results.push_back(std::move(ys));
  }
  return results;
}

// cond(index, args..., consts of branch 0..., consts of branch 1..., ...): params = the
// branches, then each one's #consts.
Result<std::vector<TensorType>> CondResults(const FunctionDef& fn, const Op& op,
                                            const std::vector<TensorType>& in) {
  const size_t branches = op.params.size() / 2;
  if (branches == 0 || op.params.size() % 2 != 0) {
    return InvalidArgument(fmt::format(
        "cond: params must be the branches, then each one's #consts (2 per branch), got {}",
        op.params.size()));
  }
  const TensorType& index = in[0];
  if ((index.dtype != DType::kI32 && index.dtype != DType::kBool) || !index.shape.empty()) {
    return InvalidArgument(
        fmt::format("cond: the index must be an i32[] or bool[], got {}", Describe(index)));
  }
  size_t consts = 0;
  for (size_t b = 0; b < branches; ++b) {
    ATOLL_ASSIGN_OR_RETURN(const size_t n, Count(op, branches + b, "#consts"));
    consts += n;
  }
  if (1 + consts > in.size()) {
    return InvalidArgument(
        fmt::format("cond: {} operands are fewer than the index and {} consts", in.size(), consts));
  }
  const size_t args = in.size() - 1 - consts;
  std::vector<TensorType> results;
  size_t next = 1 + args;
  for (size_t b = 0; b < branches; ++b) {
    ATOLL_ASSIGN_OR_RETURN(const FunctionDef* branch, Body(fn, op, b));
    const auto n = static_cast<size_t>(op.params[branches + b]);
    std::vector<TensorType> branch_in = Slice(in, 1, args);
    for (const TensorType& t : Slice(in, next, n)) branch_in.push_back(t);
    next += n;
    ATOLL_RETURN_IF_ERROR(NeedInputs(op, *branch, fmt::format("branch {}", b), branch_in));
    const std::vector<TensorType> out = OutputTypes(*branch);
    if (b == 0) {
      results = out;
    } else if (out != results) {
      return InvalidArgument(fmt::format("cond: branch {} gives {}, branch 0 gives {}", b,
                                         Types(out), Types(results)));
    }
  }
  return results;
}

}  // namespace

Result<std::vector<TensorType>> StructuredResults(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(auto operands, Tensors(fn, op, op.operands.size()));
  std::vector<TensorType> in;
  for (const TensorType* t : operands) in.push_back(*t);
  Result<std::vector<TensorType>> results = InvalidArgument("not a structured op");
  switch (op.code) {
    case OpCode::kWhile:
      results = WhileResults(fn, op, in);
      break;
    case OpCode::kScan:
      results = ScanResults(fn, op, in);
      break;
    case OpCode::kCond:
      results = CondResults(fn, op, in);
      break;
    default:
      return InvalidArgument(fmt::format("{} is not a structured op", OpName(op.code)));
  }
  if (results.ok() && results->empty()) {
    return InvalidArgument(fmt::format("{} has no results", OpName(op.code)));
  }
  return results;
}

Result<TensorType> InferStructured(const FunctionDef& fn, const Op& op) {
  ATOLL_ASSIGN_OR_RETURN(std::vector<TensorType> results, StructuredResults(fn, op));
  return results[0];
}

Result<TensorType> InferTupleElement(const FunctionDef& fn, const Op& op) {
  const Operand& of = op.operands[0];
  if (of.kind != Operand::kOp || of.index < 0 || static_cast<size_t>(of.index) >= fn.ops.size() ||
      !IsStructured(fn.ops[static_cast<size_t>(of.index)].code)) {
    return InvalidArgument(
        "tuple_element: its operand must be the result of a while, scan or cond");
  }
  if (op.params.size() != 1) {
    return InvalidArgument(fmt::format(
        "tuple_element: params must be the result's index, got {} values", op.params.size()));
  }
  ATOLL_ASSIGN_OR_RETURN(std::vector<TensorType> results,
                         StructuredResults(fn, fn.ops[static_cast<size_t>(of.index)]));
  const int64_t k = op.params[0];
  if (k < 0 || static_cast<size_t>(k) >= results.size()) {
    return InvalidArgument(fmt::format("tuple_element: result {} of a {} that has {}", k,
                                       OpName(fn.ops[static_cast<size_t>(of.index)].code),
                                       results.size()));
  }
  return results[static_cast<size_t>(k)];
}

}  // namespace atl::ir::internal
