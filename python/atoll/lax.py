"""jax.lax's primitives on the values of a traced atoll function, with jax.lax's names,
argument order and semantics (the IR's rows, common/ir/ops.def, say what each takes and how
each behaves on a shard)::

    @atoll.function(s, atoll.f32[4, 8], atoll.f32[8])
    def f(x, b):
        y = lax.broadcast_in_dim(b, (4, 8), (1,))
        return lax.max(x, y)

Broadcasting is explicit, as in jax.lax: operands of a binary primitive share one shape and
dtype. atoll.numpy (to come) builds numpy's broadcasting and type promotion on these. A
primitive whose operands do not fit raises atoll.InvalidArgument naming it and what it
expected, at the line that called it.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple


from . import _atoll
from ._lax_control import cond, fori_loop, scan, switch, while_loop
from ._lax_random import random_bits, threefry2x32
from ._lax_window import (conv_general_dilated, reduce_precision, reduce_window,
                          reduce_window_max, reduce_window_min, reduce_window_sum,
                          select_and_scatter_add)
from ._tracing import tracing_function
from ._types import DType, dtype_named, dtype_of_numpy

Value = _atoll.Value
_ops = _atoll.ops

__all__ = [
    "abs", "acos", "acosh", "add", "argmax", "argmin", "asin", "asinh", "atan", "atan2",
    "atanh", "bitcast_convert_type", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "broadcast_in_dim",
    "broadcasted_iota", "cbrt", "ceil", "clamp", "concatenate", "convert_element_type", "cos",
    "cosh", "cumlogsumexp", "cummax", "cummin", "cumprod", "cumsum", "div", "dot_general", "dynamic_slice",
    "dynamic_update_slice", "eq", "erf", "erf_inv", "erfc", "exp", "exp2", "expand_dims", "expm1",
    "floor", "full", "gather", "ge", "gt", "integer_pow", "iota", "is_finite", "le", "lgamma", "log", "log1p", "logistic", "lt",
    "max", "min", "mul", "ne", "neg", "nextafter", "pad", "population_count", "pow",
    "reduce_and", "reduce_max", "reduce_min", "reduce_or", "reduce_prod", "reduce_sum", "rem",
    "reshape", "rev", "round", "rsqrt", "scatter", "scatter_add", "scatter_max",
    "scatter_min", "scatter_mul", "select_n", "shift_left", "shift_right_arithmetic",
    "shift_right_logical", "sign", "sin", "sinh", "slice", "sort", "sqrt", "squeeze", "sub", "tan",
    "tanh", "top_k", "transpose",
    # control flow (_lax_control.py), windows (_lax_window.py), random bits (_lax_random.py)
    "random_bits", "threefry2x32", "cond", "fori_loop", "scan", "switch", "while_loop", "conv_general_dilated",
    "reduce_precision", "reduce_window", "reduce_window_max", "reduce_window_min",
    "reduce_window_sum", "select_and_scatter_add",
]


def _prim(name: str, *operands: Value, params: Sequence[int] = (), attr: float = 0.0) -> Value:
    return _ops.primitive(name, list(operands), [int(p) for p in params], float(attr))


def _dtype_code(dtype: Any) -> int:
    """The IR's code of a dtype given as an atoll.DType, its name, or a numpy dtype."""
    if isinstance(dtype, DType):
        d = dtype
    elif isinstance(dtype, str) and dtype in ("f32", "i32", "bf16", "f16", "f64", "i64", "bool",
                                             "i8", "u8", "u32"):
        d = dtype_named(dtype)
    else:
        d = dtype_of_numpy(dtype)
    return _CODES[d.name]


# The dtypes' codes: their rows' order in include/atoll/dtypes.def.
_CODES = {name: i for i, name in enumerate(
    ("f32", "i32", "bf16", "f16", "f64", "i64", "bool", "i8", "u8", "u32"))}


# The dtypes jax.lax's add, sub and mul take that the IR's rows do not, and the dtype they
# are computed in here: the narrow integers in i64, wrapped back by the conversion (as
# XLA's integers wrap); the storage floats in f32, rounded once (exact: f32 holds a product
# or sum of two of them before its one rounding, as XLA's CPU computes them too).
_COMPUTED_IN = {"i8": "i64", "u8": "i64", "u32": "i64", "bf16": "f32", "f16": "f32"}


