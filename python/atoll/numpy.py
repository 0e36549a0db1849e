"""jax.numpy's functions on the values of a traced atoll function, as compositions of
atoll.lax's primitives: numpy broadcasting (through broadcast_in_dim), jax's type promotion
(Python scalars are weakly typed), axis and keepdims arguments, and the numpy-style methods
and operators of traced values (indexing, ``.reshape``, ``.astype``, ``.T``, comparisons,
``@`` with batching), installed on atoll.Value when this module is imported::

    import atoll.numpy as jnp

    @atoll.function(s, atoll.f32[4, 64, 128])
    def f(x):
        return jnp.tanh(x @ jnp.ones((128, 32))).mean(axis=-1, keepdims=True)

Constants (numpy arrays, Python numbers) become ops of the function: a uniform one is one
`full`, another is built element by element, so large tables should be inputs instead.
"""

from __future__ import annotations

import builtins
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _atoll
from . import lax
from ._tracing import tracing_function

Value = _atoll.Value

__all__ = [
    "abs", "add", "all", "any", "arange", "argmax", "argmin", "asarray", "broadcast_to",
    "clip", "concatenate", "cos", "cumsum", "divide", "einsum", "equal", "exp", "expand_dims",
    "float32", "float64", "floor_divide", "greater", "greater_equal", "int32", "int64", "less",
    "less_equal", "log", "log_softmax", "logical_and", "logical_not", "logical_or", "matmul",
    "max", "maximum", "mean", "min", "minimum", "multiply", "negative", "not_equal", "one_hot",
    "ones", "pad", "power", "prod", "reshape", "result_type", "sin", "softmax", "sort", "sqrt",
    "square", "squeeze", "stack", "subtract", "sum", "swapaxes", "take", "tanh", "transpose",
    "tril", "triu", "var", "where", "zeros",
]

float32, float64, int32, int64 = np.float32, np.float64, np.int32, np.int64

_NUMPY = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64,
          "bool": np.bool_, "i8": np.int8, "u8": np.uint8, "u32": np.uint32, "f16": np.float16}
_ORDER = ["bool", "u8", "u32", "i8", "i32", "i64", "bf16", "f16", "f32", "f64"]


def _name(dtype: Any) -> str:
    """An atoll dtype name from a name, a numpy dtype or a Python type."""
    if isinstance(dtype, str) and dtype in _ORDER:
        return dtype
    if dtype is float:
        return "f32"
    if dtype is int:
        return "i32"
    if dtype is bool:
        return "bool"
    d = np.dtype(dtype)
    if d.name == "bfloat16":
        return "bf16"
    for name, t in _NUMPY.items():
        if np.dtype(t) == d:
            return name
    raise _atoll.InvalidArgument(f"dtype {d} has no atoll dtype")


def _kind(name: str) -> str:
    return "b" if name == "bool" else "u" if name.startswith("u") else (
        "i" if name.startswith("i") else "f")


def _promote(a: str, b: str) -> str:
    """jax.numpy.promote_types on atoll's dtypes (a signed and an unsigned integer go to the
    next signed width atoll has; bf16 with f16 is f32)."""
    if a == b:
        return a
    ka, kb = _kind(a), _kind(b)
    if "b" in (ka, kb):
        return b if ka == "b" else a
    if ka == "f" or kb == "f":
        if ka == kb:
            return "f32" if {a, b} == {"bf16", "f16"} else builtins.max(a, b, key=_ORDER.index)
        return a if ka == "f" else b
    if ka == kb:
        return builtins.max(a, b, key=_ORDER.index)
    unsigned, signed = (a, b) if ka == "u" else (b, a)
    width = {"u8": 8, "u32": 32}[unsigned]
    return signed if {"i8": 8, "i32": 32, "i64": 64}[signed] > width else (
        "i32" if width == 8 else "i64")


