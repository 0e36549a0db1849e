"""Smaller ops from recent opsets: SwiGLU, RotaryEmbedding, CenterCropPad, ReverseSequence,
AffineGrid, Det."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .. import lax
from .. import numpy as anp
from ._context import numpy_dtype
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


@op("AffineGrid")
def _affine_grid(ctx, theta, size):
    """theta [N, d, d+1] times the homogeneous coordinates of the output's grid, which the
    size (known at load) decides and onnx's reference lays out."""
    from onnx.reference.ops.op_affine_grid import construct_original_grid
    spatial = [int(n) for n in ctx.static(size, "input 'size' (it decides the output's shape)")[2:]]
    t = ctx.value(theta)
    base = construct_original_grid(spatial, ctx.attr("align_corners", 0))
    points = int(np.prod(spatial))
    base = np.ascontiguousarray(base.reshape(points, len(spatial) + 1).T)
    grid = anp.matmul(t, ctx.value(base.astype(numpy_dtype(t.dtype))))  # [N, d, points]
    grid = lax.transpose(grid, [0, 2, 1])
    return lax.reshape(grid, [t.shape[0], *spatial, len(spatial)])


@op("Det")
def _det(ctx, x):
    """Gaussian elimination with partial pivoting, unrolled over the static n: the product of
    the pivots, negated per row swap; a zero pivot (a singular matrix) gives 0."""
    v = ctx.value(x)
    n = v.shape[-1]
    if len(v.shape) < 2 or v.shape[-2] != n:
        raise ctx.refuse(f"input of shape {list(v.shape)} is not [..., n, n]")
    return in_float(lambda a: _eliminate(a, n), v)


def _eliminate(a, n):
    shape = list(a.shape)
    batch = shape[:-2]
    rows = lax.broadcasted_iota("i32", shape[:-1], len(shape) - 2)  # [..., n]: each row's index
    det = lax.full(batch, 1, a.dtype)

    def row(m, i):  # [..., n]: row i of m
        return lax.reshape(_rows(m, i, i + 1), batch + [n])

    def spread(r):  # [..., n] as [..., 1, n] over every row
        return lax.broadcast_in_dim(r, shape, list(range(len(batch))) + [len(shape) - 1])

    def per_row(c):  # [..., n] as [..., n, 1] over every column
        return lax.broadcast_in_dim(c, shape, list(range(len(shape) - 1)))

    for k in range(n):
        col = lax.reshape(_cols(a, k, k + 1), batch + [n])
        below = lax.ge(rows, scalar(rows, k))
        mag = lax.select_n(below, scalar(col, -1), lax.abs(col))
        p = lax.argmax(mag, len(batch), "i32")
        is_p = lax.eq(rows, lax.broadcast_in_dim(p, batch + [n], list(range(len(batch)))))
        is_k = lax.eq(rows, scalar(rows, k))
        zeros = lax.full(shape, 0, a.dtype)
        row_p = lax.reduce_sum(lax.select_n(per_row(is_p), zeros, a), [len(shape) - 2])
        row_k = row(a, k)
        a = lax.add(a, lax.select_n(per_row(is_k), zeros, spread(lax.sub(row_p, row_k))))
        a = lax.add(a, lax.select_n(per_row(is_p), zeros, spread(lax.sub(row_k, row_p))))
        swapped = lax.ne(p, lax.full(batch, k, "i32"))
        pivot = lax.reshape(_rows(_cols(a, k, k + 1), k, k + 1), batch)
        det = lax.mul(det, lax.select_n(swapped, pivot, lax.neg(pivot)))
        singular = lax.eq(pivot, scalar(pivot, 0))
        safe = lax.select_n(singular, pivot, scalar(pivot, 1))
        factors = lax.div(lax.reshape(_cols(a, k, k + 1), batch + [n]),
                          lax.broadcast_in_dim(safe, batch + [n], list(range(len(batch)))))
        factors = lax.select_n(lax.gt(rows, scalar(rows, k)), scalar(factors, 0), factors)
        a = lax.sub(a, lax.mul(per_row(factors), spread(row(a, k))))
    return det


def _rows(m, lo, hi):
    shape = list(m.shape)
    return lax.slice(m, [0] * (len(shape) - 2) + [lo, 0], shape[:-2] + [hi, shape[-1]])


def _cols(m, lo, hi):
    shape = list(m.shape)
    return lax.slice(m, [0] * (len(shape) - 1) + [lo], shape[:-1] + [hi])
