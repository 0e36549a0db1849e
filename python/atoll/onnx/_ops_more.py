"""Smaller ops from recent opsets: SwiGLU, RotaryEmbedding, CenterCropPad, ReverseSequence."""

from __future__ import annotations

from types import SimpleNamespace

from .. import lax
from ._ops import op
from ._util import in_float, scalar


@op("SwiGLU")
def _swiglu(ctx, a, b):
    x, y = ctx.value(a), ctx.value(b)
    alpha = ctx.attr("alpha", 1.0)
    return in_float(lambda u, w: lax.mul(lax.mul(u, lax.logistic(lax.mul(u, scalar(u, alpha)))), w),
                    x, y)


def _take_rows(cache, pos):
    """cache[pos]: cache [max_pos, d], pos [b, s] -> [b, s, d]."""
    p = pos if pos.dtype in ("i32", "i64") else lax.convert_element_type(pos, "i64")
    start = lax.reshape(p, list(p.shape) + [1])
    dims = SimpleNamespace(offset_dims=(len(p.shape),), collapsed_slice_dims=(0,),
                           start_index_map=(0,))
    return lax.gather(cache, start, dims, [1, cache.shape[1]], mode="clip")


@op("RotaryEmbedding")
def _rotary(ctx, x, cos_cache, sin_cache, position_ids=None):
    v = ctx.value(x)
    shape = list(v.shape)
    if len(shape) == 4:
        u = lax.transpose(v, [0, 2, 1, 3])
    else:
        heads = ctx.attr("num_heads", 0)
        if not heads:
            raise ctx.refuse("3-D input needs num_heads")
        u = lax.reshape(v, [shape[0], shape[1], heads, shape[2] // heads])
    b, s, h, hd = u.shape
    rd = ctx.attr("rotary_embedding_dim", 0) or hd
    cos, sin = ctx.value(cos_cache), ctx.value(sin_cache)
    if position_ids is not None:
        pos = ctx.value(position_ids)
        cos, sin = _take_rows(cos, pos), _take_rows(sin, pos)
    dims = [0, 1, 3] if len(cos.shape) == 3 else [1, 3]
    cos = lax.broadcast_in_dim(cos, [b, s, h, rd // 2], dims)
    sin = lax.broadcast_in_dim(sin, [b, s, h, rd // 2], dims)
    rot = lax.slice(u, [0, 0, 0, 0], [b, s, h, rd])
    inter = ctx.attr("interleaved", 0)
    if inter:
        x1 = lax.slice(rot, [0, 0, 0, 0], [b, s, h, rd - 1], [1, 1, 1, 2])
        x2 = lax.slice(rot, [0, 0, 0, 1], [b, s, h, rd], [1, 1, 1, 2])
    else:
        x1 = lax.slice(rot, [0, 0, 0, 0], [b, s, h, rd // 2])
        x2 = lax.slice(rot, [0, 0, 0, rd // 2], [b, s, h, rd])
    real = lax.sub(lax.mul(cos, x1), lax.mul(sin, x2))
    imag = lax.add(lax.mul(sin, x1), lax.mul(cos, x2))
    if inter:
        pair = [b, s, h, rd // 2, 1]
        rot = lax.reshape(lax.concatenate([lax.reshape(real, pair), lax.reshape(imag, pair)], 4),
                          [b, s, h, rd])
    else:
        rot = lax.concatenate([real, imag], 3)
    out = rot if rd == hd else lax.concatenate([rot, lax.slice(u, [0, 0, 0, rd], [b, s, h, hd])], 3)
    if len(shape) == 3:
        return lax.reshape(out, shape)
    return lax.transpose(out, [0, 2, 1, 3])


@op("CenterCropPad")
def _center_crop_pad(ctx, x, shape):
    v = ctx.value(x)
    target = [int(t) for t in ctx.static(shape, "input 'shape'").ravel()]
    rank = len(v.shape)
    axes = [a % rank for a in ctx.attr("axes", list(range(rank)))]
    lo, hi = [0] * rank, list(v.shape)
    pads = [(0, 0, 0)] * rank
    for a, t in zip(axes, target):
        n = v.shape[a]
        if t < n:
            lo[a] = (n - t) // 2
            hi[a] = lo[a] + t
        elif t > n:
            front = (t - n) // 2
            pads[a] = (front, t - n - front, 0)
    v = lax.slice(v, lo, hi)
    return lax.pad(v, lax.full((), 0, v.dtype), pads)


@op("ReverseSequence")
def _reverse_sequence(ctx, x, lens):
    v = ctx.value(x)
    ta, ba = ctx.attr("time_axis", 0), ctx.attr("batch_axis", 1)
    n = ctx.value(lens)
    n = n if n.dtype == "i64" else lax.convert_element_type(n, "i64")
    shape = list(v.shape)
    j = lax.broadcasted_iota("i64", shape, ta)
    ln = lax.broadcast_in_dim(n, shape, [ba])
    src = lax.select_n(lax.lt(j, ln), j, lax.sub(lax.sub(ln, scalar(ln, 1)), j))
    cols = [lax.reshape(src if d == ta else lax.broadcasted_iota("i64", shape, d), shape + [1])
            for d in range(len(shape))]
    start = lax.concatenate(cols, len(shape))
    dims = SimpleNamespace(offset_dims=(), collapsed_slice_dims=tuple(range(len(shape))),
                           start_index_map=tuple(range(len(shape))))
    return lax.gather(v, start, dims, [1] * len(shape), mode="clip")
