// The client library's private state behind the public handles in include/atoll/.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "atoll/client.h"
#include "atoll/function.h"
#include "atoll/program.h"
#include "common/ir/ir.h"
#include "common/proto/protocol.h"

namespace atl {

struct FunctionBuilder::Impl {
  ir::FunctionDef def;
  Status status;
};

// How many mesh axes a function's inputs name (at least 1): its mesh's rank before it is
// registered on a slice.
int32_t MeshAxesNamed(const ir::FunctionDef& def);
// ir::Validate of a function not yet registered: on a single device seen as a mesh of
// MeshAxesNamed axes (the slice's mesh is known at Register).
Status ValidateUnregistered(ir::FunctionDef& def);

struct Function::Impl {
  uint64_t id = 0;
  ir::FunctionDef def;
  std::vector<ir::TensorType> output_types;
  // Where it runs: virtual device i is slice.devices[i]. Updated in place when the RM
  // remaps the slice, so that every program calling it is lowered onto the new devices.
  mutable proto::SliceInfo slice;
};

// Traced values' kinds.
enum TracedKind : int { kTracedArg = 0, kTracedCall = 1, kTracedRoute = 2 };
// FunctionBuilder values' kinds.
enum ValueKind : int { kValueInput = 0, kValueOp = 1 };

struct Program::Impl {
  struct Call {
    std::shared_ptr<const Function::Impl> fn;
    std::vector<Traced> args;
  };
  // Rows of a call's output sent, each, to the consumer shard its destination names.
  struct Route {
    Traced values;        // [n, ...]
    Traced destinations;  // i32 [n], an output of the same call
    ir::TensorType type;  // what consumers receive: [?, ...], rows split over shards
  };
  std::vector<ir::TensorType> args;  // dtype and global shape of each argument
  std::vector<Call> calls;           // in trace order, which is a topological order
  std::vector<Route> routes;
  std::vector<Traced> results;
};

// The state behind the Function and Program handles, from outside their friends: the
// library's tests make functions without a cluster to register them on, and look at what a
// ProgramBuilder traced.
struct HandleAccess {
  static Function MakeFunction(std::shared_ptr<const Function::Impl> impl) {
    Function f;
    f.impl_ = std::move(impl);
    return f;
  }
  // nullptr for a Program that no builder made.
  static const Program::Impl* ImplOf(const Program& program) { return program.impl_.get(); }
  static const FunctionBuilder::Impl& ImplOf(const FunctionBuilder& builder) {
    return *builder.impl_;
  }
  // A builder holding `def` as it is (the transforms of atoll/grad.h make their own).
  static FunctionBuilder MakeBuilder(ir::FunctionDef def) {
    FunctionBuilder b(def.name);
    b.impl_->def = std::move(def);
    return b;
  }
};

}  // namespace atl