def result_type(*args: Any) -> str:
    """The dtype jax.numpy gives a function of ``args``: the strong dtypes promoted, then the
    weakly typed Python scalars (an int joins any number; a float makes integers f32)."""
    strong: Optional[str] = None
    weak = "bool"
    for a in args:
        if isinstance(a, Value):
            d = a.dtype
        elif isinstance(a, (bool, np.bool_)) and not isinstance(a, np.ndarray):
            weak = _promote(weak, "bool")
            continue
        elif isinstance(a, int):
            weak = _promote(weak, "i32")
            continue
        elif isinstance(a, float):
            weak = _promote(weak, "f32")
            continue
        else:
            d = _name(np.asarray(a).dtype)
        strong = d if strong is None else _promote(strong, d)
    if strong is None:
        return weak
    if _kind(weak) == "f" and _kind(strong) != "f":
        return "f32"
    if _kind(weak) == "i" and _kind(strong) == "b":
        return "i32"
    return strong


def _anchor(args: Sequence[Any]) -> Value:
    for a in args:
        if isinstance(a, Value):
            return a
    of = tracing_function.get()
    if of is None:
        raise TypeError("atoll.numpy needs a traced value, or to be called inside a traced "
                        "function")
    return of


def asarray(x: Any, dtype: Any = None) -> Value:
    """A traced value of ``x``: a value (cast to dtype), or a constant made in the function
    being traced."""
    if isinstance(x, Value):
        return x if dtype is None else x.astype(dtype)
    name = _name(dtype) if dtype is not None else result_type(x)
    arr = np.asarray(x)
    token = tracing_function.set(_anchor([x]))
    try:
        flat = arr.ravel()
        if flat.size and (flat == flat[0]).all():
            return lax.full(arr.shape, float(flat[0]), name)
        if flat.size > 4096:
            raise _atoll.InvalidArgument(
                f"a constant of {flat.size} distinct elements: pass it as an input instead")
        pieces = [lax.full((1,), float(v), name) for v in flat]
        joined = pieces[0] if len(pieces) == 1 else lax.concatenate(pieces, 0)
        return lax.reshape(joined, arr.shape)
    finally:
        tracing_function.reset(token)


