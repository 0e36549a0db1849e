// The symbolic values that Python functions are traced over: a Value of a function being
// built, a Traced value of a program being traced. Each keeps its builder alive, so that
// the values of one trace can be combined and those of two traces told apart.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "atoll/function.h"
#include "atoll/program.h"
#include "python/src/errors.h"

namespace atl::python {

struct FunctionTrace {
  explicit FunctionTrace(std::string function_name)
      : name(function_name), builder(std::move(function_name)) {}
  std::string name;
  FunctionBuilder builder;
};

struct SymbolicValue {
  std::shared_ptr<FunctionTrace> trace;
  Value value;
};

// The builder that `a` and `b` share; InvalidArgument (raised) when they come from two
// functions.
FunctionTrace& TraceOf(const SymbolicValue& a, const SymbolicValue& b);

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
  TraceOf(a, b);
  return Apply(a.trace, [&](FunctionBuilder& f) { return (f.*op)(a.value, b.value); });
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
