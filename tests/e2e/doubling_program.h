// A one-call program doubling f32[n], for tests about memory and quotas: its argument is put
// into the store of the slice's host and its result reserved there, 8n bytes in all.
#pragma once

#include <vector>

#include "atoll/client.h"

namespace atl::testing {

inline Result<Program> Doubling(Client& client, const Slice& slice, int64_t n) {
  FunctionBuilder b("double");
  b.Output(b.Mul(b.Input(DType::kF32, {n}), 2.0));
  ATOLL_ASSIGN_OR_RETURN(Function f, client.Register(b, slice));
  ProgramBuilder p;
  p.Return({p.Call(f, {p.Arg(DType::kF32, {n})})[0]});
  return p.Build();
}

// f32[n] with every element `value`.
inline Tensor Filled(int64_t n, float value) {
  return Tensor::F32({n}, std::vector<float>(static_cast<size_t>(n), value));
}

}  // namespace atl::testing
