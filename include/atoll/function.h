// Compiled functions: computations whose input and output types and shapes are known
// before they run. A FunctionBuilder records one as a straight-line list of ops over
// global (unsharded) shapes; each device of the slice it is registered on runs it on its
// own shard.
//
// Dtypes (atoll/dtypes.def): each op says which it takes and refuses the others when the
// function is built. The float ops take f32 and f64, computed in that precision, and most
// take the storage dtypes bf16 and f16 too, computed in f32 and rounded once into them;
// integer ops take i32 and i64. common/ir/ops.def lists each op's.
//
// Example:
//   atl::FunctionBuilder b("double");
//   auto x = b.Input(atl::DType::kF32, {8});      // split over the slice's devices
//   b.Output(b.Mul(x, 2.0));
//   atl::Result<atl::Function> fn = client.Register(b, slice);
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
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

// Hyper-parameters of FunctionBuilder::AdamUpdate (Adam; a weight decay is AdamW's,
// decoupled from the gradient).
struct AdamOptions {
  double learning_rate = 1e-3;  // >= 0
  double beta1 = 0.9;           // in [0, 1)
  double beta2 = 0.999;         // in [0, 1)
  double epsilon = 1e-8;        // > 0
  double weight_decay = 0.0;    // >= 0
};

// A collective's mesh axis meaning every device of the slice (FunctionBuilder::AllReduceSum).
inline constexpr int kWholeSlice = -1;

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
  // [m,k] x [k,n]; a may be split along rows, b must be replicated. Of one float dtype (bf16
  // and f16: f32 products and sums, the result rounded once).
  Value Matmul(Value a, Value b);
  // op(a) x op(b), op transposing where asked: Matmul(x, w, false, true) is x w^T. The rows
  // of op(a) and the columns of op(b) may be cut along different mesh axes; the contracted
  // dimension may be cut alike in both, giving each device its PARTIAL sum (typed as not
  // cut): AllReduceSum of it is the product. That is how data-parallel weight gradients
  // (x^T dy over row-split x and dy) are made.
  Value Matmul(Value a, Value b, bool transpose_a, bool transpose_b);

  // The unary elementwise ops, one method per row of atoll/unary_ops.def (which says what
  // each computes): Exp, Log, Tanh, Relu, Neg, Sqrt, Rsqrt, Gelu, ... Per element, any float
  // dtype, any sharding.
