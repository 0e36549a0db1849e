// The parts of the extension module atoll._atoll, one file each (module.cc adds them all).
#pragma once

#include <pybind11/pybind11.h>

namespace atl::python {

void BindFunctionBuilder(pybind11::module_& m);  // function_builder.cc: FunctionBuilder, Value
void BindOps(pybind11::module_& ops);            // ops.cc: every op of the IR, atoll.ops
void BindProgramBuilder(pybind11::module_& m);   // program_builder.cc: ProgramBuilder, Traced
void BindClient(pybind11::module_& m);           // client.cc: connect, Client, Slice, Run, ...

}  // namespace atl::python
