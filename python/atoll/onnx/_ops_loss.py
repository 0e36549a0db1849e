"""Losses and their helpers: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, OneHot."""

from __future__ import annotations

from .. import lax
from ._ops import op
from ._util import scalar


def _text(v, default):
    v = default if v is None else v
    return v.decode() if isinstance(v, bytes) else v


def _nll(ctx, logp, target, weight):
    """-logp[n, target, d...] * weight[target], with ignore_index, and the reduction."""
    shape = list(logp.shape)
    t = ctx.value(target)
    if t.dtype != "i64":
        t = lax.convert_element_type(t, "i64")
    rest = [0] + list(range(2, len(shape)))
    onehot = lax.eq(lax.broadcasted_iota("i64", shape, 1), lax.broadcast_in_dim(t, shape, rest))
    picked = lax.reduce_sum(lax.select_n(onehot, lax.full(shape, 0, logp.dtype), logp), [1])
    if weight is not None:
        wb = lax.broadcast_in_dim(ctx.value(weight), shape, [1])
        w = lax.reduce_sum(lax.select_n(onehot, lax.full(shape, 0, logp.dtype), wb), [1])
    else:
        w = lax.full(list(t.shape), 1, logp.dtype)
    ignore = ctx.attr("ignore_index", None)
    if ignore is not None:
        w = lax.select_n(lax.eq(t, scalar(t, ignore)), w, scalar(w, 0))
    loss = lax.neg(lax.mul(picked, w))
    reduction = _text(ctx.attr("reduction"), "mean")
    if reduction == "none":
        return loss
    axes = list(range(len(loss.shape)))
    total = lax.reduce_sum(loss, axes)
    if reduction == "sum":
        return total
    if reduction != "mean":
        raise ctx.refuse(f"reduction={reduction!r} is not supported")
    return lax.div(total, lax.reduce_sum(w, axes))


def _f32(v):
    return lax.convert_element_type(v, "f32") if v.dtype in ("f16", "bf16") else v


@op("NegativeLogLikelihoodLoss")
def _nll_op(ctx, x, target, weight=None):
    v = ctx.value(x)
    out = _nll(ctx, v, target, weight)
    return out


@op("SoftmaxCrossEntropyLoss")
def _sce(ctx, scores, labels, weights=None):
    v = ctx.value(scores)
    d = v.dtype
    u = _f32(v)
    shape = list(u.shape)
    others = [i for i in range(len(shape)) if i != 1]
    m = lax.broadcast_in_dim(lax.reduce_max(u, [1]), shape, others)
    s = lax.sub(u, m)
    logp = lax.sub(s, lax.broadcast_in_dim(lax.log(lax.reduce_sum(lax.exp(s), [1])), shape, others))
    w = None if weights is None else _f32(ctx.value(weights))
    loss = _nll(ctx, logp, labels, w)
    if d != loss.dtype:
        loss, logp = lax.convert_element_type(loss, d), lax.convert_element_type(logp, d)
    return loss, logp


@op("OneHot")
def _one_hot(ctx, indices, depth, values):
    i = ctx.value(indices)
    n = int(ctx.static(depth, "input 'depth'").ravel()[0])
    vals = ctx.value(values)
    a = ctx.attr("axis", -1)
    rank = len(i.shape) + 1
    a = a % rank
    shape = list(i.shape)
    shape.insert(a, n)
    if i.dtype not in ("i32", "i64"):
        i = lax.convert_element_type(i, "i64")
    i = lax.select_n(lax.lt(i, scalar(i, 0)), i, lax.add(i, scalar(i, n)))
    hit = lax.eq(lax.broadcasted_iota(i.dtype, shape, a),
                 lax.broadcast_in_dim(i, shape, [d for d in range(rank) if d != a]))
    lo = lax.broadcast_in_dim(lax.reshape(lax.slice(vals, [0], [1]), []), shape, [])
    hi = lax.broadcast_in_dim(lax.reshape(lax.slice(vals, [1], [2]), []), shape, [])
    return lax.select_n(hit, lo, hi)
