"""Neural-network ops: Conv, pooling, normalizations, TopK."""

from __future__ import annotations

import numpy as np

from .. import lax
from . import _fused
from ._ops import op
from ._util import axis, broadcast, in_float, keep, normalization_input, scalar, wide


def _text(v, default):
    v = default if v is None else v
    return v.decode() if isinstance(v, bytes) else v


def _pads(ctx, sizes, kernel, strides, dilations):
    """(low, high) per spatial dimension from auto_pad and pads."""
    n = len(sizes)
    auto = _text(ctx.attr("auto_pad"), "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        out = []
        for s, k, st, d in zip(sizes, kernel, strides, dilations):
            total = max((-(-s // st) - 1) * st + (k - 1) * d + 1 - s, 0)
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
            out.append((lo, total - lo))
        return out
    if auto == "VALID":
        return [(0, 0)] * n
    if auto != "NOTSET":
        raise ctx.refuse(f"auto_pad={auto!r} is not supported")
    p = list(ctx.attr("pads", [0] * (2 * n)))
    return [(int(p[i]), int(p[i + n])) for i in range(n)]


def _convolve(ctx, v, k):
    """Conv's convolution of v by k, as its attributes say."""
    n = len(v.shape) - 2
    kernel = list(ctx.attr("kernel_shape", k.shape[2:]))
    strides = list(ctx.attr("strides", [1] * n))
    dil = list(ctx.attr("dilations", [1] * n))
    pads = _pads(ctx, v.shape[2:], kernel, strides, dil)
    return in_float(lambda a, c: lax.conv_general_dilated(
        a, c, strides, pads, rhs_dilation=dil, feature_group_count=ctx.attr("group", 1)), v, k)


@op("ConvInteger")
def _conv_integer(ctx, x, w, x_zero=None, w_zero=None):
    """In f64, where the i32 sums of products of 8-bit values are exact. A 1-D w_zero_point
    is per output channel (dimension 0 of w)."""
    from ._ops_quant import centered
    k = ctx.value(w)
    if w_zero is not None and len(ctx.value(w_zero).shape) == 1:
        z = lax.convert_element_type(ctx.value(w_zero), "i32")
        k = lax.sub(lax.convert_element_type(k, "i32"), lax.broadcast_in_dim(z, k.shape, [0]))
        w_zero = None
    f = [lax.convert_element_type(centered(ctx, t, z), "f64") for t, z in ((x, x_zero),
                                                                           (k, w_zero))]
    return lax.convert_element_type(_convolve(ctx, *f), "i32")


@op("QLinearConv")
def _qlinear_conv(ctx, x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero=None, b=None):
    """ConvInteger's exact accumulator plus the i32 bias, requantized; a 1-D w_scale is per
    output channel."""
    from ._ops_quant import requantize
    acc = _conv_integer(ctx, x, w, x_zero, w_zero)
    if b is not None:
        acc = lax.add(acc, lax.broadcast_in_dim(ctx.value(b), acc.shape, [1]))
    acc = lax.convert_element_type(acc, "f64")
    ws = ctx.value(w_scale)
    if len(ws.shape) == 1 and ws.shape[0] > 1:
        ws = lax.broadcast_in_dim(ws, acc.shape, [1])
    m = wide(lax.div, *broadcast(ctx, wide(lax.mul, *broadcast(ctx, x_scale, ws)), y_scale))
    return requantize(ctx, acc, lax.convert_element_type(m, "f64"), y_zero, x)


@op("Conv")
def _conv(ctx, x, w, b=None):
    out = _convolve(ctx, ctx.value(x), ctx.value(w))
    if b is not None:
        bv = ctx.value(b)
        out = lax.add(out, lax.broadcast_in_dim(bv, out.shape, [1]))
    return out


def _pool(kind):
    def lower(ctx, x):
        v = ctx.value(x)
        n = len(v.shape) - 2
        kernel = list(ctx.attr("kernel_shape"))
        strides = list(ctx.attr("strides", [1] * n))
        dil = list(ctx.attr("dilations", [1] * n))
        pads = _pads(ctx, v.shape[2:], kernel, strides, dil)
        if ctx.attr("ceil_mode", 0):
            grown = []
            for s, k, st, d, (lo, hi) in zip(v.shape[2:], kernel, strides, dil, pads):
                span = s + lo + hi - ((k - 1) * d + 1)
                outs = -(-span // st) + 1
                if (outs - 1) * st >= s + lo:
                    outs -= 1
                grown.append((lo, max(hi, (outs - 1) * st + (k - 1) * d + 1 - s - lo)))
            pads = grown
        win = [1, 1] + kernel
        wst = [1, 1] + strides
        wdil = [1, 1] + dil
        wp = [(0, 0), (0, 0)] + pads
        if kind == "max" and len(ctx.node.output) > 1 and ctx.node.output[1]:
            from ._ops_pool_indices import max_pool_with_indices
            return max_pool_with_indices(ctx, v, kernel, strides, dil, pads)
        if kind == "max":
            return in_float(lambda a: lax.reduce_window_max(a, win, wst, wp,
                                                            window_dilation=wdil), v)
        if kind == "lp":
            p = ctx.attr("p", 2)
            s = in_float(lambda a: lax.reduce_window_sum(lax.pow(lax.abs(a), scalar(a, p)),
                                                         win, wst, wp,
                                                         window_dilation=wdil), v)
            return in_float(lambda a: lax.pow(a, scalar(a, 1.0 / p)), s)
        total = in_float(lambda a: lax.reduce_window_sum(a, win, wst, wp, window_dilation=wdil), v)
        if ctx.attr("count_include_pad", 0):
            # The divisor counts explicit padding but not what ceil_mode added past it.
            base = [(0, 0), (0, 0)] + _pads(ctx, v.shape[2:], kernel, strides, dil)
            padded = [s + lo + hi for s, (lo, hi) in zip(v.shape, base)]
            ones = lax.full(padded, 1, v.dtype)
            extra = [(0, max(0, p[1] - b[1])) for p, b in zip(wp, base)]
            count = in_float(lambda a: lax.reduce_window_sum(a, win, wst, extra,
                                                             window_dilation=wdil), ones)
        else:
            count = in_float(lambda a: lax.reduce_window_sum(a, win, wst, wp, window_dilation=wdil),
                             lax.full(v.shape, 1, v.dtype))
        return in_float(lax.div, total, count)
    return lower


op("MaxPool")(_pool("max"))
op("AveragePool")(_pool("avg"))
op("LpPool")(_pool("lp"))


def _global(kind):
    def lower(ctx, x):
        v = ctx.value(x)
        axes = list(range(2, len(v.shape)))
        shape = list(v.shape)
        if kind == "max":
            out = lax.reduce_max(v, axes)
        elif kind == "lp":
            p = ctx.attr("p", 2)
            out = in_float(lambda a: lax.pow(lax.reduce_sum(lax.pow(lax.abs(a), scalar(a, p)),
                                                            axes),
                                             scalar(lax.reduce_sum(a, axes), 1.0 / p)), v)
        else:
            n = int(np.prod(shape[2:]))
            out = in_float(lambda a: lax.div(lax.reduce_sum(a, axes), scalar(
                lax.reduce_sum(a, axes), n)), v)
        return keep(out, axes, shape)
    return lower


op("GlobalMaxPool")(_global("max"))
op("GlobalAveragePool")(_global("avg"))
op("GlobalLpPool")(_global("lp"))


def _channel(v, p, ctx):
    return lax.broadcast_in_dim(ctx.value(p), v.shape, [1])


@op("BatchNormalization")
def _batch_norm(ctx, x, scale, b, mean, var):
    if ctx.attr("training_mode", 0):
        raise ctx.refuse("training_mode=1 is not supported: inference only")
    v = ctx.value(x)
    eps = ctx.attr("epsilon", 1e-5)

    def f(a, s, bb, m, vv):
        inv = lax.rsqrt(lax.add(vv, scalar(vv, eps)))
        return lax.add(lax.mul(lax.mul(lax.sub(a, m), inv), s), bb)
    ps = [_channel(v, p, ctx) for p in (scale, b, mean, var)]
    ps = [lax.convert_element_type(p, v.dtype) if p.dtype != v.dtype else p for p in ps]
    return in_float(f, v, *ps)


def _moments(u, axes):
    shape = list(u.shape)
    n = int(np.prod([shape[a] for a in axes]))
    keep_dims = [d for d in range(len(shape)) if d not in axes]
    mean = lax.div(lax.reduce_sum(u, axes), scalar(lax.reduce_sum(u, axes), n))
    mb = lax.broadcast_in_dim(mean, shape, keep_dims)
    c = lax.sub(u, mb)
    var = lax.div(lax.reduce_sum(lax.mul(c, c), axes), scalar(mean, n))
    return mean, var, c, keep_dims


@op("InstanceNormalization")
def _instance_norm(ctx, x, scale, b):
    v = ctx.value(x)
    eps = ctx.attr("epsilon", 1e-5)

    def f(a, s, bb):
        _, var, c, kd = _moments(a, list(range(2, len(a.shape))))
        inv = lax.broadcast_in_dim(lax.rsqrt(lax.add(var, scalar(var, eps))), a.shape, kd)
        return lax.add(lax.mul(lax.mul(c, inv), s), bb)
    return in_float(f, v, _channel(v, scale, ctx), _channel(v, b, ctx))


@op("LayerNormalization")
def _layer_norm(ctx, x, scale, b=None):
    v, d, u, a, axes, eps = normalization_input(ctx, x)
    fast = _fused.layer_norm(ctx, v, a, scale, b, eps)
    if fast is not None:
        return fast
    mean, var, c, kd = _moments(u, axes)
    inv = lax.rsqrt(lax.add(var, scalar(var, eps)))
    y = lax.mul(c, lax.broadcast_in_dim(inv, u.shape, kd))
    y = lax.convert_element_type(y, d) if y.dtype != d else y
    y = lax.mul(*broadcast(ctx, y, scale))
    if b is not None:
        y = lax.add(*broadcast(ctx, y, b))
    return y, keep(mean, axes, list(v.shape)), keep(inv, axes, list(v.shape))


@op("LpNormalization")
def _lp_norm(ctx, x):
    v = ctx.value(x)
    a = axis(ctx.attr("axis", -1), len(v.shape), ctx)
    p = ctx.attr("p", 2)

    def f(u):
        s = lax.reduce_sum(lax.abs(u) if p == 1 else lax.mul(u, u), [a])
        s = s if p == 1 else lax.sqrt(s)
        rest = [d for d in range(len(u.shape)) if d != a]
        norm = lax.broadcast_in_dim(s, u.shape, rest)
        zero = scalar(norm, 0)
        # A zero norm gives 0, not 0/0 (onnx's reference).
        return lax.select_n(lax.eq(norm, zero), lax.div(u, norm), zero)
    return in_float(f, v)


@op("MeanVarianceNormalization")
def _mvn(ctx, x):
    v = ctx.value(x)
    axes = sorted(axis(a, len(v.shape), ctx) for a in ctx.attr("axes", [0, 2, 3]))

    def f(u):
        _, var, c, kd = _moments(u, axes)
        sd = lax.add(lax.sqrt(var), scalar(var, 1e-9))
        return lax.div(c, lax.broadcast_in_dim(sd, u.shape, kd))
    return in_float(f, v)


@op("TopK")
def _topk(ctx, x, k=None):
    v = ctx.value(x)
    kk = int(ctx.attr("k")) if ctx.opset < 10 else int(ctx.static(k, "input 'K'").ravel()[0])
    rank = len(v.shape)
    a = axis(ctx.attr("axis", -1), rank, ctx)
    perm = [d for d in range(rank) if d != a] + [a]
    inv = [perm.index(d) for d in range(rank)]
    u = lax.transpose(v, perm) if a != rank - 1 else v
    largest = ctx.attr("largest", 1)
    d = u.dtype
    w = u if d in ("f32",) else lax.convert_element_type(u, "f64" if d != "f32" else d)
    if d not in ("f32", "f64"):
        w = lax.convert_element_type(u, "f64")
    if not largest:
        w = lax.neg(w)
    vals, idx = lax.top_k(w, kk)
    if not largest:
        vals = lax.neg(vals)
    vals = lax.convert_element_type(vals, d) if vals.dtype != d else vals
    idx = lax.convert_element_type(idx, "i64")
    if a != rank - 1:
        vals, idx = lax.transpose(vals, inv), lax.transpose(idx, inv)
    return vals, idx


@op("ConvTranspose")
def _conv_transpose(ctx, x, w, b=None):
    """The gradient of a convolution: a convolution of the input dilated by the strides with
    the kernel flipped and its in/out channels swapped per group."""
    v, k = ctx.value(x), ctx.value(w)
    n = len(v.shape) - 2
    g = ctx.attr("group", 1)
    kernel = list(ctx.attr("kernel_shape", k.shape[2:]))
    strides = list(ctx.attr("strides", [1] * n))
    dil = list(ctx.attr("dilations", [1] * n))
    outpad = list(ctx.attr("output_padding", [0] * n))
    sizes = list(v.shape[2:])
    auto = _text(ctx.attr("auto_pad"), "NOTSET")
    out_shape = ctx.attr("output_shape", None)
    if out_shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        target = list(out_shape)[-n:] if out_shape is not None else [s * st for s, st in
                                                                     zip(sizes, strides)]
        pads = []
        for i in range(n):
            total = (strides[i] * (sizes[i] - 1) + outpad[i] + (kernel[i] - 1) * dil[i] + 1
                     - target[i])
            if auto == "SAME_UPPER":
                pads.append((total // 2, total - total // 2))
            else:
                pads.append((total - total // 2, total // 2))
    elif auto == "VALID":
        pads = [(0, 0)] * n
    else:
        p = list(ctx.attr("pads", [0] * (2 * n)))
        pads = [(int(p[i]), int(p[i + n])) for i in range(n)]
    cin, mg = k.shape[0], k.shape[1]
    kk = lax.reshape(k, [g, cin // g, mg] + kernel)
    kk = lax.transpose(kk, [0, 2, 1] + list(range(3, 3 + n)))
    kk = lax.reshape(kk, [g * mg, cin // g] + kernel)
    kk = lax.rev(kk, list(range(2, 2 + n)))
    conv_pads = [((kernel[i] - 1) * dil[i] - lo, (kernel[i] - 1) * dil[i] - hi + outpad[i])
                 for i, (lo, hi) in enumerate(pads)]
    out = in_float(lambda a, c: lax.conv_general_dilated(
        a, c, [1] * n, conv_pads, lhs_dilation=strides, rhs_dilation=dil,
        feature_group_count=g), v, kk)
    if b is not None:
        out = lax.add(out, lax.broadcast_in_dim(ctx.value(b), out.shape, [1]))
    return out


@op("GroupNormalization")
def _group_norm(ctx, x, scale, bias):
    v = ctx.value(x)
    g = ctx.attr("num_groups")
    eps = ctx.attr("epsilon", 1e-5)
    shape = list(v.shape)
    n, c = shape[0], shape[1]

    def f(a, s, bb):
        grouped = lax.reshape(a, [n, g, int(np.prod(shape[1:])) // g])
        _, var, cen, kd = _moments(grouped, [2])
        inv = lax.broadcast_in_dim(lax.rsqrt(lax.add(var, scalar(var, eps))), grouped.shape, kd)
        y = lax.reshape(lax.mul(cen, inv), shape)
        return lax.add(lax.mul(y, s), bb)
    sv, bv = ctx.value(scale), ctx.value(bias)
    if ctx.opset < 21:  # scale and bias per group
        sv = lax.reshape(lax.broadcast_in_dim(sv, [g, c // g], [0]), [c])
        bv = lax.reshape(lax.broadcast_in_dim(bv, [g, c // g], [0]), [c])
    return in_float(f, v, lax.broadcast_in_dim(sv, shape, [1]),
                    lax.broadcast_in_dim(bv, shape, [1]))


@op("LRN")
def _lrn(ctx, x):
    v = ctx.value(x)
    size = ctx.attr("size")
    alpha, beta, bias = ctx.attr("alpha", 1e-4), ctx.attr("beta", 0.75), ctx.attr("bias", 1.0)
    rank = len(v.shape)

    def f(a):
        sq = lax.mul(a, a)
        win = [1, size] + [1] * (rank - 2)
        pads = [(0, 0), ((size - 1) // 2, size - 1 - (size - 1) // 2)] + [(0, 0)] * (rank - 2)
        s = lax.reduce_window_sum(sq, win, [1] * rank, pads)
        base = lax.add(scalar(s, bias), lax.mul(s, scalar(s, alpha / size)))
        return lax.div(a, lax.pow(base, scalar(base, beta)))
    return in_float(f, v)
