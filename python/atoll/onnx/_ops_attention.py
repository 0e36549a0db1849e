"""Attention (opset 23+, as onnx's reference defines it: 3-D or 4-D inputs, masks, causal
and sliding windows, the KV cache, grouped heads, softcap, the qk output modes) and
RMSNormalization."""

from __future__ import annotations

import math

from .. import lax
from .. import numpy as anp
from ._ops import op
from ._util import axis, broadcast, normalization_input, scalar

NEG_INF = -math.inf


def _to(v, d):
    return v if v.dtype == d else lax.convert_element_type(v, d)


def _heads(x, n):
    b, s, h = x.shape
    return lax.transpose(lax.reshape(x, [b, s, n, h // n]), [0, 2, 1, 3])


def _bias_of(allowed, c):
    """0 where allowed, -inf elsewhere."""
    shape = list(allowed.shape)
    return lax.select_n(allowed, lax.full(shape, NEG_INF, c), lax.full(shape, 0, c))


def _add(a, b):
    x, y = anp.broadcast_to(a, anp._broadcast_shapes(tuple(a.shape), tuple(b.shape))), b
    y = anp.broadcast_to(y, tuple(x.shape))
    return lax.add(x, y)


@op("Attention", fold=False)
def _attention(ctx, q, k, v, mask=None, past_key=None, past_value=None, nonpad=None):
    Q, K, V = ctx.value(q), ctx.value(k), ctx.value(v)
    d = Q.dtype
    c = "f64" if d == "f64" else "f32"
    rank3 = len(Q.shape) == 3
    if rank3:
        hq, hk = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
        if hq is None or hk is None:
            raise ctx.refuse("3-D inputs need q_num_heads and kv_num_heads")
        Q, K, V = _heads(Q, hq), _heads(K, hk), _heads(V, hk)
    if past_key is not None:
        K = lax.concatenate([ctx.value(past_key), K], 2)
        V = lax.concatenate([ctx.value(past_value), V], 2)
    present_k, present_v = K, V
    B, Hq, nq, D = Q.shape
    Hk, nkv = K.shape[1], K.shape[2]
    past = 0 if past_key is None else ctx.value(past_key).shape[2]
    iq = lax.broadcasted_iota("i64", [nq, nkv], 0)
    jk = lax.broadcasted_iota("i64", [nq, nkv], 1)
    bias = lax.full([nq, nkv], 0, c)
    if mask is not None:
        m = ctx.value(mask)
        pad = nkv - m.shape[-1]
        if pad > 0:
            fill = lax.full((), False if m.dtype == "bool" else NEG_INF, m.dtype)
            m = lax.pad(m, fill, [(0, 0, 0)] * (len(m.shape) - 1) + [(0, pad, 0)])
        m = _bias_of(m, c) if m.dtype == "bool" else _to(m, c)
        bias = _add(bias, m)
    seqlen = None
    if nonpad is not None:
        seqlen = _to(ctx.value(nonpad), "i64")
        seqlen = lax.broadcast_in_dim(seqlen, [B, 1, nq, nkv], [0])
        iq4 = lax.broadcasted_iota("i64", [B, 1, nq, nkv], 2)
        jk4 = lax.broadcasted_iota("i64", [B, 1, nq, nkv], 3)

    def frontier_diff():
        """(i + offset) - j, per batch where the cache is external."""
        if past_key is None and seqlen is not None:
            return lax.sub(lax.add(iq4, lax.sub(seqlen, scalar(seqlen, nq))), jk4)
        return lax.sub(lax.add(iq, scalar(iq, past)), jk)

    if ctx.attr("is_causal", 0):
        diff = frontier_diff()
        bias = _add(bias, _bias_of(lax.ge(diff, scalar(diff, 0)), c))
    left, right = ctx.attr("left_window_size", -1), ctx.attr("right_window_size", -1)
    if left >= 0 or right >= 0:
        diff = frontier_diff()
        ok = lax.full(list(diff.shape), True, "bool")
        if left >= 0:
            ok = lax.bitwise_and(ok, lax.le(diff, scalar(diff, left)))
        if right >= 0:
            ok = lax.bitwise_and(ok, lax.ge(diff, scalar(diff, -right)))
        bias = _add(bias, _bias_of(ok, c))
    if seqlen is not None:
        bias = _add(bias, _bias_of(lax.lt(jk4, seqlen), c))
    if Hq != Hk:
        rep = Hq // Hk
        K = lax.reshape(lax.broadcast_in_dim(K, [B, Hk, rep, nkv, D], [0, 1, 3, 4]),
                        [B, Hq, nkv, D])
        Dv = V.shape[3]
        V = lax.reshape(lax.broadcast_in_dim(V, [B, Hk, rep, nkv, Dv], [0, 1, 3, 4]),
                        [B, Hq, nkv, Dv])
    sc = ctx.attr("scale", None)
    s = math.sqrt(sc if sc is not None else 1 / math.sqrt(D))
    Qs, Ks = lax.mul(Q, scalar(Q, s)), lax.mul(K, scalar(K, s))
    qk = lax.dot_general(_to(Qs, c), _to(Ks, c), (((3,), (3,)), ((0, 1), (0, 1))))
    cap = ctx.attr("softcap", None)
    if cap:
        qk = lax.mul(lax.tanh(lax.div(qk, scalar(qk, cap))), scalar(qk, cap))
    with_bias = _add(qk, bias) if tuple(bias.shape) != tuple(qk.shape) else lax.add(qk, bias)
    full_bias = anp.broadcast_to(bias, anp._broadcast_shapes(tuple(bias.shape), tuple(qk.shape)))
    mx = lax.reduce_max(with_bias, [3])
    shape = list(with_bias.shape)
    keep = [0, 1, 2]
    safe = lax.select_n(lax.eq(mx, scalar(mx, NEG_INF)), mx, scalar(mx, 0))
    e = lax.exp(lax.sub(with_bias, lax.broadcast_in_dim(safe, shape, keep)))
    tot = lax.reduce_sum(e, [3])
    tot = lax.select_n(lax.eq(tot, scalar(tot, 0)), tot, scalar(tot, 1))
    p = lax.div(e, lax.broadcast_in_dim(tot, shape, keep))
    bmax = lax.reduce_max(full_bias, [len(full_bias.shape) - 1])
    masked_row = lax.eq(bmax, scalar(bmax, NEG_INF))
    masked_row = anp.broadcast_to(lax.reshape(masked_row, list(masked_row.shape) + [1]),
                                  tuple(shape))
    p = lax.select_n(masked_row, p, lax.full(shape, 0, c))
    mode = ctx.attr("qk_matmul_output_mode", 0)
    qk_out = {0: qk, 1: qk, 2: with_bias, 3: p}.get(mode)
    if qk_out is None:
        raise ctx.refuse(f"qk_matmul_output_mode={mode} is not supported")
    y = lax.dot_general(_to(_to(p, d), c), _to(V, c), (((3,), (2,)), ((0, 1), (0, 1))))
    y = _to(y, d)
    if rank3:
        y = lax.transpose(y, [0, 2, 1, 3])
        y = lax.reshape(y, [y.shape[0], y.shape[1], y.shape[2] * y.shape[3]])
    return y, present_k, present_v, _to(qk_out, d)


@op("RMSNormalization")
def _rms_norm(ctx, x, scale):
    v, d, u, a, axes, eps = normalization_input(ctx, x)
    n = 1
    for i in axes:
        n *= v.shape[i]
    sq = lax.reduce_sum(lax.mul(u, u), axes)
    ms = lax.div(sq, scalar(sq, n))
    inv = lax.rsqrt(lax.add(ms, scalar(ms, eps)))
    y = lax.mul(u, lax.broadcast_in_dim(inv, list(u.shape), list(range(a))))
    y = _to(y, d)
    return lax.mul(*broadcast(ctx, y, scale))


@op("Swish")
def _swish(ctx, x):
    v = ctx.value(x)
    alpha = ctx.attr("alpha", 1.0)
    return lax.mul(v, lax.logistic(lax.mul(v, scalar(v, alpha))))


@op("CumProd")
def _cumprod(ctx, x, ax):
    v = ctx.value(x)
    a = axis(int(ctx.static(ax, "input 'axis'").ravel()[0]), len(v.shape), ctx)
    rev = bool(ctx.attr("reverse", 0))
    out = lax.cumprod(v, a, rev)
    if ctx.attr("exclusive", 0):
        n = v.shape[a]
        one_shape = list(v.shape)
        one_shape[a] = 1
        ones = lax.full(one_shape, 1, v.dtype)
        lo, hi = [0] * len(v.shape), list(v.shape)
        if rev:
            lo[a] = 1
            out = lax.concatenate([lax.slice(out, lo, hi), ones], a)
        else:
            hi[a] = n - 1
            out = lax.concatenate([ones, lax.slice(out, lo, hi)], a)
    return out