def _arith(op: Any, x: Value, y: Value) -> Value:
    wide = _COMPUTED_IN.get(str(x.dtype)) if isinstance(x, Value) else None
    if wide is None or not isinstance(y, Value):
        return op(x, y)
    widened = op(convert_element_type(x, wide), convert_element_type(y, wide))
    return convert_element_type(widened, x.dtype)


# Elementwise, two operands of one type. add, sub, mul and div are the IR's own rows.
def add(x: Value, y: Value) -> Value: return _arith(_ops.add, x, y)
def sub(x: Value, y: Value) -> Value: return _arith(_ops.sub, x, y)
def mul(x: Value, y: Value) -> Value: return _arith(_ops.mul, x, y)
def div(x: Value, y: Value) -> Value: return _ops.div(x, y)
def max(x: Value, y: Value) -> Value: return _prim("max", x, y)  # noqa: A001
def min(x: Value, y: Value) -> Value: return _prim("min", x, y)  # noqa: A001
def rem(x: Value, y: Value) -> Value: return _prim("rem", x, y)
def pow(x: Value, y: Value) -> Value: return _prim("pow", x, y)  # noqa: A001
def atan2(x: Value, y: Value) -> Value: return _prim("atan2", x, y)
def nextafter(x: Value, y: Value) -> Value: return _prim("nextafter", x, y)
def bitwise_and(x: Value, y: Value) -> Value: return _prim("and", x, y)
def bitwise_or(x: Value, y: Value) -> Value: return _prim("or", x, y)
def bitwise_xor(x: Value, y: Value) -> Value: return _prim("xor", x, y)
def shift_left(x: Value, y: Value) -> Value: return _prim("shift_left", x, y)
def shift_right_logical(x: Value, y: Value) -> Value: return _prim("shift_right_logical", x, y)
def shift_right_arithmetic(x: Value, y: Value) -> Value:
    return _prim("shift_right_arithmetic", x, y)
def eq(x: Value, y: Value) -> Value: return _prim("eq", x, y)
def ne(x: Value, y: Value) -> Value: return _prim("ne", x, y)
def lt(x: Value, y: Value) -> Value: return _prim("lt", x, y)
def le(x: Value, y: Value) -> Value: return _prim("le", x, y)
def gt(x: Value, y: Value) -> Value: return _prim("gt", x, y)
def ge(x: Value, y: Value) -> Value: return _prim("ge", x, y)


# Elementwise, one operand. exp, log, tanh, neg, sqrt, rsqrt and logistic are the float rows
# of include/atoll/unary_ops.def.
def exp(x: Value) -> Value: return _ops.exp(x)
def log(x: Value) -> Value: return _ops.log(x)
def tanh(x: Value) -> Value: return _ops.tanh(x)
def sqrt(x: Value) -> Value: return _ops.sqrt(x)
def rsqrt(x: Value) -> Value: return _ops.rsqrt(x)
def logistic(x: Value) -> Value: return _ops.sigmoid(x)
def neg(x: Value) -> Value: return _ops.neg(x)
def bitwise_not(x: Value) -> Value: return _prim("not", x)
def population_count(x: Value) -> Value: return _prim("population_count", x)
def abs(x: Value) -> Value: return _prim("abs", x)  # noqa: A001
def sign(x: Value) -> Value: return _prim("sign", x)
def floor(x: Value) -> Value: return _prim("floor", x)
def ceil(x: Value) -> Value: return _prim("ceil", x)
def is_finite(x: Value) -> Value: return _prim("is_finite", x)
def exp2(x: Value) -> Value: return _prim("exp2", x)
def log1p(x: Value) -> Value: return _prim("log1p", x)
def expm1(x: Value) -> Value: return _prim("expm1", x)
def sin(x: Value) -> Value: return _prim("sin", x)
def cos(x: Value) -> Value: return _prim("cos", x)
def tan(x: Value) -> Value: return _prim("tan", x)
def asin(x: Value) -> Value: return _prim("asin", x)
def acos(x: Value) -> Value: return _prim("acos", x)
def atan(x: Value) -> Value: return _prim("atan", x)
def sinh(x: Value) -> Value: return _prim("sinh", x)
def cosh(x: Value) -> Value: return _prim("cosh", x)
def asinh(x: Value) -> Value: return _prim("asinh", x)
def acosh(x: Value) -> Value: return _prim("acosh", x)
def atanh(x: Value) -> Value: return _prim("atanh", x)
def cbrt(x: Value) -> Value: return _prim("cbrt", x)
def erf(x: Value) -> Value: return _prim("erf", x)
def erfc(x: Value) -> Value: return _prim("erfc", x)
def lgamma(x: Value) -> Value: return _prim("lgamma", x)
def erf_inv(x: Value) -> Value: return _prim("erf_inv", x)


