// atoll._atoll: the extension module under the Python package `atoll` (python/atoll/), a
// thin layer over the C++ client API (include/atoll/). The package gives it Python's idioms.
#include <pybind11/pybind11.h>

#include "atoll_version.h"
#include "python/src/bindings.h"
#include "python/src/errors.h"

PYBIND11_MODULE(_atoll, m) {
  m.doc() = "atoll's C++ client library, bound for the Python package `atoll`.";
  // The same string as `atoll --version` prints (cmake/AtollVersion.cmake).
  m.attr("__version__") = ATOLL_VERSION;
  atl::python::BindErrors(m);
  atl::python::BindFunctionBuilder(m);
  auto ops = m.def_submodule("ops", "Every op of the IR, on the values of a traced function.");
  atl::python::BindOps(ops);
  atl::python::BindProgramBuilder(m);
  atl::python::BindClient(m);
}
