// Jobs: a program described in TOML (see examples/figure2.toml for the format): slices,
// compiled functions as op lists, the calls between them, and the argument values.
// `atoll submit` parses one and runs it through the client library.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "atoll/client.h"

namespace atl {

struct JobSpec {
  struct SliceSpec {
    std::string name;
    uint32_t devices = 1;
    std::string island;  // empty: any
    Shape mesh;          // key `mesh`, its devices in row-major order; empty: 1-D
    std::string kind;    // the devices' kind ("cpu", "sim"); empty: any
  };
  struct InputSpec {
    DType dtype = DType::kF32;
    Shape shape;
    Sharding sharding;
  };
  struct OpSpec {
    std::string op;
    std::vector<std::string> args;  // "in<i>", "op<j>" or a number in decimal
  };
  struct FunctionSpec {
    std::string name;
    std::string slice;
    std::vector<InputSpec> inputs;
    std::vector<OpSpec> ops;
    std::vector<std::string> outputs;  // empty: the last op
  };
  struct ArgSpec {
    std::string name;
    DType dtype = DType::kF32;
    Shape shape;
  };
  struct CallSpec {
    std::string fn;
    std::vector<std::string> args;
    std::vector<std::string> outs;
  };

  std::string name;
  // How many times the program runs, one run after the other, each with the same inputs
  // (key `steps`, 1..2^32, default 1); the results are those of the last run.
  uint64_t steps = 1;
  std::vector<SliceSpec> slices;
  std::vector<FunctionSpec> functions;
  std::vector<ArgSpec> args;
  std::vector<CallSpec> calls;
  std::vector<std::string> returns;
  std::vector<Tensor> inputs;  // one per arg, in order
};

// Parses and checks a job: every name it uses must be defined before use, every count in
// its range (steps 1..2^32, a slice's devices 1..65536, or its mesh's), every shape's
// dimensions at least 1
// and its size countable in int64, every input value fit for its dtype and the values as many
// as its argument's shape holds. Errors name the file, the field, and what is wrong.
Result<JobSpec> ParseJob(const std::string& toml_text, const std::string& origin);
Result<JobSpec> LoadJob(const std::string& path);

// The compiled function `spec` describes, built but not registered: its inputs, its ops in
// order, its outputs. An op is a unary op of atoll/unary_ops.def by its name ("exp",
// "relu", ...) of one value; add, sub, mul or div of two values or of a value and a number;
// matmul of two values; spin of a value and microseconds; cast of a value and a dtype's
// name ("bf16", ...); or a collective of a value and whole numbers: all_reduce_sum, _max,
// _min, _mean (an optional mesh axis, else the whole slice), all_gather (the axis),
// reduce_scatter and all_to_all (the axis and a dimension), broadcast (the axis and the
// root), collective_permute (the axis, then source, target pairs). InvalidArgument names the op
// that is unknown or has the wrong arguments (its index in the function); the builder's own
// errors (types that do not fit the op) are returned as FunctionBuilder::status() says them.
Result<FunctionBuilder> BuildJobFunction(const JobSpec::FunctionSpec& spec);

struct JobResult {
  std::vector<std::string> names;  // the program's returns
  std::vector<Tensor> values;
};

// Called after each step with (steps done, steps in all).
using StepCallback = std::function<void(uint64_t done, uint64_t total)>;

// Builds the functions (BuildJobFunction), creates the slices, registers the functions,
// traces the program, then `job.steps` times submits it and waits (at most `timeout` per step)
// for its results, calling `on_step` (may be empty) after each. A call whose arguments do not
// fit its function ends the job before anything runs, with ProgramBuilder::Call's error
// ("call 1 of 'b': argument 0: expected f32[4], got f32[2]"). A failing step ends the job
// with its error.
Result<JobResult> RunJob(Client& client, const JobSpec& job, std::chrono::milliseconds timeout,
                         const StepCallback& on_step = {});

}  // namespace atl