def round(x: Value, rounding_method: int = 0) -> Value:  # noqa: A001
    """jax.lax.round: 0 (AWAY_FROM_ZERO, the default) or 1 (TO_NEAREST_EVEN)."""
    method = int(rounding_method)
    if method not in (0, 1):
        raise _atoll.InvalidArgument(f"round: rounding_method must be 0 (away from zero) or 1 "
                                     f"(to nearest even), got {rounding_method!r}")
    return _prim("round_away" if method == 0 else "round_even", x)


def select_n(which: Value, *cases: Value) -> Value:
    return _prim("select_n", which, *cases)


def clamp(min: Value, x: Value, max: Value) -> Value:  # noqa: A002
    return _prim("clamp", min, x, max)


def convert_element_type(operand: Value, new_dtype: Any) -> Value:
    return _prim("convert_element_type", operand, attr=_dtype_code(new_dtype))


def reshape(operand: Value, new_sizes: Sequence[int],
            dimensions: Optional[Sequence[int]] = None) -> Value:
    if dimensions is not None and tuple(dimensions) != tuple(range(len(operand.shape))):
        operand = transpose(operand, dimensions)
    return _prim("reshape", operand, params=new_sizes)


def broadcast_in_dim(operand: Value, shape: Sequence[int], broadcast_dimensions: Sequence[int],
                     cut: Optional[Sequence[int]] = None) -> Value:
    """jax.lax.broadcast_in_dim. ``cut`` (atoll's own): per result dimension, the mesh axis
    it is cut along where the operand broadcasts it (a new dimension, or one of size 1), -1
    for none; so that a replicated value meets a cut one in an elementwise op."""
    code = 0
    for d, axis in enumerate(cut or ()):
        if axis >= 0:
            code |= (axis + 1) << (4 * d)
    return _prim("broadcast_in_dim", operand, params=[*shape, *broadcast_dimensions],
                 attr=float(code))


def transpose(operand: Value, permutation: Sequence[int]) -> Value:
    return _prim("transpose_nd", operand, params=permutation)


def squeeze(array: Value, dimensions: Sequence[int]) -> Value:
    rank = len(array.shape)
    drop = {d % rank for d in dimensions}
    return reshape(array, [s for d, s in enumerate(array.shape) if d not in drop])


def expand_dims(array: Value, dimensions: Sequence[int]) -> Value:
    # A broadcast, not a reshape: it moves each dimension (and its cut over devices) to its
    # new place, where reshape keeps a cut only on dimensions that stay where they are.
    shape = list(array.shape)
    rank = len(shape) + len(dimensions)
    new = sorted(d % rank for d in dimensions)
    for d in new:
        shape.insert(d, 1)
    return broadcast_in_dim(array, shape, [d for d in range(rank) if d not in new])


def slice(operand: Value, start_indices: Sequence[int],  # noqa: A001
          limit_indices: Sequence[int], strides: Optional[Sequence[int]] = None) -> Value:
    strides = strides if strides is not None else [1] * len(start_indices)
    return _prim("slice", operand, params=[*start_indices, *limit_indices, *strides])


def concatenate(operands: Sequence[Value], dimension: int) -> Value:
    return _prim("concatenate", *operands, attr=dimension)


def pad(operand: Value, padding_value: Value,
        padding_config: Sequence[Tuple[int, int, int]]) -> Value:
    low = [c[0] for c in padding_config]
    high = [c[1] for c in padding_config]
    interior = [c[2] for c in padding_config]
    return _prim("pad", operand, padding_value, params=[*low, *high, *interior])


def rev(operand: Value, dimensions: Sequence[int]) -> Value:
    return _prim("rev", operand, params=dimensions)


