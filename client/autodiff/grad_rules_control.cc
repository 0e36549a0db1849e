// The gradient rules of structured control flow (scan, cond, and tuple_element, which reads
// their results), as jax transposes them (jax/_src/lax/control_flow/loops.py,
// conditionals.py): a body's cotangents come from its vector-Jacobian product (vjp.h: Grad
// of the body), run inside a structured op of the same kind, on the device, in the one
// computation. while has no rule: its trip count depends on the data, and jax refuses its
// reverse mode too (its row of common/ir/ops.def says so by name).
//
// scan saves the carry each step starts from (the forward scan's body gives it as one more
// stacked result) and runs the transpose as a scan the other way over those residuals, the
// xs and the ys' cotangents; each step recomputes the body's own intermediates from its
// carry (as jax.checkpoint around the body does) instead of stacking every one of them.
#include <algorithm>

#include <fmt/format.h>

#include "client/autodiff/grad_rules.h"
#include "client/autodiff/lax_emit.h"
#include "client/autodiff/vjp.h"

namespace atl::autodiff {

namespace {

using ir::OpCode;
using ir::Operand;
using ir::TensorType;

Operand InputOf(size_t i) { return {Operand::kInput, static_cast<int32_t>(i), 0.0}; }

// f taking `inputs`: f's input i becomes input at[i].
ir::FunctionDef Rewired(const ir::FunctionDef& f, std::vector<TensorType> inputs,
                        const std::vector<size_t>& at) {
  ir::FunctionDef out = f;
  out.inputs = std::move(inputs);
  auto map = [&](Operand& o) {
    if (o.kind == Operand::kInput) o.index = static_cast<int32_t>(at[static_cast<size_t>(o.index)]);
  };
  for (ir::Op& op : out.ops) {
    for (Operand& o : op.operands) map(o);
  }
  for (Operand& o : out.outputs) map(o);
  return out;
}

// Result r of the structured op g differentiates, as a value.
Result<Operand> ResultValue(Backward& b, const Operand& structured, size_t r) {
  if (r == 0) return structured;
  return b.Emit(OpCode::kTupleElement, {structured}, 0, {static_cast<int64_t>(r)});
}

// The cotangent of result r of g's op, whole (a body runs on each shard's block, with no
// collective to complete a partial one), or none.
Result<std::optional<Operand>> ResultDy(Backward& b, const OpGrad& g, size_t r) {
  std::optional<Operand> dy = b.ResultCotangent(g.result, static_cast<int64_t>(r));
  if (r == 0 && !(IsConstant(g.dy) && g.dy.scalar == 0)) {
    ATOLL_ASSIGN_OR_RETURN(const Operand own, LaxDy(b, g));
    if (dy) {
      ATOLL_ASSIGN_OR_RETURN(dy, b.Sum(*dy, own));
    } else {
      dy = own;
    }
  }
  if (!dy) return std::optional<Operand>();
  ATOLL_ASSIGN_OR_RETURN(const Operand whole, b.Complete(*dy));
  return std::optional<Operand>(whole);
}

// The VJP of `body`, refused where it would need a collective (a body may hold none). With
// `partial`, the gradients by wrt[i] for i >= whole_count may stay partial (partial gets
// their axes).
Result<ir::FunctionDef> BodyVjp(const ir::Op& op, const ir::FunctionDef& body,
                                const std::vector<int>& wrt, const std::vector<int>& outputs,
                                std::vector<uint32_t>* partial = nullptr, size_t whole_count = 0) {
  Result<ir::FunctionDef> vjp = Vjp(body, wrt, outputs, partial);
  if (!vjp.ok()) return vjp.status().WithContext(fmt::format("body '{}'", body.name));
  bool cut_sum = ir::HasCollectives(*vjp);
  for (size_t i = 0; partial != nullptr && i < whole_count; ++i) cut_sum |= (*partial)[i] != 0;
  if (cut_sum) {
    return NoRuleFor(op, fmt::format("the gradient of its body '{}' sums over a dimension cut "
                                     "over devices into a value that must be whole inside the "
                                     "{}, and a body cannot complete it (it may hold no "
                                     "collective)",
                                     body.name, ir::OpName(op.code)));
  }
  return vjp;
}

// The values of each result of the structured op `s`, those from `first` on.
Result<std::vector<Operand>> ResultsFrom(Backward& b, const Operand& s, size_t first,
                                         size_t count) {
  std::vector<Operand> out;
  for (size_t r = first; r < first + count; ++r) {
    ATOLL_ASSIGN_OR_RETURN(const Operand v, ResultValue(b, s, r));
    out.push_back(v);
  }
  return out;
}

// scan's operands and body, read.
struct ScanParts {
  size_t carried, consts, scanned, ys;
  int64_t length, reverse;
  ir::FunctionDef body;

