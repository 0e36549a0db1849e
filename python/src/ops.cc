// atoll.ops: every op of the IR as a function of symbolic values (include/atoll/function.h
// says what each computes and which shardings it takes). The unary ops come from the rows
// of include/atoll/unary_ops.def, so a new row is a new function here too.
#include <pybind11/stl.h>

#include <optional>
#include <utility>
#include <vector>

#include "python/src/bindings.h"
#include "python/src/symbolic.h"

namespace py = pybind11;

namespace atl::python {

namespace {

using Builder = FunctionBuilder;

// Two or more results of one op, checked once.
template <typename Op>
py::tuple ApplyMany(const std::shared_ptr<FunctionTrace>& trace, Op&& op) {
  std::vector<Value> values = op(trace->builder);
  ThrowIfError(trace->builder.status());
  py::tuple out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = py::cast(SymbolicValue{trace, values[i]});
  return out;
}

// An arithmetic op, with a value or a number as b.
void DefArithmetic(py::module_& ops, const char* name, ArithmeticOp op,
                   ArithmeticScalarOp scalar_op, const char* doc) {
  ops.def(
      name, [op](const SymbolicValue& a, const SymbolicValue& b) { return Arithmetic(a, b, op); },
      py::arg("a"), py::arg("b"), doc);
  ops.def(
      name, [scalar_op](const SymbolicValue& a, double b) { return Arithmetic(a, b, scalar_op); },
      py::arg("a"), py::arg("b"));
}

}  // namespace

void BindOps(py::module_& ops) {
  DefArithmetic(ops, "add", &Builder::Add, &Builder::Add, "a + b, elementwise (any dtype).");
  DefArithmetic(ops, "sub", &Builder::Sub, &Builder::Sub, "a - b, elementwise (any dtype).");
  DefArithmetic(ops, "mul", &Builder::Mul, &Builder::Mul, "a * b, elementwise (any dtype).");
  DefArithmetic(ops, "div", &Builder::Div, &Builder::Div, "a / b, elementwise (any dtype).");

#define ATOLL_UNARY_OP(Name, name)                                          \
  ops.def(                                                                  \
      name,                                                                 \
      [](const SymbolicValue& a) {                                          \
        return Apply(a.trace, [&](Builder& f) { return f.Name(a.value); }); \
      },                                                                    \
      py::arg("a"),                                                         \
      "The unary op '" name                                                 \
      "' on every element of a float value (any sharding), as "             \
      "include/atoll/unary_ops.def defines it.");
#include "atoll/unary_ops.def"

  ops.def(
      "primitive",
      [](const std::string& name, const std::vector<SymbolicValue>& operands,
         const std::vector<int64_t>& params, double attr) {
        if (operands.empty()) {
          throw StatusError(InvalidArgument(
              "atoll.ops.primitive('" + name +
              "'): give at least one operand (a value of the "
              "function being traced); for a primitive of none (iota), pass trace="));
        }
        const std::vector<SymbolicValue> unified = Unify(operands);
        std::vector<Value> values;
        for (const SymbolicValue& v : unified) values.push_back(v.value);
        return Apply(unified[0].trace,
                     [&](Builder& f) { return f.Primitive(name, values, params, attr); });
      },
      py::arg("name"), py::arg("operands"), py::arg("params") = std::vector<int64_t>{},
      py::arg("attr") = 0.0,
      "The IR's primitive `name` (a row of common/ir/ops.def: 'max', 'reshape', 'dot_general', "
      "...) on `operands`, with its whole-number params and its attr as the row lays them out. "
      "atoll.lax wraps each in jax.lax's signature.");
  ops.def(
      "structured",
      [](const std::string& name, const std::vector<std::shared_ptr<FunctionTrace>>& bodies,
         const std::vector<SymbolicValue>& operands, const std::vector<int64_t>& params) {
        if (operands.empty()) {
          throw StatusError(
              InvalidArgument("atoll.ops.structured('" + name + "'): give at least one operand"));
        }
        const std::vector<SymbolicValue> unified = Unify(operands);
        const std::shared_ptr<FunctionTrace>& trace = unified[0].trace;
        std::vector<const FunctionBuilder*> body_builders;
        for (const auto& body : bodies) {
          if (body->parent != trace) {
            throw StatusError(InvalidArgument(name + ": body '" + body->name +
                                              "' was not traced inside function '" + trace->name +
                                              "', which the operands belong to"));
          }
          body_builders.push_back(&body->builder);
        }
        std::vector<Value> values;
        for (const SymbolicValue& v : unified) values.push_back(v.value);
        const std::vector<Value> results =
            trace->builder.Structured(name, body_builders, values, params);
        ThrowIfError(trace->builder.status());
        std::vector<SymbolicValue> out;
        for (Value v : results) out.push_back({trace, v});
        return out;
      },
      py::arg("name"), py::arg("bodies"), py::arg("operands"), py::arg("params"),
      "A structured primitive ('while', 'scan', 'cond': rows of common/ir/ops.def) running "
      "`bodies` (FunctionBuilders made inside the operands' function), with the row's params "
      "after the bodies: every result. atoll.lax.while_loop, scan and cond wrap it.");
  ops.def(
      "primitive_of",
      [](const SymbolicValue& of, const std::string& name, const std::vector<int64_t>& params,
         double attr) {
        return Apply(of.trace, [&](Builder& f) { return f.Primitive(name, {}, params, attr); });
      },
      py::arg("of"), py::arg("name"), py::arg("params") = std::vector<int64_t>{},
      py::arg("attr") = 0.0,
      "A primitive of no operands (iota) in the function that `of` belongs to.");
  ops.def(
      "matmul",
      [](const SymbolicValue& a, const SymbolicValue& b, bool transpose_a, bool transpose_b) {
        TraceOf(a, b);
        return Apply(a.trace, [&](Builder& f) {
          return f.Matmul(a.value, b.value, transpose_a, transpose_b);
        });
      },
      py::arg("a"), py::arg("b"), py::arg("transpose_a") = false, py::arg("transpose_b") = false,
      "op(a) @ op(b), op transposing where asked: [m,k] x [k,n]. The rows of op(a) and the "
      "columns of op(b) may be cut along different mesh axes; a contracted dimension cut alike "
      "in both gives each device its partial sum (all_reduce_sum it).");
  ops.def(
      "gelu_backward",
      [](const SymbolicValue& dy, const SymbolicValue& x) {
        TraceOf(dy, x);
        return Apply(dy.trace, [&](Builder& f) { return f.GeluBackward(dy.value, x.value); });
      },
      py::arg("dy"), py::arg("x"), "dy * gelu'(x), for dy and x of one type.");
  ops.def(
      "bias_add",
      [](const SymbolicValue& x, const SymbolicValue& bias) {
        TraceOf(x, bias);
        return Apply(x.trace, [&](Builder& f) { return f.BiasAdd(x.value, bias.value); });
      },
      py::arg("x"), py::arg("bias"),
      "x [..., n] + bias [n] on every row; bias is cut like x's last dimension.");
  ops.def(
      "reduce_sum",
      [](const SymbolicValue& x, int axis) {
        return Apply(x.trace, [&](Builder& f) { return f.ReduceSum(x.value, axis); });
      },
      py::arg("x"), py::arg("axis"),
      "The sum over dimension `axis` (negative counts from the end), which is removed; over "
      "a cut dimension each device gets its block's partial sum.");
  ops.def(
      "reduce_mean",
      [](const SymbolicValue& x, int axis) {
        return Apply(x.trace, [&](Builder& f) { return f.ReduceMean(x.value, axis); });
      },
      py::arg("x"), py::arg("axis"),
      "The mean over dimension `axis`, removed; over a cut dimension, partial shares that "
      "all_reduce_sum turns into the global mean.");
  ops.def(
      "softmax",
      [](const SymbolicValue& x) {
        return Apply(x.trace, [&](Builder& f) { return f.Softmax(x.value); });
      },
      py::arg("x"), "Softmax over the last dimension, which must not be cut.");
  ops.def(
      "layer_norm",
      [](const SymbolicValue& x, const SymbolicValue& gamma, const SymbolicValue& beta,
         double eps) {
        TraceOf(x, gamma);
        TraceOf(x, beta);
        return Apply(x.trace, [&](Builder& f) {
          return f.LayerNorm(x.value, gamma.value, beta.value, eps);
        });
      },
      py::arg("x"), py::arg("gamma"), py::arg("beta"), py::arg("eps") = 1e-5,
      "(x - mean) / sqrt(var + eps) * gamma + beta over the last dimension (not cut); gamma "
      "and beta [d], replicated.");
  ops.def(
      "layer_norm_backward",
      [](const SymbolicValue& dy, const SymbolicValue& x, const SymbolicValue& gamma, double eps) {
        TraceOf(dy, x);
        TraceOf(dy, gamma);
        return ApplyMany(dy.trace, [&](Builder& f) {
          auto g = f.LayerNormBackward(dy.value, x.value, gamma.value, eps);
          return std::vector<Value>{g.dx, g.dgamma, g.dbeta};
        });
      },
      py::arg("dy"), py::arg("x"), py::arg("gamma"), py::arg("eps") = 1e-5,
      "The gradients (dx, dgamma, dbeta) of layer_norm; dgamma and dbeta are partial when "
      "x's rows are cut.");
  ops.def(
      "cross_entropy",
      [](const SymbolicValue& logits, const SymbolicValue& labels) {
        TraceOf(logits, labels);
        return ApplyMany(logits.trace, [&](Builder& f) {
          auto ce = f.CrossEntropy(logits.value, labels.value);
          return std::vector<Value>{ce.loss, ce.dlogits};
        });
      },
      py::arg("logits"), py::arg("labels"),
      "Softmax cross-entropy of logits [b,c] (a float dtype) against labels i32 or i64 [b]: "
      "(the mean loss [], d loss / d logits), of the logits' dtype. With the rows cut, the "
      "loss is each device's partial share.");
  ops.def(
      "transpose",
      [](const SymbolicValue& x) {
        return Apply(x.trace, [&](Builder& f) { return f.Transpose(x.value); });
      },
      py::arg("x"), "[m,n] -> [n,m]; a cut dimension stays cut along the same mesh axis.");
  ops.def(
      "sgd_update",
      [](const SymbolicValue& param, const SymbolicValue& grad, double learning_rate) {
        TraceOf(param, grad);
        return Apply(param.trace, [&](Builder& f) {
          return f.SgdUpdate(param.value, grad.value, learning_rate);
        });
      },
      py::arg("param"), py::arg("grad"), py::arg("learning_rate"), "param - learning_rate * grad.");
  ops.def(
      "adam_update",
      [](const SymbolicValue& param, const SymbolicValue& grad, const SymbolicValue& m,
         const SymbolicValue& v, const SymbolicValue& step, double learning_rate, double beta1,
         double beta2, double epsilon, double weight_decay) {
        for (const SymbolicValue* other : {&grad, &m, &v, &step}) TraceOf(param, *other);
        return ApplyMany(param.trace, [&](Builder& f) {
          auto a = f.AdamUpdate(param.value, grad.value, m.value, v.value, step.value,
                                {learning_rate, beta1, beta2, epsilon, weight_decay});
          return std::vector<Value>{a.param, a.m, a.v};
        });
      },
      py::arg("param"), py::arg("grad"), py::arg("m"), py::arg("v"), py::arg("step"),
      py::arg("learning_rate") = 1e-3, py::arg("beta1") = 0.9, py::arg("beta2") = 0.999,
      py::arg("epsilon") = 1e-8, py::arg("weight_decay") = 0.0,
      "One Adam step: (new param, m, v). `step` is a replicated i32 [] input counting from 1.");
  ops.def(
      "grouped_matmul",
      [](const SymbolicValue& x, const SymbolicValue& w, bool transpose_w) {
        TraceOf(x, w);
        return Apply(x.trace,
                     [&](Builder& f) { return f.GroupedMatmul(x.value, w.value, transpose_w); });
      },
      py::arg("x"), py::arg("w"), py::arg("transpose_w") = false,
      "Experts: x [m,k] with its rows cut over the slice times w [E,k,n] cut along its first "
      "dimension; each device multiplies its rows by its own [k,n].");
  ops.def(
      "grouped_weight_grad",
      [](const SymbolicValue& x, const SymbolicValue& dy, int64_t groups) {
        TraceOf(x, dy);
        return Apply(x.trace,
                     [&](Builder& f) { return f.GroupedWeightGrad(x.value, dy.value, groups); });
      },
      py::arg("x"), py::arg("dy"), py::arg("groups"),
      "The gradient of grouped_matmul's w: each device's x^T dy as its group of "
      "[groups,k,n].");
  ops.def(
      "scatter_add_rows",
      [](const SymbolicValue& values, const SymbolicValue& ids, int64_t rows) {
        TraceOf(values, ids);
        return Apply(values.trace,
                     [&](Builder& f) { return f.ScatterAddRows(values.value, ids.value, rows); });
      },
      py::arg("values"), py::arg("ids"), py::arg("rows"),
      "Row i of values [m,d] added into row ids[i] of a zero [rows,d].");
  ops.def(
      "gather_rows",
      [](const SymbolicValue& table, const SymbolicValue& ids) {
        TraceOf(table, ids);
        return Apply(table.trace, [&](Builder& f) { return f.GatherRows(table.value, ids.value); });
      },
      py::arg("table"), py::arg("ids"), "Rows table[ids[i]] of a replicated table [r,d].");
  ops.def(
      "top_k",
      [](const SymbolicValue& x, int64_t k) {
        return ApplyMany(x.trace, [&](Builder& f) {
          auto t = f.TopK(x.value, k);
          return std::vector<Value>{t.values, t.indices};
        });
      },
      py::arg("x"), py::arg("k"),
      "The k largest values of each row of x f32 or f64 [..., n], best first, and their "
      "positions (i32): (values, indices).");
  ops.def(
      "column",
      [](const SymbolicValue& x, int64_t j) {
        return Apply(x.trace, [&](Builder& f) { return f.Column(x.value, j); });
      },
      py::arg("x"), py::arg("j"), "Column j of x [m,n] of any dtype: [m], cut like x's rows.");
  ops.def(
      "cast",
      [](const SymbolicValue& x, const py::handle& dtype) {
        // An atoll.DType, or its name.
        const auto name =
            py::cast<std::string>(py::isinstance<py::str>(dtype) ? dtype : dtype.attr("name"));
        const DType to = Unwrap(ParseDType(name));
        return Apply(x.trace, [&](Builder& f) { return f.Cast(x.value, to); });
      },
      py::arg("x"), py::arg("dtype"),
      "x's values as `dtype` (an atoll.DType such as atoll.bf16, or its name), any sharding: "
      "into a float dtype rounded to nearest even once, into an integer one truncated toward "
      "zero.");
  ops.def(
      "spin",
      [](const SymbolicValue& a, double micros) {
        return Apply(a.trace, [&](Builder& f) { return f.Spin(a.value, micros); });
      },
      py::arg("a"), py::arg("micros"),
      "Keeps the device busy for `micros` microseconds, then passes `a` through.");
  ops.def(
      "filter",
      [](const SymbolicValue& a, double threshold) {
        return Apply(a.trace, [&](Builder& f) { return f.Filter(a.value, threshold); });
      },
      py::arg("a"), py::arg("threshold"),
      "The elements of the 1-D `a` greater than `threshold`, in order (a length known only "
      "from the data).");
  // The all-reduces: over `axis` of the slice's mesh, or the whole slice when it is None.
  using AllReduce = Value (Builder::*)(Value, int);
  const std::pair<const char*, AllReduce> all_reduces[] = {
      {"all_reduce_sum", &Builder::AllReduceSum},
      {"all_reduce_max", &Builder::AllReduceMax},
      {"all_reduce_min", &Builder::AllReduceMin},
      {"all_reduce_mean", &Builder::AllReduceMean},
  };
  for (const auto& [name, reduce] : all_reduces) {
    ops.def(
        name,
        [reduce = reduce](const SymbolicValue& a, std::optional<int> axis) {
          return Apply(a.trace, [&](Builder& f) {
            return (f.*reduce)(a.value, axis.value_or(kWholeSlice));
          });
        },
        py::arg("a"), py::arg("axis") = py::none(),
        "A collective: the elementwise reduction (sum, max, min or mean) of every device's `a` "
        "over the group of devices that differ only along mesh axis `axis` (None: the whole "
        "slice, `a` replicated). `a` must not be cut along the axis: a partial, or values "
        "that differ per device.");
  }
  ops.def(
      "all_gather",
      [](const SymbolicValue& a, int axis) {
        return Apply(a.trace, [&](Builder& f) { return f.AllGather(a.value, axis); });
      },
      py::arg("a"), py::arg("axis"),
      "A collective: the dimension of `a` cut along mesh axis `axis` made whole.");
  ops.def(
      "reduce_scatter",
      [](const SymbolicValue& a, int axis, int dim) {
        return Apply(a.trace, [&](Builder& f) { return f.ReduceScatter(a.value, axis, dim); });
      },
      py::arg("a"), py::arg("axis"), py::arg("dim"),
      "A collective: the sum over mesh axis `axis` of `a` (not cut along it), cut along it on "
      "dimension `dim`.");
  ops.def(
      "all_to_all",
      [](const SymbolicValue& a, int axis, int dim) {
        return Apply(a.trace, [&](Builder& f) { return f.AllToAll(a.value, axis, dim); });
      },
      py::arg("a"), py::arg("axis"), py::arg("dim"),
      "A collective: `a`, cut along mesh axis `axis` on one dimension, cut along it on "
      "dimension `dim` instead (the same value, its blocks exchanged).");
  ops.def(
      "broadcast",
      [](const SymbolicValue& a, int axis, int64_t root) {
        return Apply(a.trace, [&](Builder& f) { return f.Broadcast(a.value, axis, root); });
      },
      py::arg("a"), py::arg("axis"), py::arg("root"),
      "A collective: every device gets the `a` of the device at coordinate `root` along mesh "
      "axis `axis`.");
  ops.def(
      "collective_permute",
      [](const SymbolicValue& a, int axis, const std::vector<std::pair<int64_t, int64_t>>& pairs) {
        return Apply(a.trace,
                     [&](Builder& f) { return f.CollectivePermute(a.value, axis, pairs); });
      },
      py::arg("a"), py::arg("axis"), py::arg("pairs"),
      "A collective (send/recv): for each (source, target) pair of coordinates along mesh "
      "axis `axis`, the target gets the source's block of `a`; a device no pair targets gets "
      "zeros.");
}

}  // namespace atl::python