#define ATOLL_UNARY_OP(Name, name) Value Name(Value a);
#include "atoll/unary_ops.def"
  // dy * gelu'(x), for dy and x of one type.
  Value GeluBackward(Value dy, Value x);
  // x [..., n] + bias [n] on every row; bias is cut like x's last dimension (replicated
  // when that one is not cut).
  Value BiasAdd(Value x, Value bias);
  // Sum or mean over dimension `axis` (negative counts from the end), which is removed.
  // Over a dimension cut over devices each device gets its block's PARTIAL share (the
  // shares of a mean are scaled so that AllReduceSum of them is the global mean). A bf16 or
  // f16 mean is computed in f32 and rounded once.
  Value ReduceSum(Value x, int axis);
  Value ReduceMean(Value x, int axis);
  // Over the last dimension, which must not be cut over devices.
  Value Softmax(Value x);
  // (x - mean) / sqrt(var + eps) * gamma + beta over the last dimension (not cut); f32 or
  // f64, gamma and beta [d] of x's dtype, replicated.
  Value LayerNorm(Value x, Value gamma, Value beta, double eps = 1e-5);
  struct LayerNormGrads {
    Value dx, dgamma, dbeta;  // dgamma, dbeta are partial when x's rows are cut
  };
  LayerNormGrads LayerNormBackward(Value dy, Value x, Value gamma, double eps = 1e-5);
  // Softmax cross-entropy of logits [b,c] (a float dtype) against labels i32 or i64 [b] (the
  // rows cut alike, the classes not cut): the mean loss [] and d loss / d logits, both of the
  // logits' dtype. With the rows cut,
  // the loss is each device's partial share of the global mean (AllReduceSum it) and the
  // gradient is already that of the global mean.
  struct CrossEntropyValues {
    Value loss, dlogits;
  };
  CrossEntropyValues CrossEntropy(Value logits, Value labels);
  // [m,n] -> [n,m]; a cut dimension stays cut along the same mesh axis.
  Value Transpose(Value x);
  // param - learning_rate * grad, for param and grad of one f32 or f64 type (mixed precision:
  // keep f32 master weights and Cast a bf16 gradient to f32 first).
  Value SgdUpdate(Value param, Value grad, double learning_rate);
  // One Adam step of param with grad and the moments m and v (all of one type): the
  // new param, m and v (f32 or f64). `step` is a replicated i32 [] input counting from 1, for the
  // bias corrections: an input rather than a constant of the function, so that one compiled
  // function serves every step.
  struct AdamValues {
    Value param, m, v;
  };
  AdamValues AdamUpdate(Value param, Value grad, Value m, Value v, Value step,
                        const AdamOptions& options = {});

  // Experts, one per device of the slice, each with its own weights, on rows routed to
  // them (ProgramBuilder::Route). Rows may have a dynamic length (kDynamicDim): the unary
  // ops, GeluBackward, BiasAdd, Softmax and SgdUpdate take such rows too. Values f32 or f64,
  // ids i32 or i64.
  // x [m,k] with its rows cut over the slice times w [E,k,n] cut along its first dimension
  // (E = the slice's devices, one group of weights each): each device multiplies its rows
  // by its own [k,n], giving [m,n] cut like x. transpose_w takes w as [E,n,k] (dy w^T).
  Value GroupedMatmul(Value x, Value w, bool transpose_w = false);
  // The gradient of GroupedMatmul's w: each device's x^T dy over its own rows, as its
  // group of [groups,k,n] (x [m,k] and dy [m,n] cut alike).
  Value GroupedWeightGrad(Value x, Value dy, int64_t groups);
  // Row i of values [m,d] added into row ids[i] of a zero [rows,d] (ids i32 [m], cut like
  // the values' rows; each device's partial sum when they are cut). Combines routed rows
  // back per token.
  Value ScatterAddRows(Value values, Value ids, int64_t rows);
  // Rows table[ids[i]] of a replicated table [r,d]: [m,d], cut like ids i32 [m].
  Value GatherRows(Value table, Value ids);

  // Gating tokens on the devices. Both work row by row, so the rows may be cut over the
  // slice (or be routed rows of dynamic length); the last dimension must not be cut.
  // The k largest values of each row of x f32 or f64 [..., n] (1 <= k <= n), best first (the
  // lower index first among equals), and their positions in the row.
  struct TopKValues {
    Value values;   // [..., k] of x's dtype
    Value indices;  // i32 [..., k]
  };
  TopKValues TopK(Value x, int64_t k);
  // Column j of x [m,n] of any dtype: [m], cut like x's rows.
  Value Column(Value x, int64_t j);

  // x's values as `dtype`, any sharding: into a float dtype rounded to nearest even, once
  // (f64 straight to bf16, not through f32); into an integer dtype truncated toward zero (a
  // NaN, an infinity or a value out of range fails the run, naming it). The way in and out of
  // mixed precision: Cast(w, kBF16) for a bf16 matmul, Cast(grad, kF32) for an f32 update.
  Value Cast(Value x, DType dtype);

  // Keeps the device busy for `micros` microseconds, then passes `a` through.
  Value Spin(Value a, double micros);
  // Keeps the elements of the 1-D `a` greater than `threshold`, in order. The result's
  // length depends on the data (its shape is [kDynamicDim]; split, each device filters its
  // own block). Nodes that produce or take such a value are irregular: their outputs
  // cannot be allocated ahead of the data, so they are dispatched sequentially.
  Value Filter(Value a, double threshold);

  // Collectives: each device of a group contributes its local block of `a` (static shape) and
  // gets its block of the result. A group is the devices of the slice that differ only in
  // their coordinate along `mesh_axis`, its members ordered by that coordinate: on a 1-D slice,
  // axis 0 holds them all; on a (data, model) mesh, axis 1 groups each data replica's model
  // shards. A size that does not divide over the axis is refused when the function is
  // registered on its slice.
  //
  // The elementwise sum (max, min, mean: f32) over the group of every device's `a`, which
  // must not be cut along the axis: a PARTIAL value (a sum over a cut dimension) or values
  // that differ per device. kWholeSlice: the group is every device of the slice, and `a` is
  // replicated-typed. Sums add in one fixed order, so every device gets the same bits.
  Value AllReduceSum(Value a, int mesh_axis = kWholeSlice);
  Value AllReduceMax(Value a, int mesh_axis = kWholeSlice);
  Value AllReduceMin(Value a, int mesh_axis = kWholeSlice);
  Value AllReduceMean(Value a, int mesh_axis = kWholeSlice);
  // The dimension of `a` cut along `mesh_axis` made whole: the group's blocks joined in order.
  Value AllGather(Value a, int mesh_axis);
  // The group's sum of `a` (not cut along the axis, like AllReduceSum's), cut along
  // `mesh_axis` on dimension `dim`: each device gets its block of the sum. ZeRO's gradients.
  Value ReduceScatter(Value a, int mesh_axis, int dim);
  // `a`, cut along `mesh_axis` on one dimension, cut along it on dimension `dim` instead (not
  // cut before): the same global value, its blocks exchanged between the group's devices.
  Value AllToAll(Value a, int mesh_axis, int dim);
  // Every device of the group gets the `a` of the one at coordinate `root` (not cut along
  // the axis).
  Value Broadcast(Value a, int mesh_axis, int64_t root);
  // Send/recv between the devices of a group: for each (source, target) pair of coordinates
  // along `mesh_axis` (each at most once as a source and once as a target), the target gets
  // the source's block of `a`; a device no pair targets gets zeros. Cut along the axis, the
  // blocks move along the cut dimension: {{0, 1}, {1, 2}, {2, 3}} shifts a pipeline's stages
  // by one.
  Value CollectivePermute(Value a, int mesh_axis,
                          const std::vector<std::pair<int64_t, int64_t>>& pairs);

  void Output(Value v);

  // Any primitive of the IR by its name ("max", "reshape", "dot_general", ...: a row of the
  // op table common/ir/ops.def, which says what each takes and how its whole-number `params`
  // and its `attr` are laid out), on `operands`. How the front ends reach the jax.lax
  // primitives (atoll.lax in Python, the JAX and ONNX lowerings), as JAX binds a primitive.
  // A name no row has, or operands, params or an attr that the row's rule refuses, is this
  // builder's status(), naming the primitive and what it expected.
  Value Primitive(std::string_view name, const std::vector<Value>& operands,
                  const std::vector<int64_t>& params = {}, double attr = 0.0);

  // A structured control-flow primitive ("while", "scan", "cond": rows of common/ir/ops.def,
  // which lay out their operands and params) that runs `bodies`: functions built beside this
  // one, each taking the values the row hands it (of their operands' exact types) and then
  // its consts. `params` are the row's params after the bodies:
  //   Structured("while", {&cond, &body}, {carry..., cond consts..., body consts...},
  //              {#cond consts, #body consts})
  //   Structured("scan", {&body}, {init..., xs..., consts...}, {#carry, #consts, length,
  //              reverse})
  //   Structured("cond", {&branch0, &branch1}, {index, args..., consts...}, {#consts of each})
  // Returns every result (a while's carry; a scan's carry, then its ys stacked; a branch's
  // outputs), or as many invalid values with the error in status().
  std::vector<Value> Structured(std::string_view name,
                                const std::vector<const FunctionBuilder*>& bodies,
                                const std::vector<Value>& operands,
                                const std::vector<int64_t>& params = {});

  // Function `f`'s ops inlined on `args`, one per input of f, each of that input's dtype,
  // shape and sharding: f's outputs as values of this builder. How a function made by Grad
  // (atoll/grad.h) becomes part of a larger one, as a JAX user calls grad(f) inside a step:
  //   auto loss_and_grads = step.Call(ValueAndGrad(loss, {1}).value(), {x, w});
  //   step.Output(step.SgdUpdate(w, loss_and_grads[1], 0.1));
  // An error (f's own, a wrong argument count or type) is this builder's status(), and the
  // values returned (one per output of f still) are invalid.
  std::vector<Value> Call(const FunctionBuilder& f, const std::vector<Value>& args);

  // What Input took for a value of this builder: its dtype, global shape and sharding.
  struct ValueType {
    DType dtype = DType::kF32;
    Shape shape;
    Sharding sharding;
  };
  Result<ValueType> TypeOf(Value v) const;

  // The first error met while building (a bad Value, mismatched shapes), or OK.
  // Register() reports it too.
  const Status& status() const;

  struct Impl;  // opaque: defined inside the library

 private:
  friend class Client;
  friend struct HandleAccess;  // inside the library (client/internal.h)
  std::unique_ptr<Impl> impl_;
};

}  // namespace atl
