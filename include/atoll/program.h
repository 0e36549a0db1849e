// Tracing: a block of calls to compiled functions becomes ONE dataflow program, whose
// nodes are sharded computations (one node per call, whatever its shard count) and whose
// edges are sharded buffers. Nothing runs while tracing.
//
// Example (the Pathways paper's Figure 2):
//   atl::ProgramBuilder p;
//   auto v = p.Arg(atl::DType::kF32, {2});
//   auto x = p.Call(a, {v})[0];
//   auto y = p.Call(b, {v})[0];
//   auto z = p.Call(a, {p.Call(c, {x})[0]})[0];
//   p.Return({y, z});
//   atl::Result<atl::Program> program = p.Build();
#pragma once

#include <memory>
#include <vector>

#include "atoll/function.h"
#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl {

class Function;

// A symbolic value in a program being traced: an argument or a call's output.
struct Traced {
  int kind = -1;  // argument, call output, routed rows
  int index = -1;
  int output = 0;
};

class Program {
 public:
  Program() = default;
  size_t num_nodes() const;
  size_t num_args() const;
  size_t num_results() const;

  struct Impl;  // opaque: defined inside the library

 private:
  friend class ProgramBuilder;
  friend class Client;
  friend struct HandleAccess;  // inside the library (client/internal.h)
  std::shared_ptr<const Impl> impl_;
};

class ProgramBuilder {
 public:
  ProgramBuilder();
  ~ProgramBuilder();

  // An argument of the program. A shape with a negative dimension, or too many elements or
  // bytes to count in int64, is an error (status()).
  Traced Arg(DType dtype, Shape shape);
  // Sparse, data-dependent exchange (mixture-of-experts routing): row i of `values` goes to
  // the shard `destinations[i]` of whichever call takes the result, and nowhere else. Both
  // must be outputs of one call, `destinations` i32 [n] for `values` [n, ...]. The consumer's
  // input is [kDynamicDim, ...] split along dimension 0: each shard gets the rows sent to
  // it, in producer-shard then row order, possibly none. Irregular: dispatched sequentially.
  Traced Route(Traced values, Traced destinations);
  // Records a call; returns one Traced per output of `fn`. Arguments that do not fit `fn`
  // (their count, or one's dtype or shape) record nothing and return no values: the error
  // (status()) names the call by its index among the calls and its function, the argument by
  // its index, and both types: "call 2 of 'a': argument 0: expected f32[2,3], got f32[4]".
  std::vector<Traced> Call(const Function& fn, const std::vector<Traced>& args);
  void Return(const std::vector<Traced>& results);

  // The first error met while tracing, or OK; after an error nothing more is recorded.
  const Status& status() const;
  // The traced program, or the first error met while tracing.
  Result<Program> Build() const;

 private:
  std::shared_ptr<Program::Impl> impl_;
  Status status_;
};

}  // namespace atl
