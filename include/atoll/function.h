// Compiled functions: computations whose input and output types and shapes are known
// before they run. A FunctionBuilder records one as a straight-line list of ops over
// global (unsharded) shapes; each device of the slice it is registered on runs it on its
// own shard.
//
// Example:
//   atl::FunctionBuilder b("double");
//   auto x = b.Input(atl::DType::kF32, {8});      // split over the slice's devices
//   b.Output(b.Mul(x, 2.0));
//   atl::Result<atl::Function> fn = client.Register(b, slice);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "atoll/status.h"
#include "atoll/tensor.h"

namespace atl {

// How a tensor is laid over a slice's device mesh: each tensor dimension is either cut into
// equal contiguous blocks along one mesh axis, or not cut; mesh axes that no dimension is
// cut along hold replicas. On a 1-D slice, Split(d) puts block i of dimension d on device i.
struct Sharding {
  // Per tensor dimension: the mesh axis it is cut along, or -1. Missing trailing
  // dimensions are not cut.
  std::vector<int> axes;
  static Sharding Split(int dim, int mesh_axis = 0) {
    std::vector<int> axes(dim + 1, -1);
    axes[dim] = mesh_axis;
    return {std::move(axes)};
  }
  static Sharding Replicated() { return {}; }
  static Sharding Axes(std::vector<int> axes) { return {std::move(axes)}; }
};

// A value inside a function being built. Only meaningful with the builder that made it.
struct Value {
  int kind = -1;  // input, op result
  int index = -1;
};

class FunctionBuilder {
 public:
  explicit FunctionBuilder(std::string name);
  ~FunctionBuilder();
  FunctionBuilder(FunctionBuilder&&) noexcept;
  FunctionBuilder& operator=(FunctionBuilder&&) noexcept;

  Value Input(DType dtype, Shape shape, Sharding sharding = Sharding::Split(0));

  Value Add(Value a, Value b);
  Value Add(Value a, double b);
  Value Sub(Value a, Value b);
  Value Sub(Value a, double b);
  Value Mul(Value a, Value b);
  Value Mul(Value a, double b);
  Value Div(Value a, Value b);
  Value Div(Value a, double b);
  // [m,k] x [k,n]; a may be split along rows, b must be replicated.
  Value Matmul(Value a, Value b);
  // Keeps the device busy for `micros` microseconds, then passes `a` through.
  Value Spin(Value a, double micros);
  // Keeps the elements of the 1-D `a` greater than `threshold`, in order. The result's
  // length depends on the data (its shape is [kDynamicDim]; split, each device filters its
  // own block). Nodes that produce or take such a value are irregular: their outputs
  // cannot be allocated ahead of the data, so they are dispatched sequentially.
  Value Filter(Value a, double threshold);
  // A collective over the slice: every device contributes its copy of the replicated `a`
  // and gets the elementwise sum of all of them.
  Value AllReduceSum(Value a);

  void Output(Value v);

  // The first error met while building (a bad Value, mismatched shapes), or OK.
  // Register() reports it too.
  const Status& status() const;

  struct Impl;  // opaque: defined inside the library

 private:
  friend class Client;
  std::unique_ptr<Impl> impl_;
};

}  // namespace atl
