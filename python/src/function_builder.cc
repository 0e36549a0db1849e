// Tracing a Python function into a compiled function: FunctionBuilder makes the inputs, the
// function runs on them as symbolic Values, whose operators (+ - * / @, unary minus, .T)
// record ops; every other op is in atoll.ops (ops.cc).
#include <memory>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "atoll/grad.h"
#include "python/src/bindings.h"
#include "python/src/symbolic.h"

namespace py = pybind11;

namespace atl::python {

FunctionTrace& TraceOf(const SymbolicValue& a, const SymbolicValue& b) {
  if (a.trace != b.trace) {
    throw StatusError(InvalidArgument("an op on values of two functions ('" + a.trace->name +
                                      "' and '" + b.trace->name +
                                      "'): a function's ops take its own values"));
  }
  return *a.trace;
}

namespace {

bool IsWithin(const FunctionTrace* inner, const FunctionTrace* outer) {
  for (const FunctionTrace* t = inner; t != nullptr; t = t->parent.get()) {
    if (t == outer) return true;
  }
  return false;
}

// `v`, a value of `into` or of one of its ancestors, as a value of `into`.
SymbolicValue Lift(const SymbolicValue& v, const std::shared_ptr<FunctionTrace>& into) {
  if (v.trace == into) return v;
  const SymbolicValue outer = Lift(v, into->parent);
  for (const auto& [of_parent, here] : into->lifted) {
    if (of_parent.kind == outer.value.kind && of_parent.index == outer.value.index) {
      return {into, here};
    }
  }
  const FunctionBuilder::ValueType t = Unwrap(outer.trace->builder.TypeOf(outer.value));
  const SymbolicValue input =
      Apply(into, [&](FunctionBuilder& f) { return f.Input(t.dtype, t.shape, t.sharding); });
  into->lifted.emplace_back(outer.value, input.value);
  into->captured.push_back(outer);
  return input;
}

}  // namespace

std::vector<SymbolicValue> Unify(const std::vector<SymbolicValue>& values) {
  if (values.empty()) return {};
  std::shared_ptr<FunctionTrace> deepest = values[0].trace;
  for (const SymbolicValue& v : values) {
    if (IsWithin(v.trace.get(), deepest.get())) {
      deepest = v.trace;
    } else if (!IsWithin(deepest.get(), v.trace.get())) {
      TraceOf(values[0], v);  // raises: two unrelated functions
    }
  }
  std::vector<SymbolicValue> out;
  for (const SymbolicValue& v : values) out.push_back(Lift(v, deepest));
  return out;
}

namespace {

using Builder = FunctionBuilder;

// The operator `name` for an arithmetic op, and its reflected form `rname` (b op a) where
// it is the same op (null otherwise).
void BindArithmetic(py::class_<SymbolicValue>& cls, const char* name, const char* rname,
                    ArithmeticOp op, ArithmeticScalarOp scalar_op) {
  cls.def(
      name, [op](const SymbolicValue& a, const SymbolicValue& b) { return Arithmetic(a, b, op); },
      py::is_operator());
  cls.def(
      name, [scalar_op](const SymbolicValue& a, double b) { return Arithmetic(a, b, scalar_op); },
      py::is_operator());
  if (rname != nullptr) {
    cls.def(
        rname,
        [scalar_op](const SymbolicValue& a, double b) { return Arithmetic(a, b, scalar_op); },
        py::is_operator());
  }
}

// atoll.grad and atoll.value_and_grad's work: traces `fun` on values of the types of
// `args` (values of one function being traced) into a function of its own, takes Grad or
// ValueAndGrad of it by the inputs `argnums`, and inlines that into the function of `args`:
// its outputs there (with `keep_value`, fun's value first).
std::vector<SymbolicValue> Differentiate(const py::function& fun, const std::vector<int>& argnums,
                                         const std::vector<SymbolicValue>& args, bool keep_value) {
  if (args.empty())
    throw StatusError(InvalidArgument("the differentiated function takes no values"));
  for (const SymbolicValue& a : args) TraceOf(args[0], a);
  const std::shared_ptr<FunctionTrace>& outer = args[0].trace;
  const std::string name = py::str(py::getattr(fun, "__name__", py::str("function")));
  auto inner = std::make_shared<FunctionTrace>(name);
  py::list values;
  for (const SymbolicValue& a : args) {
    const FunctionBuilder::ValueType t = Unwrap(outer->builder.TypeOf(a.value));
    values.append(Apply(inner, [&](Builder& f) { return f.Input(t.dtype, t.shape, t.sharding); }));
  }
  const py::object result = fun(*values);
  if (!py::isinstance<SymbolicValue>(result) ||
      result.cast<const SymbolicValue&>().trace != inner) {
    throw StatusError(InvalidArgument("function '" + name +
                                      "' must return one value (an f32 [] loss) computed from "
                                      "its arguments to be differentiated"));
  }
  inner->builder.Output(result.cast<const SymbolicValue&>().value);
  ThrowIfError(inner->builder.status());
  const FunctionBuilder gradient =
      Unwrap(keep_value ? ValueAndGrad(inner->builder, argnums) : Grad(inner->builder, argnums));
  std::vector<Value> arg_values;
  for (const SymbolicValue& a : args) arg_values.push_back(a.value);
  const std::vector<Value> outputs = outer->builder.Call(gradient, arg_values);
  ThrowIfError(outer->builder.status());
  std::vector<SymbolicValue> out;
  for (Value v : outputs) out.push_back({outer, v});
  return out;
}

}  // namespace

void BindFunctionBuilder(py::module_& m) {
  m.def(
      "innermost",
      [](const std::vector<SymbolicValue>& values) {
        size_t deepest = 0;
        for (size_t i = 0; i < values.size(); ++i) {
          if (IsWithin(values[i].trace.get(), values[deepest].trace.get())) deepest = i;
        }
        return deepest;
      },
      py::arg("values"),
      "The index of the value among `values` whose function is the innermost (a loop body "
      "inside the function it runs in): where a body taking them all must be traced.");
  m.def("differentiate", &Differentiate, py::arg("fun"), py::arg("argnums"), py::arg("args"),
        py::arg("keep_value"),
        "atoll.grad's and atoll.value_and_grad's work (python/atoll/_tracing.py): fun traced "
        "on values of args' types, differentiated by the inputs argnums (Grad, "
        "include/atoll/grad.h), inlined on args.");
  py::class_<FunctionTrace, std::shared_ptr<FunctionTrace>>(
      m, "FunctionBuilder",
      "Records a compiled function as a list of ops over global (unsharded) shapes. "
      "atoll.function drives it: you rarely need it directly.")
      .def(py::init<std::string>(), py::arg("name"))
      .def(py::init([](const std::string& name, const SymbolicValue& inside) {
             return std::make_shared<FunctionTrace>(name, inside.trace);
           }),
           py::arg("name"), py::arg("inside"),
           "A body (of a loop or a branch) of the function that `inside` belongs to: the "
           "values of that function it uses become its consts (captured).")
      .def_property_readonly(
          "captured", [](const FunctionTrace& t) { return t.captured; },
          "The values of the enclosing function this body uses, in the order of the inputs "
          "they became (after its own).")
      .def_property_readonly("name", [](const FunctionTrace& t) { return t.name; })
      .def(
          "input",
          [](const std::shared_ptr<FunctionTrace>& trace, const std::string& dtype,
             const Shape& shape, const std::vector<int>& axes) {
            const DType type = Unwrap(ParseDType(dtype));
            return Apply(trace,
                         [&](Builder& f) { return f.Input(type, shape, Sharding::Axes(axes)); });
          },
          py::arg("dtype"), py::arg("shape"), py::arg("axes"),
          "A new input: dtype by name ('f32', 'bf16', 'i64', ...), its global shape (-1: a "
          "dimension known only "
          "from the data), and per dimension the mesh axis it is cut along (-1: not cut).")
      .def(
          "output",
          [](const std::shared_ptr<FunctionTrace>& trace, const SymbolicValue& v) {
            // A body may return a value of the function it runs in (a const, passed on).
            if (!IsWithin(trace.get(), v.trace.get())) {
              throw StatusError(InvalidArgument("function '" + trace->name +
                                                "' returns a value of function '" + v.trace->name +
                                                "'"));
            }
            trace->builder.Output(Lift(v, trace).value);
            ThrowIfError(trace->builder.status());
          },
          py::arg("value"), "Appends an output.");

  py::class_<SymbolicValue> value(
      m, "Value",
      "A symbolic value of a function being traced: an input or an op's result. Operators "
      "record ops: + - * / (with a value or a number), @ (matmul), unary -, .T (transpose); "
      "atoll.ops has every op. It has no truth value and no comparisons (the IR has none).");
  BindArithmetic(value, "__add__", "__radd__", &Builder::Add, &Builder::Add);
  BindArithmetic(value, "__sub__", nullptr, &Builder::Sub, &Builder::Sub);
  BindArithmetic(value, "__mul__", "__rmul__", &Builder::Mul, &Builder::Mul);
  BindArithmetic(value, "__truediv__", nullptr, &Builder::Div, &Builder::Div);
  value
      .def(
          "__rsub__",
          [](const SymbolicValue& a, double b) {
            return Apply(a.trace, [&](Builder& f) { return f.Add(f.Neg(a.value), b); });
          },
          py::is_operator())
      .def(
          "__matmul__",
          [](const SymbolicValue& a, const SymbolicValue& b) {
            const std::vector<SymbolicValue> ab = Unify({a, b});
            return Apply(ab[0].trace,
                         [&](Builder& f) { return f.Matmul(ab[0].value, ab[1].value); });
          },
          py::is_operator())
      .def("__neg__",
           [](const SymbolicValue& a) {
             return Apply(a.trace, [&](Builder& f) { return f.Neg(a.value); });
           })
      .def_property_readonly(
          "T",
          [](const SymbolicValue& a) {
            return Apply(a.trace, [&](Builder& f) { return f.Transpose(a.value); });
          },
          "The transpose of a 2-D value.")
      .def("__bool__",
           [](const SymbolicValue&) -> bool {
             throw py::type_error(
                 "a traced atoll value has no truth value: the function is traced once, "
                 "so Python control flow cannot depend on its values");
           })
      .def_property_readonly(
          "dtype",
          [](const SymbolicValue& a) {
            return std::string(DTypeName(Unwrap(a.trace->builder.TypeOf(a.value)).dtype));
          },
          "The value's dtype, by name ('f32', 'bool', ...).")
      .def_property_readonly(
          "shape",
          [](const SymbolicValue& a) {
            const Shape shape = Unwrap(a.trace->builder.TypeOf(a.value)).shape;
            return py::tuple(py::cast(shape));
          },
          "The value's global shape, a tuple.")
      .def_property_readonly(
          "split",
          [](const SymbolicValue& a) {
            const auto type = Unwrap(a.trace->builder.TypeOf(a.value));
            std::vector<int> axes(type.shape.size(), -1);
            std::copy_n(type.sharding.axes.begin(),
                        std::min(type.sharding.axes.size(), axes.size()), axes.begin());
            return py::tuple(py::cast(axes));
          },
          "Per dimension, the mesh axis it is cut along, or -1.")
      .def_property_readonly(
          "function", [](const SymbolicValue& a) { return a.trace->name; },
          "The name of the function this value belongs to.")
      .def("__repr__", [](const SymbolicValue& a) {
        return "<atoll.Value of function '" + a.trace->name + "'>";
      });
}

}  // namespace atl::python