  ScanParts(const Backward& b, const ir::Op& op)
      : carried(static_cast<size_t>(op.params[1])),
        consts(static_cast<size_t>(op.params[2])),
        scanned(op.operands.size() - carried - consts),
        length(op.params[3]),
        reverse(op.params[4]),
        body(b.def().bodies.at(static_cast<size_t>(op.params[0]))) {
    ys = body.outputs.size() - carried;
  }
  size_t X(size_t i) const { return carried + i; }            // xs i's operand
  size_t K(size_t k) const { return carried + scanned + k; }  // const k's operand
};

// The transpose's body: takes the carries' cotangents, the consts' cotangents summed so far,
// then a step's carry, xs and ys' cotangents, then the consts; gives the carries' cotangents
// a step earlier, the sums with this step's, and the xs' cotangents. A const's cotangent may
// be partial (a sum over a dimension cut over devices, as a weight's over a split batch):
// summed so, it is completed after the loop; partial gets the mesh axes of each.
Result<ir::FunctionDef> ScanTransposeBody(const ir::Op& op, const ScanParts& s,
                                          const std::vector<size_t>& fc,
                                          const std::vector<size_t>& fy,
                                          const std::vector<size_t>& gx,
                                          const std::vector<size_t>& gk,
                                          std::vector<uint32_t>& partial) {
  std::vector<int> wrt, outputs;
  for (size_t c : fc) wrt.push_back(static_cast<int>(c));
  for (size_t i : gx) wrt.push_back(static_cast<int>(s.X(i)));
  for (size_t k : gk) wrt.push_back(static_cast<int>(s.K(k)));
  for (size_t c : fc) outputs.push_back(static_cast<int>(c));
  for (size_t y : fy) outputs.push_back(static_cast<int>(s.carried + y));
  ATOLL_ASSIGN_OR_RETURN(const ir::FunctionDef vjp,
                         BodyVjp(op, s.body, wrt, outputs, &partial, fc.size() + gx.size()));
  partial.erase(partial.begin(), partial.begin() + static_cast<ptrdiff_t>(fc.size() + gx.size()));

  const std::vector<TensorType>& in = s.body.inputs;
  const std::vector<TensorType> out = ir::OutputTypes(s.body);
  std::vector<TensorType> inputs;
  for (size_t c : fc) inputs.push_back(in[c]);
  for (size_t k : gk) inputs.push_back(in[s.K(k)]);
  const size_t at_step = inputs.size();  // the body's own inputs: carry, xs, then consts
  for (size_t i = 0; i < s.carried + s.scanned; ++i) inputs.push_back(in[i]);
  const size_t at_dy = inputs.size();
  for (size_t y : fy) inputs.push_back(out[s.carried + y]);
  const size_t at_consts = inputs.size();
  for (size_t k = 0; k < s.consts; ++k) inputs.push_back(in[s.K(k)]);
  std::vector<size_t> at;  // the VJP's inputs: the body's, then the outputs' cotangents
  for (size_t i = 0; i < s.carried + s.scanned; ++i) at.push_back(at_step + i);
  for (size_t k = 0; k < s.consts; ++k) at.push_back(at_consts + k);
  for (size_t t = 0; t < fc.size(); ++t) at.push_back(t);
  for (size_t t = 0; t < fy.size(); ++t) at.push_back(at_dy + t);

  ir::FunctionDef t = Rewired(vjp, std::move(inputs), at);
  t.name = s.body.name + "_transpose";
  const std::vector<Operand> grads = t.outputs;  // wrt's order: carries, xs, consts
  t.outputs.assign(grads.begin(), grads.begin() + static_cast<ptrdiff_t>(fc.size()));
  Backward tb(t);
  for (size_t a = 0; a < gk.size(); ++a) {
    ATOLL_ASSIGN_OR_RETURN(const Operand sum,
                           Plus(tb, InputOf(fc.size() + a), grads[fc.size() + gx.size() + a]));
    t.outputs.push_back(sum);
  }
  for (size_t i = 0; i < gx.size(); ++i) t.outputs.push_back(grads[fc.size() + i]);
  return t;
}

}  // namespace

Result<OperandGrads> GradTupleElement(Backward& b, const OpGrad& g) {
  ATOLL_ASSIGN_OR_RETURN(const Operand dy, LaxDy(b, g));
  ATOLL_RETURN_IF_ERROR(b.AddResultCotangent(g.op.operands[0], g.op.params[0], dy));
  return OperandGrads(1);
}

Result<OperandGrads> GradScan(Backward& b, const OpGrad& g) {
  const ir::Op& op = g.op;
  const ScanParts s(b, op);
  const std::vector<TensorType> out = ir::OutputTypes(s.body);
  OperandGrads grads(op.operands.size());
  // The float carries (every one: the loop carries their cotangents back), the float ys that
  // have a cotangent, and the xs and consts that need theirs.
  std::vector<size_t> fc, fy, gx, gk;
  std::vector<Operand> dys;
  for (size_t c = 0; c < s.carried; ++c) {
    if (IsFloating(out[c].dtype)) fc.push_back(c);
  }
  for (size_t y = 0; y < s.ys; ++y) {
    if (!IsFloating(out[s.carried + y].dtype)) continue;
    ATOLL_ASSIGN_OR_RETURN(const std::optional<Operand> dy, ResultDy(b, g, s.carried + y));
    if (!dy) continue;
    fy.push_back(y);
    dys.push_back(*dy);
  }
  for (size_t i = 0; i < s.scanned; ++i) {
    if (g.needed[s.X(i)]) gx.push_back(i);
  }
  for (size_t k = 0; k < s.consts; ++k) {
    if (g.needed[s.K(k)]) gk.push_back(k);
  }
  if ((fc.empty() && fy.empty()) || (fc.empty() && gx.empty() && gk.empty())) return grads;
  std::vector<uint32_t> partial;  // per const in gk
  ATOLL_ASSIGN_OR_RETURN(ir::FunctionDef transpose,
                         ScanTransposeBody(op, s, fc, fy, gx, gk, partial));

  // The forward scan also stacks the carry each step starts from: the residuals.
  std::vector<Operand> operands;
  if (s.carried > 0) {
    ir::FunctionDef saving = s.body;
    saving.name += "_saving_carries";
    for (size_t c = 0; c < s.carried; ++c) saving.outputs.push_back(InputOf(c));
    ATOLL_RETURN_IF_ERROR(b.SetBody(g.result, 0, b.AddBody(std::move(saving))));
  }
  for (size_t c : fc) {
    ATOLL_ASSIGN_OR_RETURN(const std::optional<Operand> dy, ResultDy(b, g, c));
    if (dy) {
      operands.push_back(*dy);
    } else {
      ATOLL_ASSIGN_OR_RETURN(const Operand carry, ResultValue(b, g.result, c));
      ATOLL_ASSIGN_OR_RETURN(operands.emplace_back(), FilledLike(b, carry, 0));
    }
  }
  for (size_t k : gk) {
    ATOLL_ASSIGN_OR_RETURN(operands.emplace_back(), FilledLike(b, op.operands[s.K(k)], 0));
  }
  ATOLL_ASSIGN_OR_RETURN(const std::vector<Operand> residuals,
                         ResultsFrom(b, g.result, s.carried + s.ys, s.carried));
  operands.insert(operands.end(), residuals.begin(), residuals.end());
  for (size_t i = 0; i < s.scanned; ++i) operands.push_back(op.operands[s.X(i)]);
  operands.insert(operands.end(), dys.begin(), dys.end());
  for (size_t k = 0; k < s.consts; ++k) operands.push_back(op.operands[s.K(k)]);
  const size_t carried = fc.size() + gk.size();
  const int64_t body = b.AddBody(std::move(transpose));
  ATOLL_ASSIGN_OR_RETURN(const Operand back,
                         b.Emit(OpCode::kScan, std::move(operands), 0,
                                {body, static_cast<int64_t>(carried),
                                 static_cast<int64_t>(s.consts), s.length, 1 - s.reverse}));
  ATOLL_ASSIGN_OR_RETURN(const std::vector<Operand> results,
                         ResultsFrom(b, back, 0, carried + gx.size()));
  for (size_t t = 0; t < fc.size(); ++t) {
    if (g.needed[fc[t]]) grads[fc[t]] = results[t];
  }
  for (size_t a = 0; a < gk.size(); ++a) {
    b.AddPartial(results[fc.size() + a], partial[a]);
    grads[s.K(gk[a])] = results[fc.size() + a];
  }
  for (size_t i = 0; i < gx.size(); ++i) grads[s.X(gx[i])] = results[carried + i];
  return grads;
}

Result<OperandGrads> GradCond(Backward& b, const OpGrad& g) {
  const ir::Op& op = g.op;
  const size_t branches = op.params.size() / 2;
  std::vector<size_t> first_const(branches);  // each branch's first const, after the args
  size_t consts = 0;
  for (size_t br = 0; br < branches; ++br) {
    first_const[br] = consts;
    consts += static_cast<size_t>(op.params[branches + br]);
  }
  const size_t args = op.operands.size() - 1 - consts;
  OperandGrads grads(op.operands.size());
  const std::vector<TensorType> out =
      ir::OutputTypes(b.def().bodies.at(static_cast<size_t>(op.params[0])));
  // The float results that have a cotangent; the operands (not the index) that need theirs.
  std::vector<int> fr;
  std::vector<Operand> dys;
  for (size_t r = 0; r < out.size(); ++r) {
    if (!IsFloating(out[r].dtype)) continue;
    ATOLL_ASSIGN_OR_RETURN(const std::optional<Operand> dy, ResultDy(b, g, r));
    if (!dy) continue;
    fr.push_back(static_cast<int>(r));
    dys.push_back(*dy);
  }
  std::vector<size_t> targets;
  for (size_t o = 1; o < op.operands.size(); ++o) {
    if (g.needed[o]) targets.push_back(o);
  }
  if (fr.empty() || targets.empty()) return grads;

  // Each transposed branch takes the args, every branch's consts and the cotangents, and
  // gives every target's cotangent: its own operands', zeros for the other branches' consts.
  std::vector<TensorType> inputs;
  for (size_t o = 1; o < op.operands.size(); ++o) inputs.push_back(b.TypeOf(op.operands[o]));
  for (const Operand& dy : dys) inputs.push_back(b.TypeOf(dy));
  std::vector<int64_t> params;
  for (size_t br = 0; br < branches; ++br) {
    const ir::FunctionDef& branch = b.def().bodies.at(static_cast<size_t>(op.params[br]));
    std::vector<size_t> operand_of;  // the branch's input i is operand operand_of[i]
    for (size_t a = 0; a < args; ++a) operand_of.push_back(1 + a);
    for (size_t k = 0; k < static_cast<size_t>(op.params[branches + br]); ++k) {
      operand_of.push_back(1 + args + first_const[br] + k);
    }
    std::vector<int> wrt;
    std::vector<size_t> wrt_operand;
    for (size_t i = 0; i < operand_of.size(); ++i) {
      if (!g.needed[operand_of[i]]) continue;
      wrt.push_back(static_cast<int>(i));
      wrt_operand.push_back(operand_of[i]);
    }
    ir::FunctionDef t;
    t.name = branch.name + "_transpose";
    t.inputs = inputs;
    std::vector<Operand> given;
    if (!wrt.empty()) {
      ATOLL_ASSIGN_OR_RETURN(const ir::FunctionDef vjp, BodyVjp(op, branch, wrt, fr));
      std::vector<size_t> at;
      for (size_t o : operand_of) at.push_back(o - 1);
      for (size_t d = 0; d < fr.size(); ++d) at.push_back(op.operands.size() - 1 + d);
      t = Rewired(vjp, inputs, at);
      t.name = branch.name + "_transpose";
      given = t.outputs;
      t.outputs.clear();
    }
    Backward tb(t);
    for (size_t o : targets) {
      const auto it = std::ranges::find(wrt_operand, o);
      if (it != wrt_operand.end()) {
        t.outputs.push_back(given[static_cast<size_t>(it - wrt_operand.begin())]);
      } else {
        ATOLL_ASSIGN_OR_RETURN(t.outputs.emplace_back(), FilledLike(tb, InputOf(o - 1), 0));
      }
    }
    params.push_back(b.AddBody(std::move(t)));
  }
  params.insert(params.end(), branches, 0);
  std::vector<Operand> operands(op.operands.begin(), op.operands.end());
  operands.insert(operands.end(), dys.begin(), dys.end());
  ATOLL_ASSIGN_OR_RETURN(const Operand back,
                         b.Emit(OpCode::kCond, std::move(operands), 0, std::move(params)));
  ATOLL_ASSIGN_OR_RETURN(const std::vector<Operand> results,
                         ResultsFrom(b, back, 0, targets.size()));
  for (size_t t = 0; t < targets.size(); ++t) grads[targets[t]] = results[t];
  return grads;
}

}  // namespace atl::autodiff
