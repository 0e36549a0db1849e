// The symbolic values that Python functions are traced over: a Value of a function being
// built, a Traced value of a program being traced. Each keeps its builder alive, so that
// the values of one trace can be combined and those of two traces told apart.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "atoll/function.h"
#include "atoll/program.h"
#include "python/src/errors.h"

namespace atl::python {

struct SymbolicValue;

// A function being traced. A body of a loop or a branch (atoll.lax.while_loop, scan, cond)
// has the function it runs in as its parent: a value of the parent (or of its ancestors) that
// the body uses becomes an input of the body, appended after its own, and `captured` lists
// those values of the parent in that order (the body's consts).
struct FunctionTrace {
  explicit FunctionTrace(std::string function_name,
                         std::shared_ptr<FunctionTrace> parent_trace = nullptr)
      : name(function_name), builder(std::move(function_name)), parent(std::move(parent_trace)) {}
  std::string name;
  FunctionBuilder builder;
  std::shared_ptr<FunctionTrace> parent;
  std::vector<SymbolicValue> captured;
  std::vector<std::pair<Value, Value>> lifted;  // a value of the parent, its input here
};

struct SymbolicValue {
  std::shared_ptr<FunctionTrace> trace;
  Value value;
};

// The builder that `a` and `b` share; InvalidArgument (raised) when they come from two
// functions.
FunctionTrace& TraceOf(const SymbolicValue& a, const SymbolicValue& b);

// `values` as values of one function: the deepest of theirs, into which the values of its
// ancestors are lifted (as the consts of a body). InvalidArgument (raised) when they come from
// two functions neither of which runs inside the other.
std::vector<SymbolicValue> Unify(const std::vector<SymbolicValue>& values);

// Runs `op` on the builder of `trace` and wraps what it returns; raises the builder's error
// (InvalidArgument naming the function and the op) when the op was refused, so that the
// exception points at the line of the Python function that made it.
template <typename Op>
SymbolicValue Apply(const std::shared_ptr<FunctionTrace>& trace, Op&& op) {
  Value v = op(trace->builder);
  ThrowIfError(trace->builder.status());
  return {trace, v};
}

// a op b for the arithmetic ops (FunctionBuilder::Add, Sub, Mul, Div), with a value or a
// number as b: what both the operators and atoll.ops.add & co. record.
using ArithmeticOp = Value (FunctionBuilder::*)(Value, Value);
using ArithmeticScalarOp = Value (FunctionBuilder::*)(Value, double);
inline SymbolicValue Arithmetic(const SymbolicValue& a, const SymbolicValue& b, ArithmeticOp op) {
  const std::vector<SymbolicValue> ab = Unify({a, b});
  return Apply(ab[0].trace, [&](FunctionBuilder& f) { return (f.*op)(ab[0].value, ab[1].value); });
}
inline SymbolicValue Arithmetic(const SymbolicValue& a, double b, ArithmeticScalarOp op) {
  return Apply(a.trace, [&](FunctionBuilder& f) { return (f.*op)(a.value, b); });
}

struct ProgramTrace {
  ProgramBuilder builder;
};

struct TracedValue {
  std::shared_ptr<ProgramTrace> trace;
  Traced value;
};

}  // namespace atl::python
