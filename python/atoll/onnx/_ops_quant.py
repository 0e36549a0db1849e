"""QuantizeLinear and DequantizeLinear (per tensor, per axis and blocked scales), into and
from the integer dtypes and the narrow ones (_narrow.py); MatMulInteger and QLinearMatMul."""

from __future__ import annotations

import onnx

from .. import lax
from .. import numpy as anp
from . import _narrow as narrow
from ._context import atoll_dtype_of_onnx
from ._ops import op
from ._util import axis, broadcast, wide

T = onnx.TensorProto
RANGES = {T.UINT8: (0, 255), T.INT8: (-128, 127), T.UINT16: (0, 65535),
          T.INT16: (-32768, 32767), T.INT32: (-2**31, 2**31 - 1), **narrow.INTS}


def _spread(ctx, p, x):
    """A scale or zero point laid out over x: per tensor, per axis, or in blocks."""
    shape = list(x.shape)
    one = len(p.shape) == 1 and p.shape[0] == 1 and not ctx.attr("block_size", 0)
    if len(p.shape) == 0 or one:
        return lax.broadcast_in_dim(lax.reshape(p, []), shape, [])
    a = axis(ctx.attr("axis", 1), len(shape), ctx)
    bs = ctx.attr("block_size", 0)
    if not bs:
        return lax.broadcast_in_dim(p, shape, [a])
    nb = p.shape[a]
    wide = shape[:a] + [nb, bs] + shape[a + 1:]
    dims = list(range(a)) + [a] + list(range(a + 2, len(wide)))
    r = lax.reshape(lax.broadcast_in_dim(p, wide, dims), shape[:a] + [nb * bs] + shape[a + 1:])
    return lax.slice(r, [0] * len(shape), shape) if nb * bs != shape[a] else r


@op("DequantizeLinear")
def _dequantize(ctx, x, scale, zero=None):
    v = ctx.value(x)
    s = ctx.value(scale)
    to = ctx.attr("output_dtype", 0)
    out = atoll_dtype_of_onnx(to, "attribute 'output_dtype'") if to else s.dtype
    c = "f64" if out == "f64" else "f32"
    f = lax.convert_element_type(v, c) if v.dtype != c else v
    if zero is not None:
        z = ctx.value(zero)
        z = lax.convert_element_type(z, c) if z.dtype != c else z
        f = lax.sub(f, _spread(ctx, z, f))
    sc = lax.convert_element_type(s, c) if s.dtype != c else s
    y = lax.mul(f, _spread(ctx, sc, f))
    return y if y.dtype == out else lax.convert_element_type(y, out)


@op("QuantizeLinear")
def _quantize(ctx, x, scale, zero=None):
    v = ctx.value(x)
    to = ctx.attr("output_dtype", 0) or (ctx.elem_type(2, zero) if zero is not None else T.UINT8)
    held = atoll_dtype_of_onnx(to, "the output dtype")
    c = "f64" if v.dtype == "f64" else "f32"
    f = lax.convert_element_type(v, c) if v.dtype != c else v
    s = ctx.value(scale)
    s = lax.convert_element_type(s, c) if s.dtype != c else s
    q = lax.div(f, _spread(ctx, s, f))
    if to in narrow.FLOATS:
        if zero is not None:
            z = ctx.value(zero)
            q = lax.add(q, _spread(ctx, lax.convert_element_type(z, c) if z.dtype != c else z, q))
        return narrow.cast(q, to, bool(ctx.attr("saturate", 1)))
    if to not in RANGES:
        raise ctx.refuse(f"output dtype {onnx.TensorProto.DataType.Name(to)} is not supported")
    q = lax.round(q, 1)
    if zero is not None:
        z = ctx.value(zero)
        q = lax.add(q, _spread(ctx, lax.convert_element_type(z, c) if z.dtype != c else z, q))
    lo, hi = RANGES[to]
    q = lax.max(lax.min(q, lax.full(tuple(q.shape), hi, c)), lax.full(tuple(q.shape), lo, c))
    return lax.convert_element_type(q, held)



@op("DynamicQuantizeLinear")
def _dynamic_quantize(ctx, x):
    v = ctx.value(x)
    axes = list(range(len(v.shape)))
    zero = lax.full((), 0, v.dtype)
    hi = lax.max(lax.reduce_max(v, axes), zero)
    lo = lax.min(lax.reduce_min(v, axes), zero)
    scale = lax.div(lax.sub(hi, lo), lax.full((), 255, v.dtype))
    zp = lax.round(lax.sub(zero, lax.div(lo, scale)), 1)
    zp = lax.max(lax.min(zp, lax.full((), 255, v.dtype)), zero)
    q = lax.add(lax.round(lax.div(v, lax.broadcast_in_dim(scale, v.shape, [])), 1),
                lax.broadcast_in_dim(zp, v.shape, []))
    q = lax.max(lax.min(q, lax.full(tuple(v.shape), 255, v.dtype)),
                lax.full(tuple(v.shape), 0, v.dtype))
    return (lax.convert_element_type(q, "u8"), scale, lax.convert_element_type(zp, "u8"))


def centered(ctx, x, zero):
    """x less its zero point, in i32 (broadcast as onnx's reference subtracts)."""
    v = lax.convert_element_type(ctx.value(x), "i32")
    if zero is None:
        return v
    return lax.sub(*broadcast(ctx, v, lax.convert_element_type(ctx.value(zero), "i32")))


@op("MatMulInteger")
def _matmul_integer(ctx, a, b, a_zero=None, b_zero=None):
    return anp.matmul(centered(ctx, a, a_zero), centered(ctx, b, b_zero))


@op("QLinearMatMul")
def _qlinear_matmul(ctx, a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero=None):
    acc = lax.convert_element_type(_matmul_integer(ctx, a, b, a_zero, b_zero), "f64")
    m = wide(lax.div, *broadcast(ctx, wide(lax.mul, *broadcast(ctx, a_scale, b_scale)), y_scale))
    return requantize(ctx, acc, lax.convert_element_type(m, "f64"), y_zero, a)


def requantize(ctx, acc, multiplier, y_zero, first):
    """QLinearMatMul's and QLinearConv's output: the exact accumulator acc (f64) times the
    multiplier (x_scale * w_scale / y_scale in the scales' dtype, as onnx's reference), plus
    y's zero point, rounded to even and saturated to y's dtype (y_zero_point's, else the
    first input's)."""
    d = lax.mul(*broadcast(ctx, acc, multiplier))
    to = ctx.elem_type(7, y_zero) if y_zero is not None else ctx.elem_type(0, first)
    if y_zero is not None:
        d = lax.add(*broadcast(ctx, d, lax.convert_element_type(ctx.value(y_zero), "f64")))
    if to not in RANGES:
        raise ctx.refuse(f"output dtype {onnx.TensorProto.DataType.Name(to)} is not supported")
    lo, hi = RANGES[to]
    d = lax.round(d, 1)
    d = lax.max(lax.min(d, lax.full(tuple(d.shape), hi, "f64")), lax.full(tuple(d.shape), lo, "f64"))
    return lax.convert_element_type(d, atoll_dtype_of_onnx(to, "the output dtype"))
