// What the gradient rules (grad_rules.cc) build with: the function being differentiated,
// which the backward ops are appended to, and what is known of each value's sharding.
//
// A cotangent is an ir::Operand: a value of the function, or a constant (an Operand of kind
// kScalar) standing for a tensor of the differentiated value's type holding that number
// everywhere (the seed 1 of a scalar loss, and what adds, transposes and sums make of it),
// so that no op is emitted until a rule needs the tensor (Materialize).
//
// A value may be PARTIAL over some mesh axes: each device holds its share, and the value is
// the sum of the shares over the devices (docs/design-notes.md, "Model ops"). Ops that sum
// over a dimension cut over devices make one (x^T dy over split rows); Complete turns one into
// the whole value with an all_reduce_sum along each axis it is partial over. Forward values are
// taken as whole: the cotangent of a forward partial (a loss share) is the cotangent of its sum,
// which every device holds.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "atoll/status.h"
#include "common/ir/ir.h"

namespace atl::autodiff {

// The forward op a rule differentiates, as the engine (grad.cc) hands it over.
struct OpGrad {
  ir::Op op;           // a copy: emitting ops grows the function
  ir::Operand result;  // the op's result
  ir::Operand dy;      // the cotangent of its result (whole unless no operand is cut)
  // Per operand: whether a differentiated input reaches it (a float tensor, then). A rule
  // may leave the others without a cotangent.
  std::vector<bool> needed;
};

// Per operand of the op: its cotangent, or none (not needed, a scalar, an integer, or zero).
using OperandGrads = std::vector<std::optional<ir::Operand>>;

class Backward;
using GradRule = Result<OperandGrads> (*)(Backward& b, const OpGrad& g);

// The constant cotangent `value` (an Operand of kind kScalar).
inline ir::Operand Constant(double value) { return {ir::Operand::kScalar, 0, value}; }
inline bool IsConstant(const ir::Operand& v) { return v.kind == ir::Operand::kScalar; }

class Backward {
 public:
  // Appends to `def`.
  explicit Backward(ir::FunctionDef& def);

  const ir::FunctionDef& def() const { return def_; }
  // The type of a value (not a constant): a copy, since emitting grows the function.
  ir::TensorType TypeOf(const ir::Operand& v) const;
  // The mesh axes (a bit each) over which `v` is partial; 0 for whole values and constants.
  uint32_t PartialAxes(const ir::Operand& v) const;

  // Appends an op, typed by ir::InferType, and returns its result: partial over the axes its
  // operands are partial over and, for an op that computes on each device's block, those an
  // operand is cut along but the result is not. A collective moves values between devices
  // instead: all_reduce_sum and reduce_scatter complete their axis, the others keep their
  // operand's partial axes.
  Result<ir::Operand> Emit(ir::OpCode code, std::vector<ir::Operand> operands, double attr = 0.0,
                           std::vector<int64_t> params = {});
  // Marks `v`, a value this Backward emitted, partial over `axes` too: a rule that gives each
  // device a share of the cotangent (broadcast's, to its root) says so.
  void AddPartial(const ir::Operand& v, uint32_t axes);
  // `dy` as a value of `like`'s type: a constant becomes fill_like(like).
  Result<ir::Operand> Materialize(const ir::Operand& dy, const ir::Operand& like);
  // `v` whole along the mesh axes `axes` (a bit each; all by default): all_reduce_sum of v
  // along each of them that it is partial over.
  Result<ir::Operand> Complete(const ir::Operand& v, uint32_t axes = ~0u);
  // a + b, two cotangents of one value: constants fold; a partial value beside a whole one
  // (or one partial over other axes) is completed first.
  Result<ir::Operand> Sum(const ir::Operand& a, const ir::Operand& b);
  // v * s for a number s: a constant stays one, and s == 1 is v itself.
  Result<ir::Operand> Scale(const ir::Operand& v, double s);

  // A structured op (while, scan, cond) has several results, the others than its first read
  // by tuple_element ops: tuple_element's rule hands the cotangent of result k of the op
  // whose value is `structured` over here (summed with any other), and the structured op's
  // rule takes them (the engine hands it its first result's as OpGrad::dy).
  Status AddResultCotangent(const ir::Operand& structured, int64_t k, const ir::Operand& c);
  std::optional<ir::Operand> ResultCotangent(const ir::Operand& structured, int64_t k) const;
  bool HasResultCotangents(const ir::Operand& structured) const;

  // Appends a body (a loop's or a branch's) to the function: its index.
  int64_t AddBody(ir::FunctionDef body);
  // Points body param `at` of the forward structured op whose value is `structured` at body
  // `index`, which must give the op the same first result (a body that gives more results:
  // the values a gradient rule saves from the forward loop).
  Status SetBody(const ir::Operand& structured, size_t at, int64_t index);

 private:
  ir::FunctionDef& def_;
  std::vector<uint32_t> partial_;  // per op of def_: PartialAxes of its result
  // Per structured op (by index), the cotangents of its results handed over so far.
  std::map<int32_t, std::map<int64_t, ir::Operand>> results_;
};

}  // namespace atl::autodiff
