// Grad and ValueAndGrad (include/atoll/grad.h): the engine. It copies the forward function,
// finds the ops between the differentiated inputs and outputs, sweeps them in reverse
// calling each op's rule (grad_rules.cc) on the cotangent of its result, sums the cotangents
// of values used more than once, completes partial gradients, and drops what the outputs do
// not need.
#include <set>
#include <string>

#include <fmt/format.h>

#include "atoll/grad.h"
#include "client/autodiff/backward.h"
#include "client/autodiff/grad_rules.h"
#include "client/autodiff/vjp.h"
#include "client/internal.h"

namespace atl {

namespace {

using autodiff::Backward;
using autodiff::Constant;
using autodiff::IsConstant;

// Inputs first, then ops: one slot per value of the forward function.
struct Values {
  size_t inputs;
  size_t Of(const ir::Operand& o) const {
    return o.kind == ir::Operand::kInput ? static_cast<size_t>(o.index) : inputs + o.index;
  }
};

bool IsFloatTensor(const ir::FunctionDef& def, const ir::Operand& o) {
  const ir::TensorType* t = ir::OperandType(def, o);
  return t != nullptr && IsFloating(t->dtype);
}

Status CheckRequest(const ir::FunctionDef& f, const std::vector<int>& wrt,
                    const GradOptions& options) {
  if (wrt.empty()) return InvalidArgument("needs at least one input to differentiate by (wrt)");
  std::set<int> seen;
  for (int i : wrt) {
    if (i < 0 || static_cast<size_t>(i) >= f.inputs.size() || !seen.insert(i).second) {
      return InvalidArgument(fmt::format("wrt names input {}: expected distinct inputs in [0, {})",
                                         i, f.inputs.size()));
    }
    if (!IsFloating(f.inputs[i].dtype)) {
      return InvalidArgument(
          fmt::format("input {} is {}: only float inputs (f32, f64, bf16, f16) have gradients", i,
                      ir::Describe(f.inputs[i])));
    }
  }
  if (options.outputs.empty() || (!options.cotangents && options.outputs.size() != 1)) {
    return InvalidArgument(fmt::format(
        "differentiates {} outputs: without cotangents it takes the gradient of one scalar "
        "output (GradOptions::cotangents takes any number)",
        options.outputs.size()));
  }
  seen.clear();
  for (int k : options.outputs) {
    if (k < 0 || static_cast<size_t>(k) >= f.outputs.size() || !seen.insert(k).second) {
      return InvalidArgument(
          fmt::format("outputs names output {}: expected distinct outputs "
                      "in [0, {})",
                      k, f.outputs.size()));
    }
    const ir::TensorType* t = ir::OperandType(f, f.outputs[k]);
    if (t == nullptr || !IsFloating(t->dtype)) {
      return InvalidArgument(fmt::format(
          "output {} is {}: only float outputs (f32, f64, bf16, f16) are differentiated", k,
          t != nullptr ? ir::Describe(*t) : "not a value"));
    }
    if (!options.cotangents && !t->shape.empty()) {
      return InvalidArgument(fmt::format(
          "output {} is {}: the gradient needs a float [] output (a loss); for another, pass "
          "its cotangent (GradOptions::cotangents)",
          k, ir::Describe(*t)));
    }
  }
  return Status::Ok();
}

// Drops the ops that no output reaches, renumbering the rest.
void DropUnused(ir::FunctionDef& def) {
  std::vector<bool> used(def.ops.size());
  for (const ir::Operand& o : def.outputs) {
    if (o.kind == ir::Operand::kOp) used[o.index] = true;
  }
  for (size_t j = def.ops.size(); j-- > 0;) {
    if (!used[j]) continue;
    for (const ir::Operand& o : def.ops[j].operands) {
      if (o.kind == ir::Operand::kOp) used[o.index] = true;
    }
  }
  std::vector<int32_t> index(def.ops.size(), -1);
  std::vector<ir::Op> kept;
  for (size_t j = 0; j < def.ops.size(); ++j) {
    if (!used[j]) continue;
    index[j] = static_cast<int32_t>(kept.size());
    kept.push_back(std::move(def.ops[j]));
  }
  auto renumber = [&](ir::Operand& o) {
    if (o.kind == ir::Operand::kOp) o.index = index[o.index];
  };
  for (ir::Op& op : kept) {
    for (ir::Operand& o : op.operands) renumber(o);
  }
  for (ir::Operand& o : def.outputs) renumber(o);
  def.ops = std::move(kept);
}

// The gradient function of `f` (see atoll/grad.h); `keep_outputs` puts f's outputs first.
// With `partial`, the gradients are left partial (see vjp.h) and their axes put there.
Result<ir::FunctionDef> Differentiate(const ir::FunctionDef& f, const std::vector<int>& wrt,
                                      const GradOptions& options, bool keep_outputs,
                                      std::vector<uint32_t>* partial = nullptr) {
  ATOLL_RETURN_IF_ERROR(CheckRequest(f, wrt, options));
  ir::FunctionDef def = f;
  def.name = f.name + (keep_outputs ? "_value_and_grad" : "_grad");
  const Values values{f.inputs.size()};
  const size_t num_values = f.inputs.size() + f.ops.size();

  // Which values a differentiated input reaches (through float values: integers carry no
  // gradient), and which reach a differentiated output.
  // A structured op (while, scan, cond) stands for all its results, whose first may be an
  // integer (a loop counter): the tuple_element ops that read its float results depend on
  // it, and through them it is needed.
  std::vector<bool> depends(num_values), needed(num_values);
  for (int i : wrt) depends[i] = true;
  for (size_t j = 0; j < f.ops.size(); ++j) {
    if (!IsFloating(f.ops[j].type.dtype) && !ir::IsStructured(f.ops[j].code)) continue;
    for (const ir::Operand& o : f.ops[j].operands) {
      if (o.kind != ir::Operand::kScalar && depends[values.Of(o)])
        depends[f.inputs.size() + j] = true;
    }
  }
  for (int k : options.outputs) needed[values.Of(f.outputs[k])] = true;
  for (size_t j = f.ops.size(); j-- > 0;) {
    const size_t v = f.inputs.size() + j;
    if (!needed[v] || !depends[v]) continue;
    for (const ir::Operand& o : f.ops[j].operands) {
      if (o.kind != ir::Operand::kScalar &&
          (IsFloatTensor(f, o) || f.ops[j].code == ir::OpCode::kTupleElement)) {
        needed[values.Of(o)] = true;
      }
    }
  }

  Backward b(def);
  std::vector<std::optional<ir::Operand>> cotangent(num_values);
  auto accumulate = [&](size_t v, const ir::Operand& c) -> Status {
    if (!cotangent[v]) {
      cotangent[v] = c;
      return Status::Ok();
    }
    ATOLL_ASSIGN_OR_RETURN(cotangent[v], b.Sum(*cotangent[v], c));
    return Status::Ok();
  };
  for (int k : options.outputs) {
    ir::Operand seed = Constant(1.0);
    if (options.cotangents) {
      def.inputs.push_back(*ir::OperandType(f, f.outputs[k]));
      seed = {ir::Operand::kInput, static_cast<int32_t>(def.inputs.size()) - 1, 0.0};
    }
    ATOLL_RETURN_IF_ERROR(accumulate(values.Of(f.outputs[k]), seed));
  }

  for (size_t j = f.ops.size(); j-- > 0;) {
    const size_t v = f.inputs.size() + j;
    const ir::Operand result{ir::Operand::kOp, static_cast<int32_t>(j), 0.0};
    // A structured op's other results hand their cotangents to b (tuple_element's rule).
    const bool reached =
        cotangent[v] || (ir::IsStructured(f.ops[j].code) && b.HasResultCotangents(result));
    if (!needed[v] || !depends[v] || !reached) continue;
    autodiff::OpGrad g{f.ops[j], result, cotangent[v].value_or(Constant(0)), {}};
    auto context = [&] { return fmt::format("op {} ({})", j, ir::OpName(g.op.code)); };
    const autodiff::GradRow& row = autodiff::GradRowOf(g.op.code);
    if (row.rule == nullptr) {
      return InvalidArgument(
          fmt::format("{} is not differentiable ({}), and a differentiated output depends on a "
                      "differentiated input through it",
                      context(), row.not_differentiable));
    }
    bool cut_operand = false;
    for (const ir::Operand& o : g.op.operands) {
      const ir::TensorType* t = ir::OperandType(f, o);
      cut_operand = cut_operand || (t != nullptr && !ir::IsReplicated(*t));
      g.needed.push_back(o.kind != ir::Operand::kScalar && IsFloatTensor(f, o) &&
                         depends[values.Of(o)]);
    }
    // A partial cotangent reaching an op that cuts an operand: each device needs its block of
    // the whole cotangent. (A collective's rule sees to its own: it moves values between
    // devices, and which partial it can take is its own.)
    if (cut_operand && !ir::IsCollective(g.op.code)) {
      Result<ir::Operand> whole = b.Complete(g.dy);
      if (!whole.ok()) return whole.status().WithContext(context());
      g.dy = *whole;
    }
    Result<autodiff::OperandGrads> grads = row.rule(b, g);
    if (!grads.ok()) return grads.status().WithContext(context());
    for (size_t i = 0; i < g.op.operands.size(); ++i) {
      if (!g.needed[i] || i >= grads->size() || !(*grads)[i]) continue;
      const ir::Operand& c = *(*grads)[i];
      if (!IsConstant(c) && b.TypeOf(c) != *ir::OperandType(f, g.op.operands[i])) {
        return Internal(fmt::format("{}: the rule gave operand {} a gradient {} for a value {}",
                                    context(), i, ir::Describe(b.TypeOf(c)),
                                    ir::Describe(*ir::OperandType(f, g.op.operands[i]))));
      }
      Status summed = accumulate(values.Of(g.op.operands[i]), c);
      if (!summed.ok()) return summed.WithContext(context());
    }
  }

  if (!keep_outputs) def.outputs.clear();
  for (int i : wrt) {
    const ir::Operand input{ir::Operand::kInput, i, 0.0};
    const std::optional<ir::Operand>& c = cotangent[i];
    if (partial != nullptr) partial->push_back(c ? b.PartialAxes(*c) : 0);
    if (partial != nullptr && c && !IsConstant(*c)) {
      def.outputs.push_back(*c);
      continue;
    }
    Result<ir::Operand> gradient =
        c && !IsConstant(*c) ? b.Complete(*c) : b.Materialize(c ? *c : Constant(0), input);
    if (!gradient.ok()) return gradient.status().WithContext(fmt::format("input {}", i));
    def.outputs.push_back(*gradient);
  }
  DropUnused(def);
  ATOLL_RETURN_IF_ERROR(ValidateUnregistered(def));
  return def;
}

}  // namespace

namespace autodiff {

Result<ir::FunctionDef> Vjp(const ir::FunctionDef& f, const std::vector<int>& wrt,
                            const std::vector<int>& outputs, std::vector<uint32_t>* partial) {
  return Differentiate(f, wrt, GradOptions{outputs, true}, false, partial);
}

}  // namespace autodiff

namespace {

Result<FunctionBuilder> Transform(const FunctionBuilder& f, const std::vector<int>& wrt,
                                  const GradOptions& options, bool keep_outputs) {
  const FunctionBuilder::Impl& impl = HandleAccess::ImplOf(f);
  const std::string_view what = keep_outputs ? "ValueAndGrad" : "Grad";
  if (!impl.status.ok()) return impl.status.WithContext(what);  // it names the function
  Result<ir::FunctionDef> def = Differentiate(impl.def, wrt, options, keep_outputs);
  if (!def.ok()) {
    return def.status().WithContext(fmt::format("{} of function '{}'", what, impl.def.name));
  }
  return HandleAccess::MakeBuilder(std::move(def).value());
}

}  // namespace

Result<FunctionBuilder> Grad(const FunctionBuilder& f, const std::vector<int>& wrt,
                             const GradOptions& options) {
  return Transform(f, wrt, options, false);
}

Result<FunctionBuilder> ValueAndGrad(const FunctionBuilder& f, const std::vector<int>& wrt,
                                     const GradOptions& options) {
  return Transform(f, wrt, options, true);
}

}  // namespace atl