def _broadcast_shapes(*shapes: Tuple[int, ...]) -> Tuple[int, ...]:
    rank = builtins.max(len(s) for s in shapes)
    out = []
    for d in range(rank):
        sizes = {s[d - rank + len(s)] for s in shapes if d - rank + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise _atoll.InvalidArgument(f"shapes {list(shapes)} do not broadcast together")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_to(x: Value, shape: Sequence[int], cut: Optional[Sequence[int]] = None) -> Value:
    """numpy.broadcast_to. ``cut``: per dimension of ``shape``, the mesh axis the result is
    cut along where x broadcasts that dimension (so that it meets a value cut there)."""
    shape = tuple(shape)
    if tuple(x.shape) == shape:
        return x
    offset = len(shape) - len(x.shape)
    wanted = [-1] * len(shape)
    for d, axis in enumerate(cut or ()):
        if d < offset or x.shape[d - offset] != shape[d]:
            wanted[d] = axis
    return lax.broadcast_in_dim(x, shape, tuple(range(offset, len(shape))), cut=wanted)


def _cuts(values: Sequence[Value], shape: Tuple[int, ...], core: int = 0) -> List[int]:
    """Per dimension of the broadcast ``shape``, the mesh axis a value cuts it along; with
    ``core``, ``shape`` broadcasts each value's dimensions but its last ``core``."""
    cut = [-1] * len(shape)
    for v in values:
        rank = len(v.shape) - core
        for i, axis in enumerate(v.split[:rank]):
            if axis >= 0:
                cut[len(shape) - rank + i] = axis
    return cut


def _operands(*args: Any, dtype: Optional[str] = None) -> List[Value]:
    """args as values of one dtype (promoted, or `dtype`) and one broadcast shape."""
    to = dtype or result_type(*args)
    anchor = _anchor(args)
    values = []
    for a in args:
        if not isinstance(a, Value):
            token = tracing_function.set(anchor)
            try:
                a = asarray(a, to)
            finally:
                tracing_function.reset(token)
        values.append(a if a.dtype == to else lax.convert_element_type(a, to))
    shape = _broadcast_shapes(*(tuple(v.shape) for v in values))
    cut = _cuts(values, shape)
    return [broadcast_to(v, shape, cut) for v in values]


def _binary(prim: Any, dtype: Optional[str] = None) -> Any:
    def f(x: Any, y: Any) -> Value:
        a, b = _operands(x, y, dtype=dtype)
        return prim(a, b)
    return f


add, subtract, multiply = _binary(lax.add), _binary(lax.sub), _binary(lax.mul)
maximum, minimum, power = _binary(lax.max), _binary(lax.min), _binary(lax.pow)
equal, not_equal = _binary(lax.eq), _binary(lax.ne)
less, less_equal, greater, greater_equal = (_binary(lax.lt), _binary(lax.le), _binary(lax.gt),
                                            _binary(lax.ge))
logical_and, logical_or = _binary(lax.bitwise_and, "bool"), _binary(lax.bitwise_or, "bool")


def divide(x: Any, y: Any) -> Value:
    """True division: integers divide as f32, as jax.numpy.divide."""
    to = result_type(x, y)
    return _binary(lax.div, "f32" if _kind(to) != "f" else to)(x, y)


def floor_divide(x: Any, y: Any) -> Value:
    a, b = _operands(x, y)
    if _kind(a.dtype) == "f":
        return lax.floor(lax.div(a, b))
    # Integers: C's truncating quotient, one less where the signs differ and it is inexact.
    q = lax.div(a, b)
    zero = asarray(0, a.dtype)
    zero = broadcast_to(zero, a.shape, a.split)
    inexact = lax.ne(lax.rem(a, b), zero)
    differ = lax.ne(lax.lt(a, zero), lax.lt(b, zero))
    fix = lax.bitwise_and(inexact, differ)
    return lax.select_n(fix, q, lax.sub(q, broadcast_to(asarray(1, a.dtype), a.shape, a.split)))


def where(condition: Any, x: Any, y: Any) -> Value:
    c = condition if isinstance(condition, Value) else asarray(condition, "bool")
    if c.dtype != "bool":
        c = lax.ne(c, broadcast_to(asarray(0, c.dtype), c.shape, c.split))
    a, b = _operands(x, y)
    shape = _broadcast_shapes(tuple(c.shape), tuple(a.shape))
    cut = _cuts([c, a, b], shape)
    return lax.select_n(broadcast_to(c, shape, cut), broadcast_to(b, shape, cut),
                        broadcast_to(a, shape, cut))


def _float_unary(prim: Any) -> Any:
    def f(x: Any) -> Value:
        v = asarray(x)
        return prim(v if _kind(v.dtype) == "f" else lax.convert_element_type(v, "f32"))
    return f


exp, log, tanh, sqrt = (_float_unary(lax.exp), _float_unary(lax.log), _float_unary(lax.tanh),
                        _float_unary(lax.sqrt))
sin, cos = _float_unary(lax.sin), _float_unary(lax.cos)


def abs(x: Any) -> Value:  # noqa: A001
    return lax.abs(asarray(x))


def negative(x: Any) -> Value:
    return lax.neg(asarray(x))


def square(x: Any) -> Value:
    v = asarray(x)
    return lax.mul(v, v)


def logical_not(x: Any) -> Value:
    return lax.bitwise_not(asarray(x, "bool"))


def clip(x: Any, min: Any = None, max: Any = None) -> Value:  # noqa: A002
    v = asarray(x)
    if min is not None:
        v = maximum(v, min)
    if max is not None:
        v = minimum(v, max)
    return v


# Shapes.
def reshape(a: Value, newshape: Union[int, Sequence[int]]) -> Value:
    shape = [newshape] if isinstance(newshape, int) else list(newshape)
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
        shape[shape.index(-1)] = int(np.prod(a.shape, dtype=np.int64)) // builtins.max(known, 1)
    return lax.reshape(a, shape)


def transpose(a: Value, axes: Optional[Sequence[int]] = None) -> Value:
    rank = len(a.shape)
    perm = list(reversed(range(rank))) if axes is None else [x % rank for x in axes]
    return a if perm == list(range(rank)) else lax.transpose(a, perm)


def swapaxes(a: Value, axis1: int, axis2: int) -> Value:
    perm = list(range(len(a.shape)))
    perm[axis1], perm[axis2] = perm[axis2], perm[axis1]
    return transpose(a, perm)


def expand_dims(a: Value, axis: Union[int, Sequence[int]]) -> Value:
    return lax.expand_dims(a, [axis] if isinstance(axis, int) else list(axis))


def squeeze(a: Value, axis: Union[None, int, Sequence[int]] = None) -> Value:
    if axis is None:
        axis = [d for d, s in enumerate(a.shape) if s == 1]
    return lax.squeeze(a, [axis] if isinstance(axis, int) else list(axis))


def concatenate(arrays: Sequence[Any], axis: int = 0) -> Value:
    values = _operands_same_dtype(arrays)
    return lax.concatenate(values, axis % len(values[0].shape))


def _operands_same_dtype(arrays: Sequence[Any]) -> List[Value]:
    to = result_type(*arrays)
    out = []
    for a in arrays:
        v = asarray(a, to) if not isinstance(a, Value) else a
        out.append(v if v.dtype == to else lax.convert_element_type(v, to))
    return out


def stack(arrays: Sequence[Any], axis: int = 0) -> Value:
    values = _operands_same_dtype(arrays)
    rank = len(values[0].shape) + 1
    return lax.concatenate([expand_dims(v, axis % rank) for v in values], axis % rank)


def pad(array: Value, pad_width: Any, constant_values: Any = 0) -> Value:
    rank = len(array.shape)
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (rank, 2))
    value = asarray(constant_values, array.dtype)
    return lax.pad(array, value, [(int(lo), int(hi), 0) for lo, hi in widths])


