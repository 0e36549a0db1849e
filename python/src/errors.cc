#include "python/src/errors.h"

#include <string>
#include <vector>

namespace py = pybind11;

namespace atl::python {

namespace {

// The built-in exception a code's class also derives from, where Python has one that means
// the same, so that `except TimeoutError` catches a wait that ran out.
PyObject* BuiltinBase(Code code) {
  switch (code) {
    case Code::kInvalidArgument:
      return PyExc_ValueError;
    case Code::kDeadlineExceeded:
      return PyExc_TimeoutError;
    case Code::kUnavailable:
      return PyExc_ConnectionError;
    case Code::kPermissionDenied:
      return PyExc_PermissionError;
    default:
      return nullptr;
  }
}

// The class of each code, by its number; index 0 (OK) is atoll.Error itself.
std::vector<py::object>& Classes() {
  static auto* classes = new std::vector<py::object>();  // lives as long as the interpreter
  return *classes;
}

}  // namespace

void BindErrors(py::module_& m) {
  // Named as the package exports them: atoll.NotFound, not atoll._atoll.NotFound.
  const std::string module_name = "atoll";
  py::object error = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
      (module_name + ".Error").c_str(),
      "An atoll call failed. Each status code has its subclass (atoll.InvalidArgument, "
      "atoll.NotFound, ...); str(e) is the message, naming what failed.",
      PyExc_Exception, nullptr));
  if (!error) throw py::error_already_set();
  error.attr("code") = "Unknown";
  m.attr("Error") = error;
  Classes().assign(static_cast<size_t>(Code::kLastCode) + 1, error);
  for (int c = 1; c <= static_cast<int>(Code::kLastCode); ++c) {
    const Code code = static_cast<Code>(c);
    const std::string name(CodeName(code));
    py::tuple bases = BuiltinBase(code) == nullptr
                          ? py::tuple(py::make_tuple(error))
                          : py::tuple(py::make_tuple(error, py::handle(BuiltinBase(code))));
    py::object cls = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
        (module_name + "." + name).c_str(), ("The atoll status code " + name + ".").c_str(),
        bases.ptr(), nullptr));
    if (!cls) throw py::error_already_set();
    cls.attr("code") = name;
    m.attr(name.c_str()) = cls;
    Classes()[c] = cls;
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      const auto code = static_cast<size_t>(e.status().code());
      const py::object& cls = code < Classes().size() ? Classes()[code] : Classes()[0];
      PyErr_SetString(cls.ptr(), e.status().message().c_str());
    }
  });
}

}  // namespace atl::python