def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int) -> Value:
    of = tracing_function.get()
    if of is None:
        raise TypeError("atoll.lax.iota is called outside a traced function with inputs")
    return _ops.primitive_of(of, "iota", [int(s) for s in shape] + [int(dimension)],
                             float(_dtype_code(dtype)))


def iota(dtype: Any, size: int) -> Value:
    return broadcasted_iota(dtype, (size,), 0)


def reduce_sum(operand: Value, axes: Sequence[int]) -> Value:
    """The sum over ``axes``: one reduce_sum of the IR per axis, the highest first."""
    for axis in sorted((a % len(operand.shape) for a in axes), reverse=True):
        operand = _ops.reduce_sum(operand, axis)
    return operand


def reduce_max(operand: Value, axes: Sequence[int]) -> Value:
    return _prim("reduce_max", operand, params=axes)


def reduce_min(operand: Value, axes: Sequence[int]) -> Value:
    return _prim("reduce_min", operand, params=axes)


def reduce_prod(operand: Value, axes: Sequence[int]) -> Value:
    return _prim("reduce_prod", operand, params=axes)


def reduce_and(operand: Value, axes: Sequence[int]) -> Value:
    return _prim("reduce_and", operand, params=axes)


def reduce_or(operand: Value, axes: Sequence[int]) -> Value:
    return _prim("reduce_or", operand, params=axes)


def argmax(operand: Value, axis: int, index_dtype: Any) -> Value:
    return _prim("argmax", operand, params=[axis], attr=_dtype_code(index_dtype))


def argmin(operand: Value, axis: int, index_dtype: Any) -> Value:
    return _prim("argmin", operand, params=[axis], attr=_dtype_code(index_dtype))


def dot_general(lhs: Value, rhs: Value, dimension_numbers: Any,
                precision: Any = None, preferred_element_type: Any = None) -> Value:
    """jax.lax.dot_general: dimension_numbers is ((lhs_contracting, rhs_contracting),
    (lhs_batch, rhs_batch)); the result's dtype is preferred_element_type or the operands'."""
    (lc, rc), (lb, rb) = dimension_numbers
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise _atoll.InvalidArgument(f"dot_general: dimension_numbers {dimension_numbers!r} pair "
                                     "unequal lists")
    params = [len(lc), *lc, *rc, len(lb), *lb, *rb]
    attr = -1 if preferred_element_type is None else _dtype_code(preferred_element_type)
    return _prim("dot_general", lhs, rhs, params=params, attr=attr)


def integer_pow(x: Value, y: int) -> Value:
    return _prim("integer_pow", x, attr=int(y))


def _cumulative(name: str, operand: Value, axis: int, reverse: bool) -> Value:
    return _prim(name, operand, params=[axis % len(operand.shape)], attr=1 if reverse else 0)


def cumsum(operand: Value, axis: int = 0, reverse: bool = False) -> Value:
    return _cumulative("cumsum", operand, axis, reverse)


def cumprod(operand: Value, axis: int = 0, reverse: bool = False) -> Value:
    return _cumulative("cumprod", operand, axis, reverse)


def cummax(operand: Value, axis: int = 0, reverse: bool = False) -> Value:
    return _cumulative("cummax", operand, axis, reverse)


def cummin(operand: Value, axis: int = 0, reverse: bool = False) -> Value:
    return _cumulative("cummin", operand, axis, reverse)


def cumlogsumexp(operand: Value, axis: int = 0, reverse: bool = False) -> Value:
    """log(cumsum(exp(operand))) along axis, computed without overflow (floats only)."""
    return _cumulative("cumlogsumexp", operand, axis, reverse)


def dynamic_slice(operand: Value, start_indices: Sequence[Value],
                  slice_sizes: Sequence[int]) -> Value:
    """The starts are traced [] i32 or i64 values (function inputs or results); a negative one
    counts from the end, as in jax.lax.dynamic_slice."""
    starts = [_normalized_start(s, n) for s, n in zip(start_indices, operand.shape)]
    return _prim("dynamic_slice", operand, *starts, params=slice_sizes)


def dynamic_update_slice(operand: Value, update: Value,
                         start_indices: Sequence[Value]) -> Value:
    starts = [_normalized_start(s, n) for s, n in zip(start_indices, operand.shape)]
    return _prim("dynamic_update_slice", operand, update, *starts)