# Reductions.
def _axes(a: Value, axis: Union[None, int, Sequence[int]]) -> Tuple[int, ...]:
    rank = len(a.shape)
    if axis is None:
        return tuple(range(rank))
    return tuple(sorted({x % rank for x in ([axis] if isinstance(axis, int) else axis)}))


def _keep(a: Value, out: Value, axes: Tuple[int, ...], keepdims: bool) -> Value:
    if not keepdims:
        return out
    return lax.reshape(out, [1 if d in axes else s for d, s in enumerate(a.shape)])


def sum(a: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None) -> Value:  # noqa: A001
    v = asarray(a, dtype)
    if v.dtype == "bool":
        v = lax.convert_element_type(v, "i32")
    axes = _axes(v, axis)
    return _keep(v, lax.reduce_sum(v, axes) if axes else v, axes, keepdims)


def mean(a: Any, axis: Any = None, keepdims: bool = False) -> Value:
    v = asarray(a)
    if _kind(v.dtype) != "f":
        v = lax.convert_element_type(v, "f32")
    axes = _axes(v, axis)
    count = int(np.prod([v.shape[d] for d in axes], dtype=np.int64))
    total = sum(v, axes, keepdims)
    return lax.div(total, broadcast_to(asarray(count, v.dtype), total.shape, total.split))


def var(a: Any, axis: Any = None, keepdims: bool = False) -> Value:
    v = asarray(a)
    centered = subtract(v, mean(v, axis, keepdims=True))
    return mean(square(centered), axis, keepdims)


def _reduction(prim: Any) -> Any:
    def f(a: Any, axis: Any = None, keepdims: bool = False) -> Value:
        v = asarray(a)
        axes = _axes(v, axis)
        return _keep(v, prim(v, axes) if axes else v, axes, keepdims)
    return f


max, min, prod = (_reduction(lax.reduce_max), _reduction(lax.reduce_min),  # noqa: A001
                  _reduction(lax.reduce_prod))
all, any = _reduction(lax.reduce_and), _reduction(lax.reduce_or)  # noqa: A001


