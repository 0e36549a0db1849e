// Tracing a Python function into a program: ProgramBuilder makes its arguments, the function
// runs on them as Traced values, and calling a compiled function (or route) records a node.
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "atoll/client.h"
#include "python/src/bindings.h"
#include "python/src/symbolic.h"

namespace py = pybind11;

namespace atl::python {

namespace {

// `v` as a value of `trace`; InvalidArgument (raised) when another program traced it.
Traced Own(const ProgramTrace& trace, const TracedValue& v) {
  if (v.trace.get() != &trace) {
    throw StatusError(
        InvalidArgument("a value of another program: a program's calls take its "
                        "own arguments and the results of its own calls"));
  }
  return v.value;
}

}  // namespace

void BindProgramBuilder(py::module_& m) {
  py::class_<Program>(m, "Program",
                      "A traced program: one dataflow graph of calls to compiled functions.")
      .def_property_readonly("num_nodes", &Program::num_nodes)
      .def_property_readonly("num_args", &Program::num_args)
      .def_property_readonly("num_results", &Program::num_results);

  py::class_<TracedValue>(
      m, "Traced",
      "A symbolic value of a program being traced: an argument, a call's result or routed rows.")
      .def("__bool__",
           [](const TracedValue&) -> bool {
             throw py::type_error(
                 "a traced atoll value has no truth value: the program is traced once, so "
                 "Python control flow cannot depend on its values");
           })
      .def("__repr__", [](const TracedValue&) { return std::string("<atoll.Traced>"); });

  py::class_<ProgramTrace, std::shared_ptr<ProgramTrace>>(
      m, "ProgramBuilder",
      "Records a program as calls of compiled functions. atoll.program drives it: you rarely "
      "need it directly.")
      .def(py::init<>())
      .def(
          "arg",
          [](const std::shared_ptr<ProgramTrace>& trace, const std::string& dtype,
             const Shape& shape) {
            const DType type = Unwrap(ParseDType(dtype));
            TracedValue v{trace, trace->builder.Arg(type, shape)};
            ThrowIfError(trace->builder.status());
            return v;
          },
          py::arg("dtype"), py::arg("shape"), "A new argument of the program.")
      .def(
          "call",
          [](const std::shared_ptr<ProgramTrace>& trace, const Function& fn,
             const std::vector<TracedValue>& args) {
            std::vector<Traced> traced;
            for (const auto& a : args) traced.push_back(Own(*trace, a));
            std::vector<Traced> results = trace->builder.Call(fn, traced);
            ThrowIfError(trace->builder.status());
            std::vector<TracedValue> out;
            for (const Traced& r : results) out.push_back({trace, r});
            return out;
          },
          py::arg("function"), py::arg("args"),
          "Records a call of a compiled function; one Traced per output.")
      .def(
          "route",
          [](const std::shared_ptr<ProgramTrace>& trace, const TracedValue& values,
             const TracedValue& destinations) {
            TracedValue v{trace,
                          trace->builder.Route(Own(*trace, values), Own(*trace, destinations))};
            ThrowIfError(trace->builder.status());
            return v;
          },
          py::arg("values"), py::arg("destinations"),
          "Row i of `values` goes to shard destinations[i] of the call that takes the result.")
      .def(
          "build",
          [](ProgramTrace& trace, const std::vector<TracedValue>& results) {
            std::vector<Traced> traced;
            for (const auto& r : results) traced.push_back(Own(trace, r));
            trace.builder.Return(traced);
            return Unwrap(trace.builder.Build());
          },
          py::arg("results"), "Returns `results` and gives the traced program.");
}

}  // namespace atl::python
