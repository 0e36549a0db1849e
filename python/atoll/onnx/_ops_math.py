"""Elementwise ops, activations, reductions, contractions and casts."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import lax
from .. import numpy as anp
from . import _fused
from . import _narrow as narrow
from ._context import atoll_dtype_of_onnx
from ._ops import op
from ._util import FLOATS, Value, axis, broadcast, in_float, keep, scalar, wide


def _binary(fn, widen=False, name=""):
    def lower(ctx, x, y):
        fast = _fused.arithmetic(ctx, name, fn, x, y) if widen else None
        if fast is not None:
            return fast
        a, b = broadcast(ctx, x, y)
        if b.dtype != a.dtype:
            raise ctx.refuse(f"operands of dtypes {a.dtype} and {b.dtype}")
        return wide(fn, a, b) if widen else fn(a, b)
    return lower


for _name, _fn in (("Add", lax.add), ("Sub", lax.sub), ("Mul", lax.mul), ("Div", lax.div)):
    op(_name)(_binary(_fn, widen=True, name=_name))
for _name, _fn in (("Equal", lax.eq), ("Less", lax.lt), ("Greater", lax.gt),
                   ("LessOrEqual", lax.le), ("GreaterOrEqual", lax.ge), ("And", lax.bitwise_and),
                   ("Or", lax.bitwise_or), ("Xor", lax.bitwise_xor),
                   ("BitwiseAnd", lax.bitwise_and), ("BitwiseOr", lax.bitwise_or),
                   ("BitwiseXor", lax.bitwise_xor)):
    op(_name)(_binary(_fn))


@op("Pow")
def _pow(ctx, x, y):
    a, b = broadcast(ctx, x, y)
    if a.dtype in FLOATS:
        if b.dtype != a.dtype:
            b = lax.convert_element_type(b, a.dtype)
        return in_float(lax.pow, a, b)
    r = lax.pow(lax.convert_element_type(a, "f64"), lax.convert_element_type(b, "f64"))
    return lax.convert_element_type(r, a.dtype)


@op("Mod")
def _mod(ctx, x, y):
    a, b = broadcast(ctx, x, y)
    r = lax.rem(a, b)
    if ctx.attr("fmod", 0) or a.dtype in ("u8", "u32"):
        return r
    zero = scalar(r, 0)
    fix = lax.bitwise_and(lax.ne(r, zero), lax.ne(lax.lt(r, zero), lax.lt(b, zero)))
    return lax.select_n(fix, r, wide(lax.add, r, b))


@op("BitShift")
def _bitshift(ctx, x, y):
    a, b = broadcast(ctx, x, y)
    d = ctx.attr("direction", b"LEFT")
    d = d.decode() if isinstance(d, bytes) else d
    if d == "LEFT":
        return lax.shift_left(a, b)
    signed = a.dtype in ("i8", "i32", "i64")
    return lax.shift_right_arithmetic(a, b) if signed else lax.shift_right_logical(a, b)


def _variadic(fn, mean=False):
    def lower(ctx, *xs):
        vals = broadcast(ctx, *xs)
        out = vals[0]
        for v in vals[1:]:
            out = fn(out, v)
        if mean:
            out = wide(lax.div, out, scalar(out, len(vals)))
        return out if len(vals) > 1 else lax.reshape(out, list(out.shape))
    return lower


op("Max")(_variadic(lax.max))
op("Min")(_variadic(lax.min))
op("Sum")(_variadic(lambda a, b: wide(lax.add, a, b)))
op("Mean")(_variadic(lambda a, b: wide(lax.add, a, b), mean=True))


def _unary(fn, floats=True):
    def lower(ctx, x):
        v = ctx.value(x)
        return in_float(fn, v) if floats else fn(v)
    return lower


for _name, _fn in (("Exp", lax.exp), ("Log", lax.log), ("Sqrt", lax.sqrt), ("Tanh", lax.tanh),
                   ("Sigmoid", lax.logistic), ("Erf", lax.erf), ("Sin", lax.sin),
                   ("Cos", lax.cos), ("Tan", lax.tan), ("Asin", lax.asin), ("Acos", lax.acos),
                   ("Atan", lax.atan), ("Sinh", lax.sinh), ("Cosh", lax.cosh),
                   ("Asinh", lax.asinh), ("Acosh", lax.acosh), ("Atanh", lax.atanh),
                   ("Floor", lax.floor), ("Ceil", lax.ceil),
                   ("Round", lambda v: lax.round(v, 1))):
    op(_name)(_unary(_fn))
def _neg(v):
    return lax.neg(v) if v.dtype in FLOATS else wide(lax.sub, scalar(v, 0), v)


for _name, _fn in (("Abs", lax.abs), ("Neg", _neg), ("Sign", lax.sign),
                   ("Not", lax.bitwise_not), ("BitwiseNot", lax.bitwise_not)):
    op(_name)(_unary(_fn, floats=False))


@op("Identity")
def _identity(ctx, x):
    return x


@op("Reciprocal")
def _reciprocal(ctx, x):
    v = ctx.value(x)
    return in_float(lambda a: lax.div(scalar(a, 1), a), v)


@op("IsNaN")
def _isnan(ctx, x):
    v = ctx.value(x)
    return lax.ne(v, v)


@op("IsInf")
def _isinf(ctx, x):
    v = ctx.value(x)
    pos = lax.eq(v, scalar(v, math.inf))
    neg = lax.eq(v, scalar(v, -math.inf))
    p, n = ctx.attr("detect_positive", 1), ctx.attr("detect_negative", 1)
    if p and n:
        return lax.bitwise_or(pos, neg)
    if p:
        return pos
    if n:
        return neg
    return lax.bitwise_and(pos, neg)


# Activations, written as onnx's definitions (their function bodies) are.
def _act(fn):
    def lower(ctx, x):
        v = ctx.value(x)
        return in_float(lambda a: fn(ctx, a), v)
    return lower


def _where(c, a, b):
    return lax.select_n(c, b, a)


@op("Relu")
def _relu(ctx, x):
    v = ctx.value(x)
    fast = _fused.relu(v)
    return fast if fast is not None else lax.max(v, scalar(v, 0))
op("LeakyRelu")(_act(lambda ctx, v: _where(lax.lt(v, scalar(v, 0)),
                                           lax.mul(v, scalar(v, ctx.attr("alpha", 0.01))), v)))
op("Elu")(_act(lambda ctx, v: _where(lax.lt(v, scalar(v, 0)),
                                     lax.mul(lax.expm1(v), scalar(v, ctx.attr("alpha", 1.0))), v)))
op("Selu")(_act(lambda ctx, v: lax.mul(scalar(v, ctx.attr("gamma", 1.05070102214813232421875)),
                                       _where(lax.le(v, scalar(v, 0)), lax.mul(
                                           lax.expm1(v), scalar(v, ctx.attr(
                                               "alpha", 1.67326319217681884765625))), v))))
op("Celu")(_act(lambda ctx, v: lax.add(
    lax.max(v, scalar(v, 0)), lax.min(scalar(v, 0), lax.mul(scalar(v, ctx.attr("alpha", 1.0)),
                                      lax.expm1(lax.div(v, scalar(v, ctx.attr("alpha", 1.0)))))))))
op("HardSigmoid")(_act(lambda ctx, v: lax.clamp(scalar(v, 0), lax.add(
    lax.mul(v, scalar(v, ctx.attr("alpha", 0.2))), scalar(v, ctx.attr("beta", 0.5))),
    scalar(v, 1))))
op("HardSwish")(_act(lambda ctx, v: lax.mul(v, lax.clamp(scalar(v, 0), lax.add(
    lax.mul(v, scalar(v, 1 / 6)), scalar(v, 0.5)), scalar(v, 1)))))
op("Softplus")(_act(lambda ctx, v: lax.log1p(lax.exp(v))))
op("Softsign")(_act(lambda ctx, v: lax.div(v, lax.add(scalar(v, 1), lax.abs(v)))))
op("Mish")(_act(lambda ctx, v: lax.mul(v, lax.tanh(lax.log1p(lax.exp(v))))))
op("ThresholdedRelu")(_act(lambda ctx, v: _where(lax.gt(v, scalar(v, ctx.attr("alpha", 1.0))),
                                                 v, scalar(v, 0))))


@op("Gelu")
def _gelu(ctx, x):
    approx = ctx.attr("approximate", b"none")
    approx = approx.decode() if isinstance(approx, bytes) else approx

    def f(v):
        half = lax.mul(v, scalar(v, 0.5))
        if approx == "tanh":
            inner = lax.mul(scalar(v, math.sqrt(2 / math.pi)),
                            lax.add(v, lax.mul(scalar(v, 0.044715), lax.integer_pow(v, 3))))
            return lax.mul(half, lax.add(scalar(v, 1), lax.tanh(inner)))
        erf = lax.erf(lax.mul(v, scalar(v, 1 / math.sqrt(2))))
        return lax.mul(half, lax.add(scalar(v, 1), erf))
    if approx not in ("none", "tanh"):
        raise ctx.refuse(f"approximate={approx!r} is not supported")
    return in_float(f, ctx.value(x))


@op("PRelu")
def _prelu(ctx, x, slope):
    a, s = broadcast(ctx, x, slope)
    return _where(lax.lt(a, scalar(a, 0)), lax.mul(a, s), a)


@op("Shrink")
def _shrink(ctx, x):
    v = ctx.value(x)
    b, lam = ctx.attr("bias", 0.0), ctx.attr("lambd", 0.5)
    return _where(lax.lt(v, scalar(v, -lam)), wide(lax.add, v, scalar(v, b)),
                  _where(lax.gt(v, scalar(v, lam)), wide(lax.sub, v, scalar(v, b)), scalar(v, 0)))


@op("Clip")
def _clip(ctx, x, lo=None, hi=None):
    v = ctx.value(x)
    if ctx.opset < 11:
        lo, hi = ctx.attr("min", None), ctx.attr("max", None)
        lo = None if lo is None else scalar(v, lo)
        hi = None if hi is None else scalar(v, hi)
    if lo is not None:
        v = lax.max(*broadcast(ctx, v, lo))
    if hi is not None:
        v = lax.min(*broadcast(ctx, v, hi))
    return v


def _softmax_axis(ctx, v):
    default = -1 if ctx.opset >= 13 else 1
    return axis(ctx.attr("axis", default), len(v.shape), ctx)


def _softmax(kind):
    def lower(ctx, x):
        v = ctx.value(x)
        a = _softmax_axis(ctx, v)
        shape = list(v.shape)
        flat = ctx.opset < 13
        if flat:
            v = lax.reshape(v, [int(np.prod(shape[:a])), int(np.prod(shape[a:]))])
            a = 1
        fast = _fused.softmax(v, a) if kind == "soft" else None
        if fast is not None:
            return lax.reshape(fast, shape) if flat else fast

        def f(u):
            if kind == "hard":
                idx = lax.argmax(u, a, "i32")
                io = lax.broadcasted_iota("i32", u.shape, a)
                rest = [d for d in range(len(u.shape)) if d != a]
                hit = lax.eq(io, lax.broadcast_in_dim(idx, u.shape, rest))
                return lax.convert_element_type(hit, u.dtype)
            m = lax.reduce_max(u, [a])
            rest = [d for d in range(len(u.shape)) if d != a]
            s = lax.sub(u, lax.broadcast_in_dim(m, u.shape, rest))
            e = lax.exp(s)
            tot = lax.broadcast_in_dim(lax.reduce_sum(e, [a]), u.shape,
                                       [d for d in range(len(u.shape)) if d != a])
            return lax.div(e, tot) if kind == "soft" else lax.sub(s, lax.log(tot))
        out = in_float(f, v)
        return lax.reshape(out, shape) if flat else out
    return lower


op("Softmax")(_softmax("soft"))
op("LogSoftmax")(_softmax("log"))
op("Hardmax")(_softmax("hard"))


# Reductions.
def _reduce_axes(ctx, v, axes_input):
    rank = len(v.shape)
    if axes_input is not None:
        axes = [int(a) for a in ctx.static(axes_input, "input 'axes'").ravel()]
    else:
        axes = ctx.attr("axes", None)
        axes = None if axes is None else list(axes)
    if not axes:
        if ctx.attr("noop_with_empty_axes", 0):
            return None
        return list(range(rank))
    return sorted({axis(a, rank, ctx) for a in axes})


def _reduction(kind):
    def lower(ctx, x, axes_input=None):
        v = ctx.value(x)
        axes = _reduce_axes(ctx, v, axes_input)
        if axes is None:
            return v
        shape = list(v.shape)

        def f(u):
            if kind == "max":  # of booleans: any
                return lax.reduce_or(u, axes) if u.dtype == "bool" else lax.reduce_max(u, axes)
            if kind == "min":  # of booleans: all
                return lax.reduce_and(u, axes) if u.dtype == "bool" else lax.reduce_min(u, axes)
            if kind == "prod":
                return lax.reduce_prod(u, axes)
            if kind == "l1":
                return lax.reduce_sum(lax.abs(u), axes)
            if kind in ("l2", "sumsquare"):
                s = lax.reduce_sum(wide(lax.mul, u, u), axes)
                return in_float(lax.sqrt, s) if kind == "l2" else s
            if kind == "logsumexp":
                return lax.log(lax.reduce_sum(lax.exp(u), axes))
            s = lax.reduce_sum(u, axes)
            if kind == "logsum":
                return lax.log(s)
            if kind == "mean":
                n = int(np.prod([shape[a] for a in axes]))
                return wide(lax.div, s, scalar(s, n))
            return s
        if kind in ("logsumexp", "logsum", "l2") or (kind == "mean" and v.dtype in ("f16", "bf16")):
            out = in_float(f, v)
        elif v.dtype in ("f16", "bf16", "i8", "u8", "u32") and kind in (
                "sum", "mean", "l1", "sumsquare", "prod"):
            out = wide(f, v)
        else:
            out = f(v)
        if not ctx.attr("keepdims", 1):
            return out
        return keep(out, axes, shape)
    return lower


for _name, _kind in (("ReduceSum", "sum"), ("ReduceMean", "mean"), ("ReduceMax", "max"),
                     ("ReduceMin", "min"), ("ReduceProd", "prod"), ("ReduceL1", "l1"),
                     ("ReduceL2", "l2"), ("ReduceLogSum", "logsum"),
                     ("ReduceLogSumExp", "logsumexp"), ("ReduceSumSquare", "sumsquare")):
    op(_name)(_reduction(_kind))


def _arg(fn):
    def lower(ctx, x):
        v = ctx.value(x)
        rank = len(v.shape)
        a = axis(ctx.attr("axis", 0), rank, ctx)
        if ctx.attr("select_last_index", 0):
            idx = fn(lax.rev(v, [a]), a, "i64")
            idx = lax.sub(scalar(idx, v.shape[a] - 1), idx)
        else:
            idx = fn(v, a, "i64")
        if ctx.attr("keepdims", 1):
            idx = keep(idx, [a], list(v.shape))
        return idx
    return lower


op("ArgMax")(_arg(lax.argmax))
op("ArgMin")(_arg(lax.argmin))


# Contractions.
@op("MatMul")
def _matmul(ctx, a, b):
    return anp.matmul(ctx.value(a), ctx.value(b))


@op("Gemm")
def _gemm(ctx, a, b, c=None):
    def operand(v, transposed):
        # A constant (a layer's weights) is transposed once here, not at every run.
        if not transposed:
            return ctx.value(v)
        if isinstance(v, Value):
            return lax.transpose(v, [1, 0])
        return ctx.value(np.ascontiguousarray(np.asarray(v).T))
    x, y = operand(a, ctx.attr("transA", 0)), operand(b, ctx.attr("transB", 0))
    out = anp.matmul(x, y)
    alpha, beta = ctx.attr("alpha", 1.0), ctx.attr("beta", 1.0)
    if alpha != 1.0:
        out = lax.mul(out, scalar(out, alpha))
    if c is not None:
        cv = ctx.value(c)
        if beta != 1.0:
            cv = lax.mul(cv, scalar(cv, beta))
        fast = _fused.arithmetic(ctx, "Add", lax.add, out, cv)
        out = fast if fast is not None else lax.add(*broadcast(ctx, out, cv))
    return out


@op("Einsum")
def _einsum(ctx, *xs):
    eq = ctx.attr("equation")
    eq = eq.decode() if isinstance(eq, bytes) else eq
    return anp.einsum(eq, *[ctx.value(x) for x in xs])


# Casts.
def _cast_to(ctx, x, elem_type):
    to = atoll_dtype_of_onnx(elem_type, "attribute 'to'")
    v = ctx.value(x)
    if elem_type in narrow.HELD:
        return narrow.cast(v, elem_type, bool(ctx.attr("saturate", 1)))
    return v if v.dtype == to else lax.convert_element_type(v, to)


@op("Cast")
def _cast(ctx, x):
    return _cast_to(ctx, x, ctx.attr("to"))


@op("CastLike")
def _castlike(ctx, x, like):
    return _cast_to(ctx, x, ctx.elem_type(1, like))


@op("Where")
def _where_op(ctx, c, x, y):
    cv, a, b = broadcast(ctx, c, x, y)
    return lax.select_n(cv, b, a)


@op("CumSum")
def _cumsum(ctx, x, ax):
    v = ctx.value(x)
    a = axis(int(ctx.static(ax, "input 'axis'").ravel()[0]), len(v.shape), ctx)
    rev = bool(ctx.attr("reverse", 0))
    out = wide(lambda u: lax.cumsum(u, a, rev), v)
    if ctx.attr("exclusive", 0):
        n = v.shape[a]
        zero_shape = list(v.shape)
        zero_shape[a] = 1
        zeros = lax.full(zero_shape, 0, v.dtype)
        lo, hi = [0] * len(v.shape), list(v.shape)
        if rev:
            lo[a] = 1
            out = lax.concatenate([lax.slice(out, lo, hi), zeros], a)
        else:
            hi[a] = n - 1
            out = lax.concatenate([zeros, lax.slice(out, lo, hi)], a)
    return out