def _arg(prim: Any) -> Any:
    def f(a: Any, axis: Optional[int] = None, keepdims: bool = False) -> Value:
        v = asarray(a)
        if axis is None:
            v, axis = reshape(v, -1), 0
        axis %= len(v.shape)
        out = prim(v, axis, "i32")
        return _keep(v, out, (axis,), keepdims)
    return f


argmax, argmin = _arg(lax.argmax), _arg(lax.argmin)


def cumsum(a: Any, axis: Optional[int] = None) -> Value:
    v = asarray(a)
    if axis is None:
        v, axis = reshape(v, -1), 0
    return lax.cumsum(v, axis % len(v.shape))


def sort(a: Any, axis: int = -1) -> Value:
    return lax.sort(asarray(a), dimension=axis)


# Contractions.
def matmul(a: Any, b: Any) -> Value:
    """a @ b with numpy's rules: 1-D operands gain and lose a dimension, batch dimensions
    broadcast."""
    x, y = _operands_same_dtype([a, b])
    x1, y1 = len(x.shape) == 1, len(y.shape) == 1
    if x1:
        x = expand_dims(x, 0)
    if y1:
        y = expand_dims(y, 1)
    batch = _broadcast_shapes(tuple(x.shape[:-2]), tuple(y.shape[:-2]))
    nb = len(batch)
    if len(y.shape) == 2:
        # A matrix on the right (a layer's weights): x's batch dimensions are free ones of a
        # single product, instead of copies of y broadcast over them and a product each.
        out = lax.dot_general(x, y, (((nb + 1,), (0,)), ((), ())))
    else:
        cut = _cuts([x, y], batch, core=2)
        x = broadcast_to(x, batch + tuple(x.shape[-2:]), cut + [-1, -1])
        y = broadcast_to(y, batch + tuple(y.shape[-2:]), cut + [-1, -1])
        dims = (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb))))
        out = lax.dot_general(x, y, dims)
    if x1:
        out = lax.squeeze(out, [nb])
    if y1:
        out = lax.squeeze(out, [len(out.shape) - 1])
    return out


def einsum(subscripts: str, *operands: Any) -> Value:
    """Two operands (or one) without ellipses: contractions and batch dimensions through
    dot_general, then a transpose into the output's order."""
    inputs, _, output = subscripts.replace(" ", "").partition("->")
    specs = inputs.split(",")
    if "." in subscripts or len(specs) != len(operands) or len(specs) > 2:
        raise _atoll.InvalidArgument(f"einsum '{subscripts}': one or two operands, no ellipsis")
    if not _:
        counts = {c: inputs.count(c) for c in set(inputs.replace(",", ""))}
        output = "".join(sorted(c for c, n in counts.items() if n == 1))
    values = _operands_same_dtype(list(operands))
    if len(values) == 1:
        (x,), (s,) = values, specs
        summed = tuple(i for i, c in enumerate(s) if c not in output)
        out = lax.reduce_sum(x, summed) if summed else x
        kept = "".join(c for c in s if c in output)
        return transpose(out, [kept.index(c) for c in output])
    (x, y), (sx, sy) = values, specs
    batch = [c for c in sx if c in sy and c in output]
    contract = [c for c in sx if c in sy and c not in output]
    x = lax.reduce_sum(x, [i for i, c in enumerate(sx) if c not in sy and c not in output]) \
        if builtins.any(c not in sy and c not in output for c in sx) else x
    sx = "".join(c for c in sx if c in sy or c in output)
    y = lax.reduce_sum(y, [i for i, c in enumerate(sy) if c not in sx and c not in output]) \
        if builtins.any(c not in sx and c not in output for c in sy) else y
    sy = "".join(c for c in sy if c in sx or c in output)
    dims = ((tuple(sx.index(c) for c in contract), tuple(sy.index(c) for c in contract)),
            (tuple(sx.index(c) for c in batch), tuple(sy.index(c) for c in batch)))
    out = lax.dot_general(x, y, dims)
    order = batch + [c for c in sx if c not in batch and c not in contract] + \
        [c for c in sy if c not in batch and c not in contract]
    return transpose(out, [order.index(c) for c in output])


