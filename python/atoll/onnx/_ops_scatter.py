"""Indexing with index tensors: ScatterElements (and Scatter), ScatterND, GatherND, and
BitCast."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .. import lax
from ._context import atoll_dtype_of_onnx
from ._ops import op
from ._util import axis, scalar

_SCATTERS = {"none": lax.scatter, "add": lax.scatter_add, "mul": lax.scatter_mul,
             "max": lax.scatter_max, "min": lax.scatter_min}


def _reduction(ctx):
    r = ctx.attr("reduction", b"none")
    r = r.decode() if isinstance(r, bytes) else r
    if r not in _SCATTERS:
        raise ctx.refuse(f"reduction={r!r} is not supported")
    return _SCATTERS[r]


def _index(ctx, indices):
    i = ctx.value(indices)
    return i if i.dtype in ("i32", "i64") else lax.convert_element_type(i, "i64")


def _wrap(i, sizes):
    """Negative indices counted from the end; sizes broadcast along i's last dimension."""
    dims = lax.broadcast_in_dim(sizes, i.shape, [len(i.shape) - 1])
    return lax.select_n(lax.lt(i, scalar(i, 0)), i, lax.add(i, dims))


@op("ScatterElements", "Scatter")
def _scatter_elements(ctx, data, indices, updates):
    v, u = ctx.value(data), ctx.value(updates)
    shape = list(v.shape)
    a = axis(ctx.attr("axis", 0), len(shape), ctx)
    i = _index(ctx, indices)
    i = lax.select_n(lax.lt(i, scalar(i, 0)), i, lax.add(i, scalar(i, shape[a])))
    ishape = list(i.shape)
    cols = [lax.reshape(i if d == a else lax.broadcasted_iota(i.dtype, ishape, d), ishape + [1])
            for d in range(len(shape))]
    start = lax.concatenate(cols, len(ishape))
    dims = SimpleNamespace(update_window_dims=(), inserted_window_dims=tuple(range(len(shape))),
                           scatter_dims_to_operand_dims=tuple(range(len(shape))))
    return _reduction(ctx)(v, start, u, dims, mode="clip")


@op("ScatterND")
def _scatter_nd(ctx, data, indices, updates):
    v, u = ctx.value(data), ctx.value(updates)
    i = _index(ctx, indices)
    k, q, r = i.shape[-1], len(i.shape), len(v.shape)
    i = _wrap(i, ctx.value(np.array(v.shape[:k], np.int64 if i.dtype == "i64" else np.int32)))
    dims = SimpleNamespace(update_window_dims=tuple(range(q - 1, q - 1 + r - k)),
                           inserted_window_dims=tuple(range(k)),
                           scatter_dims_to_operand_dims=tuple(range(k)))
    return _reduction(ctx)(v, i, u, dims, mode="clip")


@op("GatherND")
def _gather_nd(ctx, data, indices):
    b = ctx.attr("batch_dims", 0)
    v = ctx.value(data)
    i = _index(ctx, indices)
    k, q, r = i.shape[-1], len(i.shape), len(v.shape)
    i = _wrap(i, ctx.value(np.array(v.shape[b:b + k], np.int64 if i.dtype == "i64" else np.int32)))
    if b:  # each batch position's own coordinates prepended: a gather over b + k dimensions
        column = list(i.shape[:-1]) + [1]
        i = lax.concatenate([lax.broadcasted_iota(i.dtype, column, d) for d in range(b)] + [i],
                            q - 1)
        k += b
    dims = SimpleNamespace(offset_dims=tuple(range(q - 1, q - 1 + r - k)),
                           collapsed_slice_dims=tuple(range(k)), start_index_map=tuple(range(k)))
    return lax.gather(v, i, dims, [1] * k + list(v.shape[k:]), mode="clip")


_WIDTH = {"f32": 4, "i32": 4, "u32": 4, "f64": 8, "i64": 8, "f16": 2, "bf16": 2, "i8": 1,
          "u8": 1, "bool": 1}


@op("BitCast")
def _bitcast(ctx, x):
    to_type = ctx.attr("to")
    to = atoll_dtype_of_onnx(to_type, "attribute 'to'")
    v = ctx.value(x)
    src = ctx.elem_type(0, x)
    from ._context import _WIDENED
    T = __import__("onnx").TensorProto
    if {src, to_type} == {T.INT16, T.UINT16}:  # both held in i32
        if to_type == T.INT16:
            return lax.select_n(lax.ge(v, scalar(v, 32768)), v, lax.sub(v, scalar(v, 65536)))
        return lax.select_n(lax.lt(v, scalar(v, 0)), v, lax.add(v, scalar(v, 65536)))
    if "bool" in (v.dtype, to) and _WIDTH.get(v.dtype) == _WIDTH.get(to):
        return lax.convert_element_type(v, to)
    if to_type in _WIDENED or src in _WIDENED or _WIDTH.get(v.dtype) != _WIDTH.get(to):
        raise ctx.refuse(f"a bit cast from {v.dtype} to {to} (atoll holds one of them wider)")
    return lax.bitcast_convert_type(v, to)