def bitcast_convert_type(operand: Value, new_dtype: Any) -> Value:
    return _prim("bitcast_convert_type", operand, attr=_dtype_code(new_dtype))


def _mode(mode: Any, what: str) -> int:
    """jax's GatherScatterMode (or its name) as the IR's attr: 0 clip, 1 fill or drop.
    PROMISE_IN_BOUNDS is taken as clip; None is jax's default, FILL_OR_DROP."""
    name = getattr(mode, "name", mode)
    name = "fill_or_drop" if name is None else str(name).lower()
    if name in ("clip", "promise_in_bounds"):
        return 0
    if name in ("fill", "fill_or_drop", "drop"):
        return 1
    raise _atoll.InvalidArgument(f"{what}: mode {mode!r} is not clip, fill_or_drop or "
                                 "promise_in_bounds")


def _dims(dimension_numbers: Any, name: str) -> Tuple[int, ...]:
    return tuple(int(d) for d in (getattr(dimension_numbers, name, ()) or ()))


def _unbatched(what: str, operand: Value, indices: Value, dimension_numbers: Any,
               fields: Tuple[str, str, str], indices_batching: str,
               slice_sizes: Optional[Sequence[int]] = None) -> Tuple[Value, list]:
    """The indices and dimension lists of a gather or scatter with batching dimensions as
    one without (as XLA's expander rewrites them): each operand batching dimension becomes
    one more indexed dimension (collapsed, or inserted), indexed by the position along its
    indices batching dimension, appended to every index vector. `fields` names the window,
    collapsed (inserted) and index-map lists. Positions are this shard's: a batch cut alike
    on both leaves each shard's gather its own block (the rule refuses the cut indexed
    dimension otherwise, naming its axis)."""
    window, collapsed, index_map = (_dims(dimension_numbers, f) for f in fields)
    ob = _dims(dimension_numbers, "operand_batching_dims")
    ib = _dims(dimension_numbers, indices_batching)
    if len(ob) != len(ib):
        raise _atoll.InvalidArgument(
            f"{what}: operand_batching_dims {list(ob)} and {indices_batching} {list(ib)} "
            "must be as many")
    for o, i in zip(ob, ib):
        if not (0 <= o < len(operand.shape) and 0 <= i < len(indices.shape) - 1):
            raise _atoll.InvalidArgument(
                f"{what}: batching dimensions {o} (operand rank {len(operand.shape)}) and {i} "
                f"(indices rank {len(indices.shape)}, whose last dimension is the index "
                "vector) are out of range")
        if operand.shape[o] != indices.shape[i]:
            raise _atoll.InvalidArgument(
                f"{what}: operand batching dimension {o} has size {operand.shape[o]} but "
                f"indices batching dimension {i} has size {indices.shape[i]}")
        if slice_sizes is not None and int(slice_sizes[o]) != 1:
            raise _atoll.InvalidArgument(
                f"{what}: slice_sizes[{o}] must be 1 on operand batching dimension {o}, got "
                f"{slice_sizes[o]}")
    if ob:
        for d, axis in enumerate(indices.split):
            if axis >= 0:
                # Each shard's positions along a cut batch would index its own block, which
                # the collapsed dimension they index could not say.
                raise _atoll.InvalidArgument(
                    f"{what}: with batching dimensions the indices must be whole, but their "
                    f"dimension {d} is cut along mesh axis {axis}")
        batch_shape = tuple(indices.shape[:-1])
        columns = [indices] + [broadcasted_iota(indices.dtype, batch_shape + (1,), d)
                               for d in ib]
        indices = concatenate(columns, len(indices.shape) - 1)
    params = [len(window), *window, len(collapsed) + len(ob), *(sorted(collapsed + ob) if ob else collapsed),
              len(index_map) + len(ob), *index_map, *ob]
    return indices, params