# Indexing.
def take(a: Value, indices: Any, axis: Optional[int] = None) -> Value:
    """jax.numpy.take (out-of-range indices: jax's default fill, NaN for floats)."""
    from types import SimpleNamespace

    if axis is None:
        a, axis = reshape(a, -1), 0
    axis %= len(a.shape)
    idx = indices if isinstance(indices, Value) else asarray(np.asarray(indices), "i32")
    if _kind(idx.dtype) not in "iu":
        raise _atoll.InvalidArgument(f"take: indices must be integers, got {idx.dtype}")
    rank = len(a.shape)
    out_rank = rank - 1 + len(idx.shape)
    offset_dims = tuple(d for d in range(out_rank) if d < axis or d >= axis + len(idx.shape))
    dnums = SimpleNamespace(offset_dims=offset_dims, collapsed_slice_dims=(axis,),
                            start_index_map=(axis,))
    sizes = [1 if d == axis else s for d, s in enumerate(a.shape)]
    return lax.gather(a, expand_dims(idx, len(idx.shape)), dnums, sizes, mode="fill")


def _getitem(a: Value, key: Any) -> Value:
    """numpy basic indexing (ints, slices with steps, None, one Ellipsis) and one integer
    array (whose dimensions take its place, as numpy's with one advanced index)."""
    keys = list(key) if isinstance(key, tuple) else [key]
    if builtins.sum(k is Ellipsis for k in keys) > 1:
        raise IndexError("an index can only have a single ellipsis")
    named = builtins.sum(1 for k in keys if k is not None and k is not Ellipsis)
    if named > len(a.shape):
        raise IndexError(f"too many indices ({named}) for a value of rank {len(a.shape)}")
    ellipsis = [i for i, k in enumerate(keys) if k is Ellipsis]  # `in` would compare arrays
    if ellipsis:
        keys[ellipsis[0]:ellipsis[0] + 1] = [builtins.slice(None)] * (len(a.shape) - named)
    else:
        keys += [builtins.slice(None)] * (len(a.shape) - named)
    starts, limits, steps, array = [], [], [], None
    for k in (k for k in keys if k is not None):
        size = a.shape[len(starts)]
        if isinstance(k, (int, np.integer)):
            i = int(k) + size if k < 0 else int(k)
            if not 0 <= i < size:
                raise IndexError(f"index {k} is out of bounds for axis {len(starts)} of size "
                                 f"{size}")
            starts.append(i), limits.append(i + 1), steps.append(1)
        elif isinstance(k, builtins.slice):
            start, stop, step = k.indices(size)
            if step < 0:
                raise IndexError("atoll.numpy indexing: negative slice steps are not supported")
            starts.append(start), limits.append(builtins.max(stop, start)), steps.append(step)
        else:
            if array is not None:
                raise IndexError("atoll.numpy indexing: one integer array per index")
            array = (len(starts), k)
            starts.append(0), limits.append(size), steps.append(1)
    out = a
    if starts != [0] * len(starts) or limits != list(a.shape) or builtins.any(
            s != 1 for s in steps):
        out = lax.slice(a, starts, limits, steps)
    index_shape: Tuple[int, ...] = ()
    if array is not None:
        index_shape = tuple(array[1].shape) if isinstance(array[1], Value) else np.shape(array[1])
        out = take(out, array[1], axis=array[0])
    # The result's shape: ints drop their dimension, None adds one, the array its own.
    shape, pos, dim = [], 0, 0
    for k in keys:
        if k is None:
            shape.append(1)
        elif isinstance(k, (int, np.integer)):
            pos, dim = pos + 1, dim + 1
        elif isinstance(k, builtins.slice):
            shape.append(out.shape[pos])
            pos, dim = pos + 1, dim + 1
        else:
            shape.extend(index_shape)
            pos, dim = pos + len(index_shape), dim + 1
    return out if list(out.shape) == shape else lax.reshape(out, shape)


