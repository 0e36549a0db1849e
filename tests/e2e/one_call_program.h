// A one-call program for lifecycle tests: `body(x)` registered on `slice`, x a replicated
// f32[2], its result the program's.
#pragma once

#include <functional>
#include <string>

#include "atoll/client.h"

namespace atl::testing {

inline Result<Program> OneCall(Client& client, const Slice& slice, const std::string& name,
                               const std::function<Value(FunctionBuilder&, Value)>& body) {
  FunctionBuilder b(name);
  b.Output(body(b, b.Input(DType::kF32, {2}, Sharding::Replicated())));
  ATOLL_ASSIGN_OR_RETURN(Function fn, client.Register(b, slice));
  ProgramBuilder p;
  p.Return({p.Call(fn, {p.Arg(DType::kF32, {2})})[0]});
  return p.Build();
}

}  // namespace atl::testing