def gather(operand: Value, start_indices: Value, dimension_numbers: Any,
           slice_sizes: Sequence[int], *, unique_indices: bool = False,
           indices_are_sorted: bool = False, mode: Any = None, fill_value: Any = None) -> Value:
    """jax.lax.gather, dimension_numbers a jax.lax.GatherDimensionNumbers (or anything with
    its fields, batching dimensions included); the index vector is start_indices' last
    dimension, as in jax."""
    if fill_value is not None:
        raise _atoll.InvalidArgument("gather: only jax's default fill_value is supported yet")
    indices, params = _unbatched(
        "gather", operand, start_indices, dimension_numbers,
        ("offset_dims", "collapsed_slice_dims", "start_index_map"),
        "start_indices_batching_dims", slice_sizes)
    ob = _dims(dimension_numbers, "operand_batching_dims")
    if any(operand.shape[d] == 0 for d in ob):
        # Nothing to gather; jax takes a slice of 1 from an empty batching dimension, which
        # the collapsed dimension it becomes here would refuse.
        return full(_gather_shape(start_indices, dimension_numbers, slice_sizes), 0,
                    operand.dtype)
    return _prim("gather", operand, indices, params=params + [int(s) for s in slice_sizes],
                 attr=_mode(mode, "gather"))


def _gather_shape(indices: Value, dimension_numbers: Any,
                  slice_sizes: Sequence[int]) -> Tuple[int, ...]:
    """jax.lax.gather's result shape: the window sizes at offset_dims, the indices' batch
    dimensions in order around them."""
    offset = _dims(dimension_numbers, "offset_dims")
    dropped = set(_dims(dimension_numbers, "collapsed_slice_dims") +
                  _dims(dimension_numbers, "operand_batching_dims"))
    windows = iter(int(s) for d, s in enumerate(slice_sizes) if d not in dropped)
    batch = iter(indices.shape[:-1])
    rank = len(offset) + len(indices.shape) - 1
    return tuple(next(windows) if d in offset else next(batch) for d in range(rank))


def _scatter(name: str, operand: Value, scatter_indices: Value, updates: Value,
             dimension_numbers: Any, mode: Any) -> Value:
    indices, params = _unbatched(
        name, operand, scatter_indices, dimension_numbers,
        ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims"),
        "scatter_indices_batching_dims")
    if any(operand.shape[d] == 0 for d in _dims(dimension_numbers, "operand_batching_dims")):
        return operand  # nothing to update (see gather)
    return _prim(name, operand, indices, updates, params=params, attr=_mode(mode, name))


def _scatter_with(name: str) -> Any:
    def scatter_fn(operand: Value, scatter_indices: Value, updates: Value,
                   dimension_numbers: Any, *, indices_are_sorted: bool = False,
                   unique_indices: bool = False, mode: Any = None) -> Value:
        return _scatter(name, operand, scatter_indices, updates, dimension_numbers, mode)

    scatter_fn.__name__ = name
    scatter_fn.__doc__ = f"jax.lax.{name}, batching dimensions included."
    return scatter_fn


scatter = _scatter_with("scatter")
scatter_add = _scatter_with("scatter_add")
scatter_mul = _scatter_with("scatter_mul")
scatter_min = _scatter_with("scatter_min")
scatter_max = _scatter_with("scatter_max")


def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1) -> Any:
    """jax.lax.sort: one value, or a sequence of values sorted together by the first
    num_keys (a tuple back); always stable."""
    single = isinstance(operand, Value)
    operands = [operand] if single else list(operand)
    dim = dimension % len(operands[0].shape)
    out = tuple(_prim("sort", *operands, params=[dim, num_keys, i]) for i in range(len(operands)))
    return out[0] if single else out


def top_k(operand: Value, k: int) -> Tuple[Value, Value]:
    """jax.lax.top_k: the k largest along the last dimension, best first, and their i32
    positions (the lower position first among equals)."""
    return tuple(_ops.top_k(operand, k))  # type: ignore[return-value]


def full(shape: Sequence[int], fill_value: float, dtype: Any) -> Value:
    """jax.lax.full: `shape` of `dtype`, every element fill_value (which the dtype must hold)."""
    of = tracing_function.get()
    if of is None:
        raise TypeError("atoll.lax.full is called outside a traced function with inputs")
    return _ops.primitive_of(of, "full", [_dtype_code(dtype), *[int(s) for s in shape]],
                             float(fill_value))


def _normalized_start(start: Value, size: int) -> Value:
    """A negative start counts from the end, as jax.lax.dynamic_slice's wrapper makes it
    (allow_negative_indices) before the primitive clamps it."""
    zero = full((), 0, start.dtype)
    return select_n(lt(start, zero), start, add(start, full((), size, start.dtype)))