# jax.nn's functions that models use.
def softmax(x: Value, axis: int = -1) -> Value:
    shifted = subtract(x, max(x, axis, keepdims=True))
    e = exp(shifted)
    return divide(e, sum(e, axis, keepdims=True))


def log_softmax(x: Value, axis: int = -1) -> Value:
    shifted = subtract(x, max(x, axis, keepdims=True))
    return subtract(shifted, log(sum(exp(shifted), axis, keepdims=True)))


def one_hot(x: Value, num_classes: int, dtype: Any = np.float32) -> Value:
    classes = lax.iota(x.dtype, num_classes)
    hot = equal(expand_dims(x, -1), classes)
    return lax.convert_element_type(hot, _name(dtype))


def arange(n: int, dtype: Any = np.int32) -> Value:
    return lax.iota(_name(dtype), int(n))


def zeros(shape: Union[int, Sequence[int]], dtype: Any = np.float32) -> Value:
    return lax.full(np.atleast_1d(shape).tolist() if np.ndim(shape) else [int(shape)], 0,
                    _name(dtype))


def ones(shape: Union[int, Sequence[int]], dtype: Any = np.float32) -> Value:
    return lax.full(np.atleast_1d(shape).tolist() if np.ndim(shape) else [int(shape)], 1,
                    _name(dtype))


def _triangle(x: Value, k: int, lower: bool) -> Value:
    rows, cols = x.shape[-2], x.shape[-1]
    shape = (rows, cols)
    i = lax.broadcasted_iota("i32", shape, 0)
    j = lax.broadcasted_iota("i32", shape, 1)
    keep = lax.le(j, add(i, k)) if lower else lax.ge(j, add(i, k))
    return where(keep, x, asarray(0, x.dtype))


def tril(x: Value, k: int = 0) -> Value:
    return _triangle(x, k, lower=True)


def triu(x: Value, k: int = 0) -> Value:
    return _triangle(x, k, lower=False)


# numpy's methods and operators on traced values.
def _install() -> None:
    ops = {"__add__": add, "__sub__": subtract, "__mul__": multiply, "__truediv__": divide,
           "__floordiv__": floor_divide, "__pow__": power, "__matmul__": matmul,
           "__lt__": less, "__le__": less_equal, "__gt__": greater, "__ge__": greater_equal,
           "__and__": logical_and, "__or__": logical_or}
    # The IR's own arithmetic takes a Python number as a scalar operand: kept where the
    # number does not change the value's dtype (one op, as before this module).
    base = {n: getattr(Value, n) for n in ("__add__", "__sub__", "__mul__", "__truediv__",
                                           "__radd__", "__rmul__")}

    def operator(name: str, f: Any, swap: bool) -> Any:
        def apply(a: Any, b: Any) -> Value:
            fast = base.get(name)
            if (fast is not None and isinstance(b, (int, float)) and not isinstance(b, bool) and
                    result_type(a, b) == a.dtype and (_kind(a.dtype) == "f" or
                                                      name != "__truediv__")):
                return fast(a, float(b))
            return f(b, a) if swap else f(a, b)
        return apply

    for name, f in ops.items():
        setattr(Value, name, operator(name, f, False))
        setattr(Value, "__r" + name[2:], operator("__r" + name[2:], f, True))
    Value.__getitem__ = _getitem
    Value.__invert__ = logical_not
    Value.reshape = lambda self, *shape: reshape(
        self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)
    Value.astype = lambda self, dtype: (self if self.dtype == _name(dtype) else
                                        lax.convert_element_type(self, _name(dtype)))
    Value.T = property(lambda self: transpose(self))
    Value.ndim = property(lambda self: len(self.shape))
    Value.size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))
    for name in ("sum", "mean", "max", "min", "prod", "argmax", "argmin", "var", "all", "any"):
        setattr(Value, name, globals()[name])
    Value.swapaxes = swapaxes
    Value.transpose = lambda self, *axes: transpose(self, axes or None)


_install()
