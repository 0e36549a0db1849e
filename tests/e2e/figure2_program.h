// The Pathways paper's Figure 2 program, traced on a client: a(x)=x*2, b(x)=x+1, c(x)=x/2,
// each over its own 2-device slice; f(v) computes x=a(v), y=b(v), z=a(c(x)) and returns
// (y, z). For v = {1, 2}: y = {2, 3}, z = {2, 4}.
#pragma once

#include <string>

#include "atoll/client.h"

namespace atl::testing {

// x*k, x+k or x/k over a `shape` input, registered on `slice`.
inline Result<Function> Unary(Client& client, const Slice& slice, const std::string& name, char op,
                              double k, Shape shape) {
  FunctionBuilder b(name);
  Value x = b.Input(DType::kF32, shape);
  switch (op) {
    case '*':
      b.Output(b.Mul(x, k));
      break;
    case '+':
      b.Output(b.Add(x, k));
      break;
    case '/':
      b.Output(b.Div(x, k));
      break;
  }
  return client.Register(b, slice);
}

inline Result<Program> TraceFigure2(Client& client, Shape shape) {
  ATOLL_ASSIGN_OR_RETURN(Slice sa, client.CreateSlice(2));
  ATOLL_ASSIGN_OR_RETURN(Slice sb, client.CreateSlice(2));
  ATOLL_ASSIGN_OR_RETURN(Slice sc, client.CreateSlice(2));
  ATOLL_ASSIGN_OR_RETURN(Function a, Unary(client, sa, "a", '*', 2, shape));
  ATOLL_ASSIGN_OR_RETURN(Function b, Unary(client, sb, "b", '+', 1, shape));
  ATOLL_ASSIGN_OR_RETURN(Function c, Unary(client, sc, "c", '/', 2, shape));
  ProgramBuilder p;
  Traced v = p.Arg(DType::kF32, shape);
  Traced x = p.Call(a, {v})[0];
  Traced y = p.Call(b, {v})[0];
  Traced z = p.Call(a, {p.Call(c, {x})[0]})[0];
  p.Return({y, z});
  return p.Build();
}

}  // namespace atl::testing
